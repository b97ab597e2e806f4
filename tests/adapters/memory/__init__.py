"""Tests of ``adapters.memory``."""
