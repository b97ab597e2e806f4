"""The micro-batch's time as a column Spark does not compile into its generated code.

In a streaming query Spark replaces ``current_timestamp()`` with the micro-batch's time
(``batchTimestampMs``, the same on a replay), whose generated code is that time as a long
literal. The Java source of every stage that reads the clock then differs from batch to
batch, so Spark compiles it again in every micro-batch (60–150 ms for the plan's largest
stage on this project's machines; docs/design/latency.md). Here the time is read through
``reflect`` (``String.valueOf``), an expression Spark evaluates without generating code for
it: the generated source refers to the expression object instead of spelling its value, so
it is the same in every batch and compiled once. The value is exactly
``current_timestamp()``'s, on a streaming or a static DataFrame.

``reflect`` has a cost of its own: a projection holding an expression without generated code
is left out of whole-stage code generation, and Spark then writes that projection's Java
source again in every task (a quarter of the executors' time with the plan's parse and
verdict expressions in it). So a plan reads the clock once, into the column ``CLOCK``
(``with_clock``: a projection of its own, which Spark does not merge with the projections that
read it, the clock not being deterministic), and every other expression reads that column
(``clock_seconds``, ``clock_millis``, ``clock_micros``).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

CLOCK = "clock"  # the micro-batch's time in microseconds (``with_clock``)


def batch_micros() -> Column:
    """``unix_micros(current_timestamp())``: the micro-batch's time in microseconds."""
    held = F.reflect(F.lit("java.lang.String"), F.lit("valueOf"), F.unix_micros(F.current_timestamp()))
    return held.cast("long")


def batch_timestamp() -> Column:
    """``current_timestamp()``."""
    return F.timestamp_micros(batch_micros())


def with_clock(df: DataFrame) -> DataFrame:
    """``df`` plus ``CLOCK`` (``batch_micros``), unless it has it."""
    return df if CLOCK in df.columns else df.withColumn(CLOCK, batch_micros())


def clock_micros() -> Column:
    """The ``CLOCK`` column: ``unix_micros(current_timestamp())``."""
    return F.col(CLOCK)


def clock_millis() -> Column:
    """``unix_millis(current_timestamp())``, from ``CLOCK``."""
    return F.unix_millis(F.timestamp_micros(clock_micros()))


def clock_seconds() -> Column:
    """``unix_seconds(current_timestamp())``, from ``CLOCK``."""
    return F.unix_seconds(F.timestamp_micros(clock_micros()))
