"""Tests of ``adapters.spark.metrics``."""
