"""The Spark Structured Streaming engine (see docs/spark-design.md).

Importing this package is cheap; pyspark is imported by the modules that need it, and
only when the Spark engine is chosen. The public entry point is
``adapters.spark.engine.SparkEngine``.
"""
