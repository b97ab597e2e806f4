"""Tests of ``adapters.spark.checkpoint``."""
