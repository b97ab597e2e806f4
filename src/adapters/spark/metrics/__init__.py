"""The Spark engine's metrics: the accounting observed in the plan and read by a
``StreamingQueryListener`` with the progress gauges (``listener.ProgressListener``), and the
state-row gauge (``state_rows.StateRowGauge``)."""

from adapters.spark.metrics.cells import REASONS, VERDICTS, CellLayout
from adapters.spark.metrics.events import JsonEventListener
from adapters.spark.metrics.latency import BOUNDS, PREFIX, TOTAL, latency_counts, publish_latency
from adapters.spark.metrics.listener import ProgressListener, accounting_metrics, bucket_of, counted, is_input
from adapters.spark.metrics.state_rows import StateRowGauge
from adapters.spark.metrics.timings import BatchTimings

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
