"""Tests of ``adapters.redis``."""
