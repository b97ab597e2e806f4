"""The Spark Structured Streaming engine.

Importing this package is cheap; pyspark is imported by the modules that need it, and only
when the Spark engine is chosen. The entry point is ``adapters.spark.engine``
(``build_spark_engine``, ``SparkEngine``); its parts are typed in ``parts`` and its setup
errors defined in ``errors``. Sub-packages, by concept: ``runtime`` (the session, jars, Spark's
log, start-up checks), ``checkpoint`` (what the engine keeps in its checkpoint), ``stream``
(the plan and its judges), ``output`` (the writers), ``metrics``. Modules inside the engine
import each other's modules, never a sub-package's ``__init__``.
"""
