"""Tests of ``bench/``: the latency benchmark's logic, and a short run of it against the kafka engine."""
