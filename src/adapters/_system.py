"""The real clock, and metrics kept in process."""

from __future__ import annotations

import threading
import time
from collections import defaultdict, deque
from collections.abc import Sequence
from functools import partial

OBSERVATIONS_KEPT = 10_000  # the most recent observations InMemoryMetrics keeps per name


class SystemClock:
    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class InMemoryMetrics:
    """A ``domain._ports.Metrics`` in dicts, for the library and the tests: ``counters`` and
    ``gauges`` by name (counters summed over their labels), ``series`` by name and labels,
    ``observations`` the most recent ``OBSERVATIONS_KEPT`` values per name (oldest first), and
    ``observed`` how many values each name had in all.

    The kafka engine's default when a library caller gives no metrics: it observes a latency
    per unique event, so every value kept was 35–43 bytes a record that a long-running engine
    never gave back (its RSS grew from 534 to 734 MB between its 11.3 millionth and 16.3
    millionth record, ``bench/redis_engine_bench.py`` on 2026-12-07); a bounded window keeps it flat."""

    def __init__(self) -> None:
        self.counters: dict[str, int] = defaultdict(int)
        self.gauges: dict[str, float] = {}
        self.series: dict[tuple[str, tuple], float] = defaultdict(float)
        self.observations: dict[str, deque[float]] = defaultdict(partial(deque, maxlen=OBSERVATIONS_KEPT))
        self.observed: dict[str, int] = defaultdict(int)
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
            self.observed[name] += 1

    def observe_many(self, name: str, values: Sequence[float], **labels: str) -> None:
        with self._lock:
            self.observations[name].extend(values)
            self.observed[name] += len(values)
