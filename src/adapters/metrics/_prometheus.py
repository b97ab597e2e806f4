"""``PrometheusMetrics``: the ``domain._ports.Metrics`` of a running service, in a prometheus_client registry.

Every metric of the catalog is registered at start, and every labelled counter's and
histogram's series for the labels known then (each rule and ``none``; each dead-letter reason) starts at 0, so rates and
alerts have a series before the first record; so does a process that restarted with no new input.
The registry also carries prometheus_client's process and platform collectors. ``exposition()``
is the text format served at ``/metrics``. A name the catalog does not hold is logged once and
dropped: an engine's figure must never stop it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

from adapters.metrics._catalog import CATALOG, Metric
from domain import DEAD_LETTER_REASONS, NO_RULE

log = logging.getLogger(__name__)
_KINDS = {"counter": Counter, "gauge": Gauge, "histogram": Histogram}


class PrometheusMetrics:
    def __init__(self, rules: Iterable[str] = (), registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self._metrics = {name: self._register(metric) for name, metric in CATALOG.items()}
        self._unknown: set[str] = set()
        known = {"rule": [*rules, NO_RULE], "reason": list(DEAD_LETTER_REASONS)}
        for name, metric in CATALOG.items():
            if metric.kind in ("counter", "histogram") and metric.labels:
                for value in known[metric.labels[0]]:
                    self._metrics[name].labels(value)

    def _register(self, metric: Metric):
        options = {"buckets": metric.buckets} if metric.kind == "histogram" else {}
        name = metric.exported.removesuffix("_total") if metric.kind == "counter" else metric.exported
        return _KINDS[metric.kind](name, metric.help, metric.labels, registry=self.registry, **options)

    def increment(self, name: str, amount: int = 1, **labels: str) -> None:
        metric = self._series(name, labels)
        if metric is not None and amount > 0:
            metric.inc(amount)

    def gauge(self, name: str, value: float, **labels: str) -> None:
        metric = self._series(name, labels)
        if metric is not None:
            metric.set(value)

    def observe(self, name: str, value: float, **labels: str) -> None:
        metric = self._series(name, labels)
        if metric is not None:
            metric.observe(value)

    def observe_many(self, name: str, values: Sequence[float], **labels: str) -> None:
        metric = self._series(name, labels)
        if metric is not None:
            for value in values:
                metric.observe(value)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def _series(self, name: str, labels: dict[str, str]):
        metric = self._metrics.get(name)
        if metric is None or set(labels) != set(CATALOG[name].labels):
            if name not in self._unknown:
                self._unknown.add(name)
                log.warning(
                    "metric %s%s is not in the catalog (adapters.metrics._catalog): not exported", name, sorted(labels)
                )
            return None
        return metric.labels(**labels) if labels else metric
