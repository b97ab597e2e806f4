"""The Spark Structured Streaming engine.

This package is the engine's door (``from adapters.spark import build_spark_engine``), and
importing it is cheap: the names of its modules that import pyspark are imported when first
asked for (``_LAZY``), so pyspark is loaded only when the Spark engine is chosen. Each
sub-package is the door of its own modules. Sub-packages, by concept and floor (a package
imports only those below it; ``scripts/imports adapters.spark --packages`` prints the graph):
``shared`` (setup errors, the batch's time, key columns, endpoints), ``runtime`` (the session,
jars, Spark's log, start-up checks), ``checkpoint`` (what the engine keeps in its checkpoint),
``stream`` (the plan), ``metrics``, ``output`` (the writers), ``batch`` (a micro-batch's parts
and the two judges); this package's own modules (the engine, restarts, stopping, the trigger)
assemble and run them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from adapters.spark._stopping import QueryStopper, StoppedMidBatch
from adapters.spark._trigger import DEFAULT_TRIGGER

if TYPE_CHECKING:
    from adapters.spark._engine import SparkEngine, build_spark_engine
    from adapters.spark._restart import query_failure, run_restarting, run_retrying_writes
    from adapters.spark._saved_state import CheckpointState
    from adapters.spark._waiting import stop_after_running_batch

_LAZY = {  # the names whose modules import pyspark: imported when first asked for
    "SparkEngine": "adapters.spark._engine",
    "build_spark_engine": "adapters.spark._engine",
    "query_failure": "adapters.spark._restart",
    "run_restarting": "adapters.spark._restart",
    "run_retrying_writes": "adapters.spark._restart",
    "CheckpointState": "adapters.spark._saved_state",
    "stop_after_running_batch": "adapters.spark._waiting",
}


def __getattr__(name: str) -> Any:
    """A name of a module that imports pyspark, imported on first use (PEP 562): importing
    this package stays cheap for the engines that do not run Spark."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_TRIGGER",
    "CheckpointState",
    "QueryStopper",
    "SparkEngine",
    "StoppedMidBatch",
    "build_spark_engine",
    "query_failure",
    "run_restarting",
    "run_retrying_writes",
    "stop_after_running_batch",
]
