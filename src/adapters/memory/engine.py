"""The in-process engine: poll → judge → deliver → acknowledge, batch after batch.

Runs the domain core directly over any source and sinks (JSONL files now; the Kafka
engine reuses it with Kafka adapters and a transactional committer). A batch is
acknowledged only after its outcomes are flushed, so a crash replays it (at-least-once).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

from domain.accounting import Accounting
from domain.dedup import Deduplicator
from domain.delivery import Delivery
from domain.errors import PolicyExhausted
from domain.events import RawRecord
from domain.ports import EventSource, Metrics, NotificationSource

log = logging.getLogger(__name__)


class BatchCommitter(Protocol):
    """How a batch is made final. The default acknowledges the source after the flush."""

    def begin(self) -> None: ...

    def commit(self, records: Sequence[RawRecord]) -> None: ...

    def abort(self) -> None: ...


@dataclass
class SourceCommitter:
    source: EventSource

    def begin(self) -> None:
        pass

    def commit(self, records: Sequence[RawRecord]) -> None:
        self.source.commit(records)

    def abort(self) -> None:
        pass


@dataclass
class InMemoryEngine:
    core: Deduplicator
    source: EventSource
    delivery: Delivery
    metrics: Metrics
    notifications: NotificationSource | None = None
    committer: BatchCommitter | None = None
    batch_size: int = 1000
    poll_timeout: float = 0.5
    on_batch: Callable[[Accounting], None] | None = None
    totals: Accounting = field(default_factory=Accounting)

    def run(self, stop: threading.Event | None = None) -> Accounting:
        """Process until a bounded source is exhausted or ``stop`` is set; returns the totals.

        Raises ``PolicyExhausted`` when a ``fail`` policy stops the engine; the failing batch
        is not acknowledged.
        """
        stop = stop or threading.Event()
        committer = self.committer or SourceCommitter(self.source)
        while not stop.is_set():
            self.apply_notifications()
            records = self.source.poll(self.batch_size, self.poll_timeout)
            if records:
                self.step(records, committer)
            elif self.source.exhausted:
                break
        return self.totals

    def step(self, records: Sequence[RawRecord], committer: BatchCommitter) -> Accounting:
        committer.begin()
        try:
            outcomes, counts = self.core.process(records)
            self.delivery.deliver(outcomes, counts)
            committer.commit(records)
        except PolicyExhausted:
            committer.abort()
            raise
        self._account(counts)
        return counts

    def apply_notifications(self) -> None:
        if self.notifications is None:
            return
        notes = self.notifications.poll(0)
        for note in notes:
            forgot = self.core.invalidate(note)
            self.totals.invalidations += 1
            self.metrics.increment("invalidations")
            log.info("INVALIDATE %s/%s: %s", note.event.type, note.event.unique_value,
                     "forgotten" if forgot else "nothing stored")
        if notes:
            self.notifications.commit()

    def _account(self, counts: Accounting) -> None:
        self.totals.add(counts)
        for name, value in counts.as_dict().items():
            if value:
                self.metrics.increment(name, value)
        if self.on_batch is not None:
            self.on_batch(self.totals)
