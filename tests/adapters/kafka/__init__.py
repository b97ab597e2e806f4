"""Tests of ``adapters.kafka``."""
