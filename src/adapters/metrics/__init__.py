"""Metrics for Prometheus: the catalog of what every engine reports, and its exposition."""

from adapters.metrics._catalog import BATCH_SECONDS, CATALOG, LATENCY_SECONDS, Metric
from adapters.metrics._prometheus import PrometheusMetrics

__all__ = [
    "BATCH_SECONDS",
    "CATALOG",
    "LATENCY_SECONDS",
    "Metric",
    "PrometheusMetrics",
]
