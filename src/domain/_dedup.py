"""The deduplication core: judges a batch of raw records under the rules and policies.

``Deduplicator.process`` turns records into outcomes, in arrival order. It does not write
anything: the engine delivers the outcomes, flushes, and only then acknowledges the input.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from domain._accounting import NO_RULE, Accounting
from domain._duplicates import Duplicate
from domain._errors import DedupError, InvalidEvent, PolicyExhausted
from domain._events import Event, RawRecord, parse_event
from domain._policies import Policies, Resolved, Succeeded, Terminal, run_with_policy
from domain._ports import Clock, DeadLetter, EventReader, Notification, PipelinedStateStore, StateStore
from domain._rules import DedupRule, RuleSet, TimeBasis
from domain._state import NO_WATERMARK, Claim, Emission, Judgement
from domain._watermarks import Watermarks, clock_bound

log = logging.getLogger(__name__)


class Verdict(str, Enum):
    EMIT = "emit"
    DUPLICATE = "duplicate"
    DEAD_LETTER = "dead-letter"
    SKIP = "skip"


@dataclass(slots=True)
class Outcome:
    record: RawRecord
    verdict: Verdict
    event: Event | None = None
    key: str | None = None
    dead_letter: DeadLetter | None = None
    repeats: _Repeat | None = None  # a duplicate's: what its report (``duplicate``) is made of

    @property
    def duplicate(self) -> Duplicate | None:
        """A duplicate's report: the emission it repeats (made when asked: most engines write
        no report, and reading the emission's position costs)."""
        return None if self.repeats is None else Duplicate.of(self.record, *self.repeats)


_Repeat = tuple[str, int, int, Emission, float]
"""A duplicate's rule, window and event time, the emission it repeats, and when it was judged."""


_Pending = tuple[Outcome, DedupRule, Claim]
"""An admitted record's outcome (an emission until its claim is refused), its rule and claim."""

Answer = Callable[[], list[Judgement]]
"""Reads the judgements of claims sent to a ``PipelinedStateStore``."""


