"""The Spark Structured Streaming engine.

Importing this package is cheap; pyspark is imported by the modules that need it, and only
when the Spark engine is chosen. The entry point is ``adapters.spark.engine``
(``build_spark_engine``, ``SparkEngine``). Sub-packages, by concept and floor (a package
imports only those below it; ``scripts/imports adapters.spark --packages`` prints the graph):
``shared`` (setup errors, the batch's time, key columns, endpoints), ``runtime`` (the session,
jars, Spark's log, start-up checks), ``checkpoint`` (what the engine keeps in its checkpoint),
``stream`` (the plan), ``metrics``, ``output`` (the writers), ``batch`` (a micro-batch's parts
and the two judges); this package's own modules (the engine, restarts, stopping, the trigger)
assemble and run them.
"""
