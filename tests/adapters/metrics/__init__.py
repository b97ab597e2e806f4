"""Tests of ``adapters.metrics``."""
