"""Tests of ``domain``: the rules, events, state versions, policies and pipeline, and the golden scenarios through the core."""
