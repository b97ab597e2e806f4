"""Tests of ``adapters.spark.output``."""
