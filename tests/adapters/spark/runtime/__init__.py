"""Tests of ``adapters.spark.runtime``."""
