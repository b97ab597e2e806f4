"""Tests of ``adapters.json``."""
