"""Where a micro-batch's time goes inside ``foreachBatch``: named phases, timed per batch.

``SparkEngine.write_batch`` times its phases (``lease``, ``watermarks``, ``write``: the batch's
Spark job with the writer and its markers, ``settle``) with ``BatchTimings.batch``; each
batch's figures are logged at DEBUG in one line and the last ``keep`` batches are kept
(``batches``) for bench/spark_batch_phases.py, which puts them next to Spark's own phases
(``query.lastProgress["durationMs"]``). ``counters``: an optional callable returning counts
(e.g. py4j calls made) whose growth over each phase is kept with it (``counted``).

Timing costs two ``perf_counter`` calls per phase; nothing here touches Spark.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


@dataclass
class TimedBatch:
    """One micro-batch's ``phases`` (seconds each) and its ``counted`` growth of the counters."""

    batch_id: int
    phases: dict[str, float] = field(default_factory=dict)
    counted: dict[str, int] = field(default_factory=dict)
    counters: Callable[[], dict[str, int]] | None = field(default=None, repr=False)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        before = self.counters() if self.counters is not None else {}
        started = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - started
            if self.counters is not None:
                for counter, count in self.counters().items():
                    key = f"{counter} in {name}"
                    self.counted[key] = self.counted.get(key, 0) + count - before.get(counter, 0)

    def line(self) -> str:
        parts = [f"{name} {seconds * 1000:.1f} ms" for name, seconds in self.phases.items()]
        parts += [f"{name} {count}" for name, count in self.counted.items()]
        return f"micro-batch {self.batch_id}: " + ", ".join(parts)


class BatchTimings:
    """The timed phases of the last ``keep`` micro-batches (see the module docstring)."""

    def __init__(self, keep: int = 2000, counters: Callable[[], dict[str, int]] | None = None):
        self.batches: deque[TimedBatch] = deque(maxlen=keep)
        self.counters = counters

    @contextmanager
    def batch(self, batch_id: int) -> Iterator[TimedBatch]:
        """Times the body as the batch's ``total``; its phases are timed with ``TimedBatch.phase``.
        A batch that raises is neither kept nor logged (it is not committed)."""
        timed = TimedBatch(batch_id, counters=self.counters)
        with timed.phase("total"):
            yield timed
        self.batches.append(timed)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(timed.line())
