"""The in-memory engine against a small, obviously correct reference model (hypothesis)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.memory import InMemoryStateStore
from adapters.testing import FakeClock, SendingStateStore
from domain import Deduplicator, DedupRule, RawRecord, RuleSet, SourcePosition, Verdict
from tests.support.scenarios import Step

WINDOWS = {"APP": 5, "WEB": 12}


def reference(steps: list[Step], lateness: int) -> list[str]:
    """Straight from the definition: keep every emission forever; a per-type max time."""
    emitted: dict[tuple[str, str], list[int]] = {}
    high: dict[str, int] = {}
    verdicts = []
    for step in steps:
        high[step.type] = max(high.get(step.type, step.t), step.t)
        if step.t < high[step.type] - lateness:
            verdicts.append("late")
            continue
        times = emitted.setdefault((step.type, step.key), [])
        if any(abs(step.t - t) < WINDOWS[step.type] for t in times):
            verdicts.append("dup")
        else:
            times.append(step.t)
            verdicts.append("emit")
    return verdicts


steps_strategy = st.lists(
    st.builds(
        Step, st.sampled_from(sorted(WINDOWS)), st.sampled_from(["a", "b", "c"]), st.integers(1000, 1060), st.just("")
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(steps=steps_strategy, lateness=st.integers(0, 20), batch=st.integers(1, 10))
def test_engine_matches_the_reference_model(steps, lateness, batch):
    rules = RuleSet({t: DedupRule(t, w, allowed_lateness=lateness) for t, w in WINDOWS.items()})
    core = Deduplicator(rules, InMemoryStateStore(), FakeClock())
    assert verdicts_in_batches(core, steps, batch) == reference(steps, lateness)


def verdicts_in_batches(core: Deduplicator, steps: list[Step], batch: int) -> list[str]:
    records = [RawRecord(step.record(i), SourcePosition("p", 0, i)) for i, step in enumerate(steps)]
    got = []
    for start in range(0, len(records), batch):
        outcomes, counts = core.process(records[start : start + batch])
        assert counts.balanced
        got += [
            {Verdict.EMIT: "emit", Verdict.DUPLICATE: "dup"}.get(o.verdict) or o.dead_letter.reason for o in outcomes
        ]
    return got


@settings(max_examples=300, deadline=None)
@given(
    steps=steps_strategy,
    lateness=st.integers(0, 20),
    batch=st.integers(1, 10),
    chunk=st.integers(1, 6),
    failing=st.sets(st.integers(0, 40), max_size=3),
    refusing=st.sets(st.integers(0, 40), max_size=3),
)
def test_claims_sent_while_the_batch_goes_on_match_the_reference_model(
    steps, lateness, batch, chunk, failing, refusing
):
    """A store that decides claims while the batch goes on (sent every ``chunk`` records; some
    sends refused, some answers lost with their connection): the same verdicts."""
    rules = RuleSet({t: DedupRule(t, w, allowed_lateness=lateness) for t, w in WINDOWS.items()})
    store = SendingStateStore(InMemoryStateStore(), failing, refusing)
    core = Deduplicator(rules, store, FakeClock(), claim_chunk=chunk)
    assert verdicts_in_batches(core, steps, batch) == reference(steps, lateness)
    failed = (failing | refusing) & set(range(store.sends))
    assert store.read == store.sends - len(refusing & set(range(store.sends)))
    assert (store.calls > 0) == bool(failed)


@settings(max_examples=100, deadline=None)
@given(steps=steps_strategy)
def test_replaying_a_batch_gives_the_same_verdicts(steps):
    rules = RuleSet({t: DedupRule(t, w) for t, w in WINDOWS.items()})
    store = InMemoryStateStore()
    records = [RawRecord(step.record(i), SourcePosition("p", 0, i)) for i, step in enumerate(steps)]
    first, _ = Deduplicator(rules, store, FakeClock()).process(records)
    again, _ = Deduplicator(rules, store, FakeClock()).process(records)
    assert [o.verdict for o in again] == [o.verdict for o in first]
