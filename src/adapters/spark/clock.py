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
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F


def batch_micros() -> Column:
    """``unix_micros(current_timestamp())``: the micro-batch's time in microseconds."""
    held = F.reflect(F.lit("java.lang.String"), F.lit("valueOf"), F.unix_micros(F.current_timestamp()))
    return held.cast("long")


def batch_timestamp() -> Column:
    """``current_timestamp()``."""
    return F.timestamp_micros(batch_micros())


def batch_millis() -> Column:
    """``unix_millis(current_timestamp())``."""
    return F.unix_millis(batch_timestamp())


def batch_seconds() -> Column:
    """``unix_seconds(current_timestamp())``."""
    return F.unix_seconds(batch_timestamp())
