"""The Spark engine's metrics: the accounting observed in the plan and read by a
``StreamingQueryListener`` with the progress gauges (``_listener.ProgressListener``), and the
state-row gauge (``_state_rows.StateRowGauge``)."""

from adapters.spark.metrics._cells import REASONS, VERDICTS, CellLayout
from adapters.spark.metrics._events import JsonEventListener
from adapters.spark.metrics._latency import BOUNDS, PREFIX, TOTAL, latency_counts, publish_latency
from adapters.spark.metrics._listener import ProgressListener, accounting_metrics, bucket_of, counted, is_input
from adapters.spark.metrics._state_rows import StateRowGauge
from adapters.spark.metrics._timings import BatchTimings

__all__ = [
    "BOUNDS",
    "PREFIX",
    "REASONS",
    "TOTAL",
    "VERDICTS",
    "BatchTimings",
    "CellLayout",
    "JsonEventListener",
    "ProgressListener",
    "StateRowGauge",
    "accounting_metrics",
    "bucket_of",
    "counted",
    "is_input",
    "latency_counts",
    "publish_latency",
]
