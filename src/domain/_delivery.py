"""Delivering a judged batch: events to the sink, dead letters to the dead-letter sink, and
the reports of duplicates to the duplicates sink where there is one.

A write that fails is handled by the error policies. For an emitted event whose write
failed for good, ``invalidate`` forgets its key (so a re-send passes) and dead-letters it;
``dead-letter`` keeps the key remembered. The accounting moves the record from ``out`` to
where it really went. ``flush`` failures that outlast their retries raise
``PolicyExhausted``: the engine stops and the input is not acknowledged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from domain._accounting import Accounting
from domain._dedup import Deduplicator, Outcome, Verdict
from domain._errors import PolicyExhausted
from domain._events import RawRecord
from domain._policies import Resolved, Terminal, run_or_stop, run_with_policy
from domain._ports import DeadLetterSink, DuplicateSink, EventSink, Notification, NotificationSink

log = logging.getLogger(__name__)


@dataclass
class Delivery:
    core: Deduplicator
    sink: EventSink
    dead_letters: DeadLetterSink
    notifications: NotificationSink | None = None
    duplicates: DuplicateSink | None = None

    def deliver(self, outcomes: Sequence[Outcome], counts: Accounting) -> list[Outcome]:
        """Write every outcome where its verdict sends it and flush; returns the unique events
        the sink took (those a failed write diverted are not among them)."""
        delivered = []
        write, emit = self.sink.write, Verdict.EMIT
        for outcome in outcomes:
            if outcome.verdict is emit:
                assert outcome.event is not None  # an event to emit was parsed
                try:
                    write(outcome.record, outcome.event)
                except Exception as failed:
                    if self._emit(outcome, counts, failed=failed):
                        delivered.append(outcome)
                else:
                    delivered.append(outcome)
            elif outcome.verdict is Verdict.DEAD_LETTER:
                assert outcome.dead_letter is not None  # a dead-letter verdict carries its letter
                self._retrying(partial(self.dead_letters.write, outcome.dead_letter))
            elif outcome.verdict is Verdict.DUPLICATE and self.duplicates is not None:
                assert outcome.duplicate is not None  # a duplicate verdict carries its report
                self._retrying(partial(self.duplicates.write, outcome.duplicate))
            elif outcome.verdict is Verdict.SKIP:
                log.info("skipped record at %s", outcome.record.position.token())
        refused = run_or_stop(self.sink.flush, self.core.policies, self.core.clock.sleep) or ()
        if refused:
            delivered = self._divert_refused(delivered, refused, counts)
        self._retrying(self.dead_letters.flush)
        if self.duplicates is not None:
            self._retrying(self.duplicates.flush)
        return delivered

    def _divert_refused(
        self, delivered: list[Outcome], refused: Sequence[tuple[RawRecord, Exception]], counts: Accounting
    ) -> list[Outcome]:
        """The events the sink refused for good only once flushed (``EventSink.flush``) go where
        the policies send a write that failed for good, as if ``write`` had refused them."""
        by_record = {id(record): error for record, error in refused}
        kept = []
        for outcome in delivered:
            error = by_record.get(id(outcome.record))
            if error is None:
                kept.append(outcome)
            else:
                self._emit(outcome, counts, refusal=error)
        return kept

    def _emit(
        self, outcome: Outcome, counts: Accounting, refusal: Exception | None = None, failed: Exception | None = None
    ) -> bool:
        """True when the sink took the event; False when a policy sent it elsewhere. ``refusal``:
        the sink refused it for good once flushed (it is not written again); ``failed``: the
        first write raised it (the policies go on from there)."""

        def write() -> None:
            if refusal is not None:
                raise refusal
            assert outcome.event is not None  # only a parsed event is emitted
            self.sink.write(outcome.record, outcome.event)

        result = run_with_policy(write, self.core.policies, self.core.clock.sleep, failed)
        if not isinstance(result, Resolved):
            return True
        if result.action is Terminal.FAIL:
            raise PolicyExhausted(result.error, result.attempts)
        counts.tally("out", -1, self.core.label_of(outcome))
        if result.action is Terminal.SKIP:
            counts.tally("skipped")
            return False
        if result.action is Terminal.INVALIDATE and outcome.key is not None:
            self._invalidate(outcome, result, counts)
        letter = self.core.dead_letter(outcome.record, result.error, result.attempts)
        counts.tally("dead_lettered", 1, letter.reason)
        self._retrying(lambda: self.dead_letters.write(letter))
        return False

    def _invalidate(self, outcome: Outcome, result: Resolved, counts: Accounting) -> None:
        key, event = outcome.key, outcome.event
        assert key is not None and event is not None  # only an emitted event is invalidated
        self._retrying(lambda: self.core.state.invalidate(key))
        counts.tally("invalidations")
        if self.notifications is not None:
            note, notifications = Notification("INVALIDATE", str(result.error), event), self.notifications
            self._retrying(lambda: notifications.publish(note))

    def _retrying(self, operation: Callable[[], object]) -> None:
        run_or_stop(operation, self.core.policies, self.core.clock.sleep)
