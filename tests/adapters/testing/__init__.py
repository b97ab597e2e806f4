"""Tests of ``adapters.testing``."""
