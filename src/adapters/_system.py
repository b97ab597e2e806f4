"""The real clock, and metrics kept in process."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Sequence


class SystemClock:
    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class InMemoryMetrics:
    """A ``domain._ports.Metrics`` in dicts, for the library and the tests: ``counters`` and
    ``gauges`` by name (counters summed over their labels), ``series`` by name and labels,
    ``observations`` as lists."""

    def __init__(self) -> None:
        self.counters: dict[str, int] = defaultdict(int)
        self.gauges: dict[str, float] = {}
        self.series: dict[tuple[str, tuple], float] = defaultdict(float)
        self.observations: dict[str, list[float]] = defaultdict(list)
        self._lock = threading.Lock()

    def increment(self, name: str, amount: int = 1, **labels: str) -> None:
        with self._lock:
            self.counters[name] += amount
            self.series[name, tuple(sorted(labels.items()))] += amount

    def gauge(self, name: str, value: float, **labels: str) -> None:
        with self._lock:
            self.gauges[name] = value
            self.series[name, tuple(sorted(labels.items()))] = value

    def observe(self, name: str, value: float, **labels: str) -> None:
        with self._lock:
            self.observations[name].append(value)

    def observe_many(self, name: str, values: Sequence[float], **labels: str) -> None:
        with self._lock:
            self.observations[name].extend(values)
