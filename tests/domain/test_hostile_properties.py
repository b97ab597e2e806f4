"""Arbitrary records through the memory engine's loop: nothing crashes, every record ends in one place."""

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters import InMemoryMetrics
from adapters.memory import InMemoryStateStore
from adapters.testing import FakeClock, ListDeadLetterSink, ListSink, ListSource
from domain import BatchPipeline, Deduplicator, DedupRule, Delivery, RawRecord, RuleSet, SourcePosition
from tests.support.hostile_records import records

RULES = RuleSet({"APP": DedupRule("APP", 30, key_fields=("uniqueValue", "session")), "WEB": DedupRule("WEB", 600)})


@settings(max_examples=300, deadline=None)
@given(values=st.lists(records, max_size=30), batch=st.integers(1, 10))
def test_every_arbitrary_record_ends_in_exactly_one_place(values, batch):
    raw = [RawRecord(v, SourcePosition("t", 0, i)) for i, v in enumerate(values)]
    sink, dead = ListSink(), ListDeadLetterSink()
    core = Deduplicator(RULES, InMemoryStateStore(), FakeClock())
    pipeline = BatchPipeline(
        core,
        ListSource([raw[i : i + batch] for i in range(0, len(raw), batch)]),
        Delivery(core, sink, dead),
        InMemoryMetrics(),
    )

    totals = pipeline.run()

    assert totals.balanced and totals.records_in == len(values)
    assert totals.out == len(sink.written) and totals.dead_lettered == len(dead.written)
    assert len(sink.written) + len(dead.written) + totals.duplicates == len(values)
    assert all(d.record.value == values[d.record.position.offset] and d.reason for d in dead.written)
    offsets = [d.record.position.offset for d in dead.written]
    assert len(set(offsets)) == len(offsets)
