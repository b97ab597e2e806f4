"""The batch pipeline: poll → judge → deliver → commit, batch after batch.

Every in-process engine (memory, kafka) runs this loop over its own adapters. Before each
poll the pending notifications are applied. A batch is judged by the ``Deduplicator``,
its outcomes are delivered and flushed, and only then does the ``BatchCommitter`` make it
final, so a crash before that replays the batch (at-least-once; exactly-once with a
transactional committer). When a ``fail`` policy stops a batch, the committer aborts it and
``PolicyExhausted`` propagates: the batch is not acknowledged.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from domain.accounting import Accounting
from domain.dedup import Deduplicator
from domain.delivery import Delivery
from domain.errors import PolicyExhausted
from domain.events import RawRecord
from domain.ports import BatchCommitter, EventSource, Metrics, NotificationSource

log = logging.getLogger(__name__)


@dataclass
class SourceCommitter:
    """The at-least-once ``BatchCommitter``: acknowledges the records to their source.

    Outputs are not held back, so ``begin`` and ``abort`` have nothing to do; ``commit``
    raises what ``EventSource.commit`` raises, leaving the records unacknowledged.
    """

    source: EventSource

    def begin(self) -> None:
        pass

    def commit(self, records: Sequence[RawRecord]) -> None:
        self.source.commit(records)

    def abort(self) -> None:
        pass


@dataclass
class BatchPipeline:
    """The loop of an in-process engine; ``committer`` defaults to a ``SourceCommitter``."""

    core: Deduplicator
    source: EventSource
    delivery: Delivery
    metrics: Metrics
    committer: BatchCommitter | None = None
    notifications: NotificationSource | None = None
    batch_size: int = 1000
    poll_timeout: float = 0.5
    totals: Accounting = field(default_factory=Accounting)

    def __post_init__(self):
        if self.committer is None:
            self.committer = SourceCommitter(self.source)

    def run(self, stop: threading.Event | None = None,
            on_batch: Callable[[Accounting], None] | None = None) -> Accounting:
        """Process until a bounded source is exhausted or ``stop`` is set; returns the totals.

        ``on_batch(totals)`` is called after every poll: after a committed batch, and after an
        empty poll (idle, not stuck: a health check tells them apart). Raises ``PolicyExhausted``
        when a ``fail`` policy stops the pipeline (the failing batch is aborted, not
        acknowledged), and whatever the committer raises when a batch cannot be made final.
        """
        stop = stop or threading.Event()
        while not stop.is_set():
            self.apply_notifications()
            records = self.source.poll(self.batch_size, self.poll_timeout)
            if records:
                self.step(records)
            elif self.source.exhausted:
                break
            if on_batch is not None:
                on_batch(self.totals)
        return self.totals

    def step(self, records: Sequence[RawRecord]) -> Accounting:
        """Judge, deliver and commit one batch; adds its counts to the totals and the metrics."""
        started = time.monotonic()
        self.committer.begin()
        try:
            partitions = self.source.assignment()
            if partitions is not None:
                self.core.expect(partitions)
            outcomes, counts = self.core.process(records)
            self.delivery.deliver(outcomes, counts)
            self.committer.commit(records)
        except PolicyExhausted:
            self.committer.abort()
            raise
        self._account(counts)
        self.metrics.observe("batch_duration_seconds", time.monotonic() - started)
        self.core.watermarks.publish(self.metrics, self.core.clock.now())
        return counts

    def apply_notifications(self) -> None:
        """Forget the key of every notification that arrived, then acknowledge them."""
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
        counts.publish(self.metrics)
