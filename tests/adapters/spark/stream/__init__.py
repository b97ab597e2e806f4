"""Tests of ``adapters.spark.stream``."""
