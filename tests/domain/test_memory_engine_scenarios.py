"""The golden scenarios through the in-memory engine, record by record."""

import pytest

from adapters.memory import InMemoryStateStore
from adapters.testing import FakeClock
from domain import Deduplicator, DedupRule, RawRecord, RuleSet, SourcePosition, Verdict
from tests.support.scenarios import INVALID_RECORDS, SCENARIOS, Scenario

LABEL = {Verdict.EMIT: "emit", Verdict.DUPLICATE: "dup"}


def judged(scenario: Scenario, batch_size: int, store=None, claim_chunk: int = 500) -> tuple[list[str], dict[int, int]]:
    """Each step's verdict, and for each duplicate the line (offset) of the first copy its report names."""
    rules = RuleSet({t: DedupRule(t, w, allowed_lateness=scenario.lateness) for t, w in scenario.windows})
    core = Deduplicator(rules, store or InMemoryStateStore(), FakeClock(), claim_chunk=claim_chunk)
    records = [RawRecord(r, SourcePosition("in", 0, i)) for i, r in enumerate(scenario.records())]
    labels, repeats = [], {}
    for start in range(0, len(records), batch_size):
        outcomes, counts = core.process(records[start : start + batch_size])
        assert counts.balanced
        labels += [LABEL.get(o.verdict) or o.dead_letter.reason for o in outcomes]
        repeats |= {o.record.position.offset: o.duplicate.first.offset for o in outcomes if o.duplicate}
    return labels, repeats


@pytest.mark.parametrize("batch_size", [1, 3, 1000])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda sc: sc.name)
def test_scenario(scenario, batch_size):
    labels, repeats = judged(scenario, batch_size)
    assert labels == scenario.expected()
    assert repeats == scenario.expected_repeats()


def test_every_duplicate_of_the_tables_names_the_step_it_repeats():
    steps = [step for scenario in SCENARIOS for step in scenario.steps]
    assert all((step.repeats is None) == (step.verdict != "dup") for step in steps)


@pytest.mark.parametrize("raw, code", INVALID_RECORDS)
def test_invalid_records_are_dead_lettered_with_their_bytes(raw, code):
    core = Deduplicator(RuleSet(), InMemoryStateStore(), FakeClock())
    record = RawRecord(raw, SourcePosition("in", 0, 7))
    [outcome], counts = core.process([record])
    assert outcome.verdict is Verdict.DEAD_LETTER
    assert (outcome.dead_letter.reason, outcome.dead_letter.record.value) == (code, raw)
    assert outcome.dead_letter.record.position.offset == 7
    assert (counts.dead_lettered, counts.invalid) == (1, 1)
