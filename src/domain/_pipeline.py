"""The batch pipeline: poll → judge → deliver → commit, batch after batch.

Every in-process engine (memory, kafka) runs this loop over its own adapters. A batch closes
when it holds ``batch_size`` records or when its oldest record has waited ``max_batch_delay``
seconds (records already waiting when the previous batch ended close it at once); an idle
input is waited on for up to ``poll_timeout``, and the first record ends that wait. The
pending notifications are applied after a batch is gathered and before it is judged, so a
notification is never held back by a wait for events, nor an event by notifications. A batch is judged by the ``Deduplicator``,
its outcomes are delivered and flushed, and only then does the ``BatchCommitter`` make it
final, so a crash before that replays the batch (at-least-once; exactly-once with a
transactional committer). When a ``fail`` policy stops a batch, the committer aborts it and
``PolicyExhausted`` propagates: the batch is not acknowledged.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from domain._accounting import NO_RULE, Accounting
from domain._dedup import Deduplicator, Outcome
from domain._delivery import Delivery
from domain._errors import BatchAborted, PolicyExhausted
from domain._events import RawRecord
from domain._policies import run_or_stop
from domain._ports import BatchCommitter, EventSource, Metrics, NotificationSource

log = logging.getLogger(__name__)
MAX_ABORTS_IN_A_ROW = 16  # batches aborted to be judged again (``BatchAborted``) before the pipeline stops

DEFAULT_BATCH_SIZE = 2000  # records a batch holds at most (the setting's default): a backlog's batch
DEFAULT_MAX_BATCH_DELAY = 0.01  # seconds a record waits for its batch to fill, at most (the setting's default)


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
    batch_size: int = DEFAULT_BATCH_SIZE
    poll_timeout: float = 0.5
    max_batch_delay: float = DEFAULT_MAX_BATCH_DELAY
    totals: Accounting = field(default_factory=Accounting)

    def __post_init__(self) -> None:
        if self.committer is None:
            self.committer = SourceCommitter(self.source)
        self._polled_at = time.monotonic()
        self._aborted_in_a_row = 0

    def run(
        self, stop: threading.Event | None = None, on_batch: Callable[[Accounting], None] | None = None
    ) -> Accounting:
        """Process until a bounded source is exhausted or ``stop`` is set; returns the totals.

        ``on_batch(totals)`` is called after every poll: after a committed batch, and after an
        empty poll (idle, not stuck: a health check tells them apart). Raises ``PolicyExhausted``
        when a ``fail`` policy stops the pipeline (the failing batch is aborted, not
        acknowledged), and whatever the committer raises when a batch cannot be made final.
        """
        stop = stop or threading.Event()
        while not stop.is_set():
            records = self.gather()
            self.apply_notifications()
            if records:
                self.step(records)
            elif self.source.exhausted:
                self.apply_notifications(final=True)
                break
            if on_batch is not None:
                on_batch(self.totals)
        return self.totals

    def gather(self) -> list[RawRecord]:
        """The next batch: full, or closed when its oldest record has waited ``max_batch_delay``;
        without the records the source no longer owns (``EventSource.retain``).

        Records that arrived while the previous batch was processed have waited since it
        started polling's end (``_polled_at``); otherwise the wait for the first record (at most
        ``poll_timeout``) ends when it arrives and its own wait starts.
        """
        oldest = self._polled_at
        records = self.source.poll(self.batch_size, 0)
        if not records and not self.source.exhausted:
            records = self.source.poll(1, self.poll_timeout)
            oldest = time.monotonic()
        while records and len(records) < self.batch_size and not self.source.exhausted:
            remaining = oldest + self.max_batch_delay - time.monotonic()
            if remaining <= 0:
                break
            records.extend(self.source.poll(self.batch_size - len(records), remaining))
        self._polled_at = time.monotonic()
        return self.source.retain(records)

    def step(self, records: Sequence[RawRecord]) -> Accounting:
        """Judge, deliver and commit one batch; adds its counts to the totals and the metrics."""
        started = time.monotonic()
        committer = self.committer
        assert committer is not None  # set by __post_init__
        committer.begin()
        try:
            partitions = self.source.assignment()
            if partitions is not None:
                self.core.expect(partitions)
            outcomes, counts = self.core.process(records)
            delivered = self.delivery.deliver(outcomes, counts)
            committer.commit(records)
        except PolicyExhausted:
            committer.abort()
            raise
        except BatchAborted as aborted:
            self._aborted_in_a_row += 1
            if self._aborted_in_a_row > MAX_ABORTS_IN_A_ROW:
                raise PolicyExhausted(aborted, self._aborted_in_a_row) from None
            log.warning("%s (%d in a row)", aborted, self._aborted_in_a_row)
            self.core.clock.sleep(min(5.0, 0.1 * 2 ** (self._aborted_in_a_row - 1)))
            return Accounting()
        self._aborted_in_a_row = 0
        self._account(counts)
        self._observe_latency(delivered)
        self.metrics.observe("batch_duration_seconds", time.monotonic() - started)
        self.core.watermarks.publish(self.metrics, self.core.clock.now())
        return counts

    def apply_notifications(self, final: bool = False) -> None:
        """Forget the key of every notification that arrived, then acknowledge them.

        Forgetting is retried under the ``transient`` policy (the state may be away); one that
        outlasts it raises ``PolicyExhausted`` and nothing is acknowledged. Rejected
        notifications are counted (``rejected_notifications``). ``final``: the input ended, so
        a last line without its newline is complete (``NotificationSource.poll``).
        """
        if self.notifications is None:
            return
        rejected = self.notifications.rejected
        notes = self.notifications.poll(0, final=final)
        if self.notifications.rejected > rejected:
            self.totals.rejected_notifications += self.notifications.rejected - rejected
            self.metrics.increment("rejected_notifications", self.notifications.rejected - rejected)
        for note in notes:
            forgot = run_or_stop(partial(self.core.invalidate, note), self.core.policies, self.core.clock.sleep)
            self.totals.invalidations += 1
            self.metrics.increment("invalidations")
            log.info(
                "INVALIDATE %s/%s: %s",
                note.event.type,
                note.event.unique_value,
                "forgotten" if forgot else "nothing stored",
            )
        if notes or self.notifications.rejected > rejected:
            self.notifications.commit()

    def _observe_latency(self, delivered: Sequence[Outcome]) -> None:
        """``end_to_end_latency_seconds`` of each unique event now final: output time minus arrival."""
        now, by_rule = time.time(), defaultdict[str | None, list[float]](list)
        label_of = self.core.label_of
        labels: dict[str | None, str | None] = {}  # a delivered event's label is its type's: asked once a type
        for outcome in delivered:
            arrived = outcome.record.arrived
            if arrived is not None:
                event_type = outcome.event.type if outcome.event is not None else None
                label = labels.get(event_type)
                if label is None:
                    label = labels[event_type] = label_of(outcome)
                by_rule[label].append(now - arrived if now > arrived else 0.0)
        for rule, latencies in by_rule.items():
            self.metrics.observe_many("end_to_end_latency_seconds", latencies, rule=rule or NO_RULE)

    def _account(self, counts: Accounting) -> None:
        self.totals.add(counts)
        counts.publish(self.metrics)
