"""Regressions: records and paths that used to crash the core or let a duplicate through."""

import json

from adapters.memory import InMemoryStateStore
from adapters.testing import FakeClock
from domain import Deduplicator, DedupRule, Event, Notification, RawRecord, RuleSet, SourcePosition, TimeBasis, Verdict


def _records(*values: bytes) -> list[RawRecord]:
    return [RawRecord(v, SourcePosition("t", 0, i)) for i, v in enumerate(values)]


def _event(**fields) -> bytes:
    return json.dumps({"id": "i", "uniqueValue": "u", "type": "APP", "timestamp": 1_700_000_000, **fields}).encode()


def _judged(outcomes) -> list:
    return [o.dead_letter.reason if o.dead_letter else o.verdict for o in outcomes]


def test_a_record_without_a_configured_key_field_is_dead_lettered_and_the_batch_goes_on():
    rules = RuleSet({"APP": DedupRule("APP", 30, key_fields=("uniqueValue", "session"))})
    core = Deduplicator(rules, InMemoryStateStore(), FakeClock())
    outcomes, counts = core.process(
        _records(_event(session="s"), _event(), _event(session="s"), _event(uniqueValue="v", session="s"))
    )
    assert _judged(outcomes) == [Verdict.EMIT, "missing_field", Verdict.DUPLICATE, Verdict.EMIT]
    assert "session" in outcomes[1].dead_letter.error and counts.balanced and counts.invalid == 1


def test_an_invalidation_whose_event_lacks_a_key_field_is_ignored():
    rules = RuleSet({"APP": DedupRule("APP", 30, key_fields=("uniqueValue", "session"))})
    core = Deduplicator(rules, InMemoryStateStore(), FakeClock())
    assert core.invalidate(Notification("INVALIDATE", "boom", Event("i", "u", "APP", 1_700_000_000))) is False


def test_a_replayed_processing_time_record_gets_its_first_verdict_again():
    clock = FakeClock()
    rules = RuleSet({"APP": DedupRule("APP", 30, time_basis=TimeBasis.PROCESSING_TIME)})
    store = InMemoryStateStore()
    records = _records(_event(), _event(uniqueValue="v"))
    first, _ = Deduplicator(rules, store, clock).process(records)
    clock.time += 5  # the crash and the re-read take a while: the wall clock moved
    again, _ = Deduplicator(rules, store, clock).process(records)
    assert _judged(first) == _judged(again) == [Verdict.EMIT, Verdict.EMIT]
    repeat, _ = Deduplicator(rules, store, clock).process([RawRecord(_event(), SourcePosition("t", 0, 9))])
    assert _judged(repeat) == [Verdict.DUPLICATE]


def test_deeply_nested_json_is_an_invalid_record():
    core = Deduplicator(RuleSet(), InMemoryStateStore(), FakeClock())
    outcomes, counts = core.process(_records(b"[" * 200_000 + b"]" * 200_000, b'{"a":' * 100_000, _event()))
    assert _judged(outcomes) == ["not_json", "not_json", Verdict.EMIT]
    assert counts.invalid == 2


def test_a_lone_surrogate_is_an_invalid_record_and_touches_nothing_else():
    core = Deduplicator(RuleSet(), InMemoryStateStore(), FakeClock())
    lone = b'{"id": "i", "uniqueValue": "\\ud800", "type": "APP", "timestamp": 1700000000}'
    paired = b'{"id": "i", "uniqueValue": "\\ud83d\\ude00", "type": "APP", "timestamp": 1700000000}'
    nested = _event(extra={"deep": ["\udfff"]})
    outcomes, counts = core.process(_records(_event(), lone, paired, nested, _event()))
    assert _judged(outcomes) == [Verdict.EMIT, "not_utf8", Verdict.EMIT, "not_utf8", Verdict.DUPLICATE]
    assert counts.balanced
