"""Calls of the engine's JVM code from a plan: the stateful operator and its helpers.

``apply_operator`` applies ``WindowDedup`` (the domain's judgement as a ``flatMapGroupsWithState``
function, per key inside the JVM); ``running_newest`` gives each row its partition's newest
rule time so far (``RunningNewest``); ``state_row_counter`` is the accumulator through which
the operator counts the keys it creates and removes (``metrics.state_rows`` turns it into a
gauge). The jar holding these classes is built by ``runtime.jars``.
"""

from __future__ import annotations

__all__ = ["apply_operator", "running_newest", "state_row_counter"]


def state_row_counter(spark):
    """A new ``StateRowCount`` registered with the SparkContext, for one query's operator."""
    counter = spark._jvm.streamdedup.spark.StateRowCount()
    spark.sparkContext._jsc.sc().register(counter, "streamdedup.state_rows")
    return counter

def apply_operator(df, key_column: str, idle_timeout_ms: int, state_rows, horizons, newest):
    """Apply the JVM operator to ``df`` (a streaming DataFrame); returns ``df`` plus ``verdict``.

    ``df`` needs long columns ``t``, ``ord``, ``window``, ``lateness`` and string columns
    ``rule`` and ``lane``. ``state_rows``: the ``StateRowCount`` that counts the operator's keys
    (``state_row_counter``); ``horizons``/``newest``: the ``RuleHorizons`` and ``NewestTimes`` of
    ``stream.watermarks.BatchWatermarks``.
    """
    from pyspark.sql import DataFrame

    spark = df.sparkSession
    operator = spark._jvm.streamdedup.spark.WindowDedup
    return DataFrame(operator.judge(df._jdf, key_column, int(idle_timeout_ms), state_rows, horizons, newest), spark)


def running_newest(df):
    """``df`` plus ``seen``: each judged row's newest rule time so far in its input partition
    (``RunningNewest``: a Kafka partition's records, in offset order)."""
    from pyspark.sql import DataFrame

    spark = df.sparkSession
    return DataFrame(spark._jvm.streamdedup.spark.RunningNewest.apply(df._jdf), spark)
