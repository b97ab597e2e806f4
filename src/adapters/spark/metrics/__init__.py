"""The Spark engine's metrics: the accounting observed in the plan and read by a
``StreamingQueryListener`` with the progress gauges, and the state-row gauge."""

from adapters.spark.metrics.listener import (ProgressListener, accounting_metrics, accounting_of, bucket_of,
                                             is_input)
from adapters.spark.metrics.state_rows import StateRowGauge

__all__ = ["ProgressListener", "StateRowGauge", "accounting_metrics", "accounting_of", "bucket_of", "is_input"]
