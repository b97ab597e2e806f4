"""The real clock, and metrics kept in process."""

from __future__ import annotations

import threading
import time
from collections import defaultdict


class SystemClock:
    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class InMemoryMetrics:
    """Counters and gauges in a dict; the Prometheus endpoint and the CLI read them."""

    def __init__(self):
        self.counters: dict[str, int] = defaultdict(int)
        self.gauges: dict[str, float] = {}
        self._lock = threading.Lock()

    def increment(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self.counters[name] += amount

    def gauge(self, name: str, value: float) -> None:
        with self._lock:
            self.gauges[name] = value
