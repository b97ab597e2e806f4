"""``adapters.testing``, as a library user's test uses it: ``deduplicate`` judges as the
memory engine does, and its doubles are importable from the door."""

from __future__ import annotations

import json

from adapters.memory import InMemoryStateStore
from adapters.testing import FakeClock, deduplicate
from domain import DedupRule, RuleSet

T = 1_700_000_000


def event(unique_value: str, t: int, kind: str = "APP", **extra) -> str:
    return json.dumps({"id": f"{unique_value}@{t}", "uniqueValue": unique_value, "type": kind, "timestamp": t, **extra})


def test_a_repeat_inside_the_window_is_dropped_and_one_after_it_emitted():
    values = [event("a", T), event("a", T + 10), event("a", T + 31), event("b", T + 31, "WEB")]
    run = deduplicate(values, clock=FakeClock(T + 40))
    assert [json.loads(v)["id"] for v in run.emitted] == [f"a@{T}", f"a@{T + 31}", f"b@{T + 31}"]
    assert (run.accounting.records_in, run.accounting.out, run.accounting.duplicates) == (4, 3, 1)


def test_an_invalid_record_is_a_dead_letter_with_its_bytes_and_a_reason():
    hostile = b'{"id": "x", "uniqueValue": "u", "type": "APP", "timestamp": "soon"}'
    run = deduplicate([hostile, b"\xff not json", event("c", T)], clock=FakeClock(T))
    assert [letter.record.value for letter in run.dead_letters] == [hostile, b"\xff not json"]
    assert all(letter.reason for letter in run.dead_letters)
    assert run.accounting.dead_lettered == 2 and len(run.emitted) == 1


def test_rules_are_the_caller_s_and_a_state_carries_a_run_s_memory_into_the_next():
    rules = RuleSet({"APP": DedupRule("APP", 300)})
    state = InMemoryStateStore()
    first = deduplicate([event("k", T)], rules, clock=FakeClock(T), state=state)
    later = [event("k", T + 100), event("k", T + 301)]
    second = deduplicate(later, rules, clock=FakeClock(T + 400), state=state, first_offset=1)
    assert len(first.emitted) == 1
    assert [json.loads(v)["timestamp"] for v in second.emitted] == [T + 301]  # 100 s later is inside 300 s
    replay = deduplicate(later, rules, clock=FakeClock(T + 400), state=state, first_offset=1)
    assert replay.emitted == second.emitted  # the same positions again: a replay, judged as before


def test_batches_do_not_change_the_verdicts():
    values = [event(f"u{i % 7}", T + i) for i in range(100)]
    whole = deduplicate(values, clock=FakeClock(T + 200))
    small = deduplicate(values, clock=FakeClock(T + 200), batch_size=3)
    assert whole.emitted == small.emitted and whole.accounting == small.accounting
