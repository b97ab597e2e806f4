"""The invalidation scenario tables (tests/support/scenarios.py) through the domain core and the in-memory store."""

from __future__ import annotations

import pytest

from adapters import SystemClock
from adapters.memory import InMemoryStateStore
from domain import Deduplicator, RawRecord, RuleSet, SourcePosition, Verdict, parse_notification
from tests.support.scenarios import INVALIDATION_SCENARIOS

SHORT = {Verdict.EMIT: "emit", Verdict.DUPLICATE: "dup"}


@pytest.mark.parametrize("scenario", INVALIDATION_SCENARIOS, ids=lambda s: s.name)
def test_invalidation_scenario_in_memory(scenario):
    core = Deduplicator(RuleSet(), InMemoryStateStore(), SystemClock())
    got, repeats, step_at = [], {}, {}
    for b, (batch, records) in enumerate(zip(scenario.batches, scenario.records())):
        for note in batch.notes:
            core.invalidate(parse_notification(scenario.notification(note)))
        step_at |= {len(step_at) + i: (b, i) for i in range(len(records))}
        offset = len(step_at) - len(records)
        outcomes, _ = core.process([RawRecord(v, SourcePosition("in", 0, offset + i)) for i, v in enumerate(records)])
        got.append([SHORT.get(o.verdict, o.verdict.value) for o in outcomes])
        repeats |= {
            step_at[o.record.position.offset]: step_at[o.duplicate.first.offset] for o in outcomes if o.duplicate
        }
    assert got == scenario.expected()
    assert repeats == scenario.expected_repeats()
