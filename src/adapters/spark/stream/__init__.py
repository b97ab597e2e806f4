"""The streaming plan: sources, strict parsing in Spark expressions, the rules compiled into
columns (``_plan.DedupPlan``), the JVM operator's calls (``_operator``), INVALIDATE
notifications (``_invalidation``) and the per-partition watermarks each micro-batch is judged
against (``_watermarks.BatchWatermarks``)."""

from adapters.spark.stream._invalidation import with_notifications
from adapters.spark.stream._operator import state_row_counter
from adapters.spark.stream._parse import parse
from adapters.spark.stream._plan import (
    DEAD_LETTER,
    DUPLICATE,
    EMIT,
    NOTIFICATION,
    REJECTED_NOTIFICATION,
    VERDICT_COLUMNS,
    DedupPlan,
    Hook,
)
from adapters.spark.stream._sources import ARRIVAL_ORDER, kafka_source_options, number_lines, read_stream, source_tasks
from adapters.spark.stream._watermarks import BatchWatermarks

__all__ = [
    "ARRIVAL_ORDER",
    "DEAD_LETTER",
    "DUPLICATE",
    "EMIT",
    "NOTIFICATION",
    "REJECTED_NOTIFICATION",
    "VERDICT_COLUMNS",
    "BatchWatermarks",
    "DedupPlan",
    "Hook",
    "kafka_source_options",
    "number_lines",
    "parse",
    "read_stream",
    "source_tasks",
    "state_row_counter",
    "with_notifications",
]
