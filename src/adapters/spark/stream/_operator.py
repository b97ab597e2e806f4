"""Calls of the engine's JVM code from a plan: the stateful operator and its helpers.

``apply_operator`` applies ``WindowDedup`` (the domain's judgement as a ``transformWithState``
processor in event time, per key inside the JVM); ``running_newest`` gives each row its partition's newest
rule time so far (``RunningNewest``); ``state_row_counter`` is the accumulator through which
the operator counts the keys it creates and removes (``metrics._state_rows`` turns it into a
gauge). The jar holding these classes is built by ``runtime._jars``.
"""

from __future__ import annotations

__all__ = ["apply_operator", "running_newest", "state_row_counter"]


def state_row_counter(spark):
    """A new ``StateRowCount`` registered with the SparkContext, for one query's operator."""
    counter = spark._jvm.streamdedup.stream.StateRowCount()
    spark.sparkContext._jsc.sc().register(counter, "streamdedup.state_rows")
    return counter


def apply_operator(df, key_column: str, state_rows, horizons, newest):
    """Apply the JVM operator to ``df`` (a streaming DataFrame); returns ``df`` plus ``verdict``.

    ``df`` needs long columns ``t``, ``ord``, ``window``, ``lateness``, the boolean ``judged``, the
    batch's ``CLOCK`` and string columns ``rule`` and ``lane``. Spark's event-time watermark, which
    wakes the keys whose emissions may have expired, follows the judged rows' times, none past
    the batch's second (``domain._watermarks.clock_bound``). ``state_rows``: the ``StateRowCount`` that counts the operator's keys
    (``state_row_counter``); ``horizons``/``newest``: the ``RuleHorizons`` and ``NewestTimes`` of
    ``stream._watermarks.BatchWatermarks``.
    """
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    from adapters.spark.shared import clock_seconds

    spark = df.sparkSession
    operator = spark._jvm.streamdedup.stream.WindowDedup
    clock = F.when(F.col("judged"), F.least(F.col("t"), clock_seconds()))
    return DataFrame(operator.judge(df._jdf, key_column, clock._jc, state_rows, horizons, newest), spark)


def running_newest(df):
    """``df`` plus ``seen``: each judged row's newest rule time so far in its input partition
    (``RunningNewest``: a Kafka partition's records, in offset order)."""
    from pyspark.sql import DataFrame

    spark = df.sparkSession
    return DataFrame(spark._jvm.streamdedup.stream.RunningNewest.apply(df._jdf), spark)