@dataclass
class Deduplicator:
    rules: RuleSet
    state: StateStore
    clock: Clock
    policies: Policies = field(default_factory=Policies)
    watermarks: Watermarks = field(default_factory=Watermarks)
    read_event: EventReader = parse_event  # ``domain._events.parse_event`` unless an adapter gives a faster one
    claim_chunk: int = 500  # records judged between two sends to a store that decides while the batch goes on
    _settled: dict[str, int] = field(default_factory=dict, init=False, repr=False)

    def expect(self, partitions: Iterable[str]) -> None:
        """The partitions the source reads now; each holds the watermarks back (``domain._watermarks``)."""
        self.watermarks.expect(partitions, self.clock.now())

    def process(self, records: Sequence[RawRecord]) -> tuple[list[Outcome], Accounting]:
        """Judge ``records``; raises ``PolicyExhausted`` when a ``fail`` policy stops the batch.

        The batch is judged at one instant of the wall clock (read once, as a micro-batch
        engine reads its batch's time): every record's processing time, its ``max_ahead`` test
        and the watermarks it is judged against use that instant. Each rule's claims go to the
        state in one call, or, to a ``PipelinedStateStore``, sent every ``claim_chunk`` records
        and their answers read once the whole batch is admitted (a failed answer: claimed again
        under the policies, as a failed call is).
        """
        counts = Accounting(records_in=len(records))
        outcomes: list[Outcome] = []
        append = outcomes.append
        pending: defaultdict[str, list[_Pending]] = defaultdict(list)
        sent: list[tuple[list[_Pending], Answer | None]] = []
        admit, judge, now = self._admit, self.watermarks.judge, self.clock.now()
        settled_of = self._settled
        settled_of.clear()  # per rule, its watermark before this batch's first record of it (Claim.settled)
        partition_names: dict[tuple[str, int], str] = {}  # a partition's name, made once a batch
        send: Callable[[Sequence[Claim]], Answer] | None = (
            self.state.send_many if isinstance(self.state, PipelinedStateStore) else None
        )
        chunk = self.claim_chunk if send is not None else len(records) + 1
        for index, record in enumerate(records, 1):
            # Written out, not in methods: a call per record costs (a batch is judged in one call).
            try:
                event, rule, key, t = admit(record, now)
            except Exception as failed:
                admitted = self._readmit(record, counts, now, failed)
                if isinstance(admitted, Outcome):
                    append(admitted)
                    continue
                event, rule, key, t = admitted
            if rule is None:  # passed through
                counts.passed_through += 1
                append(self._counted(Outcome(record, Verdict.EMIT, event), counts))
                continue
            assert key is not None  # a rule gives every event it applies to a key
            position = record.position
            settled = settled_of.get(rule.event_type)
            if settled is None:
                settled = settled_of[rule.event_type] = self._watermark_before(rule.event_type, now)
            name = partition_names.get((position.source, position.partition))
            if name is None:
                name = partition_names[position.source, position.partition] = position.partition_name()
            watermark, horizon = judge(rule.event_type, name, t, now)
            if t < horizon - rule.lateness:
                counts.tally("late", 1, rule.event_type)
                append(self._counted(self._late(record, event, rule, t, horizon), counts))
                continue
            claim = Claim(
                key, t, rule.window, t + rule.retention, NO_WATERMARK if watermark is None else watermark,
                position.token(), settled,
            )  # fmt: skip
            outcome = Outcome(record, Verdict.EMIT, event, key)
            append(outcome)
            pending[rule.event_type].append((outcome, rule, claim))
            if index % chunk == 0:
                send = self._send(send, pending, sent)
                pending = defaultdict(list)
        self._send(send, pending, sent)
        for items, answer in sent:
            self._claim(items[0][1], items, counts, now, answer)
        return outcomes, counts

    def invalidate(self, notification: Notification) -> bool:
        """Forget the notified event's key; False when its type has no rule or nothing was stored."""
        rule = self.rules.rules.get(notification.event.type)
        if rule is None:
            return False
        try:
            key = rule.state_key(notification.event)
        except InvalidEvent as exc:
            log.warning("INVALIDATE ignored: %s", exc)
            return False
        return self.state.invalidate(key)

    def dead_letter(self, record: RawRecord, error: DedupError, attempts: int, reason: str | None = None) -> DeadLetter:
        return DeadLetter(record, reason or error.reason, str(error), error.error_class, attempts, self.clock.now())

    def _readmit(
        self, record: RawRecord, counts: Accounting, now: float, failed: Exception
    ) -> Outcome | tuple[Event, DedupRule | None, str | None, int]:
        """A record whose admission ``failed``: admitted when retried (what ``_admit`` returns),
        or resolved (a dead letter, a skip, a stop) as the policies say."""
        result = run_with_policy(lambda: self._admit(record, now), self.policies, self.clock.sleep, failed)
        if isinstance(result, Resolved):
            counts.invalid += isinstance(result.error, InvalidEvent)
            return self._counted(self._resolve(record, result), counts)
        return result.value

    def _late(self, record: RawRecord, event: Event, rule: DedupRule, t: int, horizon: int) -> Outcome:
        """The dead letter of an event older than its partition's ``horizon`` minus lateness."""
        late = InvalidEvent(
            "late", f"time {t} is older than its partition's time {horizon} minus lateness {rule.lateness}"
        )
        return Outcome(record, Verdict.DEAD_LETTER, event, dead_letter=self.dead_letter(record, late, 1))

    def _watermark_before(self, rule: str, now: float) -> int:
        """The rule's watermark before this batch's records of it are observed (as ``judge`` bounds it)."""
        mark = clock_bound(self.watermarks.of(rule, now), now)
        return NO_WATERMARK if mark is None else mark

    def _admit(self, record: RawRecord, now: float) -> tuple[Event, DedupRule | None, str | None, int]:
        """Parse and place one record: its event, rule, state key and time (or raise ``InvalidEvent``)."""
        event = self.read_event(record.value)
        rule = self.rules.rule_for(event)
        if rule is None:
            return event, None, None, event.timestamp
        key = rule.state_key(event)
        if rule.time_basis is TimeBasis.PROCESSING_TIME:
            return event, rule, key, int(now)
        rule.check_not_ahead(event.timestamp, now)
        return event, rule, key, event.timestamp

    @staticmethod
    def _send(
        send: Callable[[Sequence[Claim]], Answer] | None,
        pending: dict[str, list[_Pending]],
        sent: list[tuple[list[_Pending], Answer | None]],
    ) -> Callable[[Sequence[Claim]], Answer] | None:
        """Add each rule's ``pending`` claims to ``sent``: sent to a store that decides them while
        the batch goes on (``send``: its ``send_many``), else to be claimed when their turn comes.
        Returns ``send``, or None once a send failed: the claims after it wait for their turn
        (after it is claimed again), so the store decides every key's claims in their order."""
        for rule_items in pending.values():
            answer = None
            if send is not None:
                try:
                    answer = send([claim for _, _, claim in rule_items])
                except Exception:
                    send = None
            sent.append((rule_items, answer))
        return send

    def _claim(
        self, rule: DedupRule, items: list[_Pending], counts: Accounting, now: float, answer: Answer | None = None
    ) -> None:
        """Claim the keys of ``rule``'s admitted records in one call to the state (or read the
        answer of one already sent: when it fails, they are claimed again under the policies,
        a replayed claim being granted as before); count them."""
        claims = [claim for _, _, claim in items]
        result: Succeeded[list[Judgement]] | Resolved | None = None
        failed: Exception | None = None
        if answer is not None:
            try:
                result = Succeeded(answer(), 1)
            except Exception as exc:
                failed = exc
        if result is None:
            result = run_with_policy(
                lambda: self.state.check_and_set_many(claims), self.policies, self.clock.sleep, failed
            )
        if isinstance(result, Resolved):
            for outcome, _, _ in items:
                self._replace(outcome, self._resolve(outcome.record, result))
                self._counted(outcome, counts)
            return
        refused = 0
        for (outcome, _, claim), judgement in zip(items, result.value):
            if judgement.repeats is not None:  # refused
                refused += 1
                outcome.verdict = Verdict.DUPLICATE
                outcome.repeats = (rule.event_type, rule.window, claim.time, judgement.repeats, now)
        if refused < len(items):
            counts.tally("out", len(items) - refused, rule.event_type)
        if refused:
            counts.tally("duplicates", refused, rule.event_type)

    def _resolve(self, record: RawRecord, resolved: Resolved) -> Outcome:
        if resolved.action is Terminal.FAIL:
            raise PolicyExhausted(resolved.error, resolved.attempts)
        if resolved.action is Terminal.SKIP:
            return Outcome(record, Verdict.SKIP)
        return Outcome(
            record, Verdict.DEAD_LETTER, dead_letter=self.dead_letter(record, resolved.error, resolved.attempts)
        )

    @staticmethod
    def _replace(target: Outcome, source: Outcome) -> None:
        target.verdict, target.dead_letter, target.key = source.verdict, source.dead_letter, None

    def _counted(self, outcome: Outcome, counts: Accounting) -> Outcome:
        """``outcome``, counted under its verdict's bucket and label."""
        counts.tally(BUCKET_OF[outcome.verdict], 1, self.label_of(outcome))
        return outcome

    def label_of(self, outcome: Outcome) -> str | None:
        """The outcome's label in the accounting (``domain._accounting.LABEL_OF``): the dead
        letter's reason, else the rule of its event (``NO_RULE`` for a type without one)."""
        if outcome.dead_letter is not None:
            return outcome.dead_letter.reason
        if outcome.event is None:
            return None
        return outcome.event.type if outcome.event.type in self.rules.rules else NO_RULE


BUCKET_OF = {
    Verdict.EMIT: "out",
    Verdict.DUPLICATE: "duplicates",
    Verdict.DEAD_LETTER: "dead_lettered",
    Verdict.SKIP: "skipped",
}
