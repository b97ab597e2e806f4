"""The Spark engine's metrics: the accounting observed in the plan and read by a
``StreamingQueryListener`` with the progress gauges, and the state-row gauge."""

from adapters.spark.exports import lazy

_MODULE_OF = {
    "ProgressListener": "listener",
    "accounting_metrics": "listener",
    "accounting_of": "listener",
    "bucket_of": "listener",
    "is_input": "listener",
    "StateRowGauge": "state_rows",
}
__all__ = sorted(_MODULE_OF)  # noqa: PLE0605 (goes with lazy exports, issue 55)
__getattr__ = lazy(__name__, _MODULE_OF)
