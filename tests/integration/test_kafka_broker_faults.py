"""The broker itself goes away mid-run (kill -9) and comes back: the engine waits it out."""

from __future__ import annotations

import pytest

from adapters.kafka.engine import build_kafka_engine
from adapters.memory.state_store import InMemoryStateStore
from adapters.system import SystemClock
from app.generator import StreamSpec, generate
from domain.dedup import Deduplicator
from domain.rules import RuleSet
from tests.faults.injection import run_through_outage
from tests.integration.kafka_io import create_topics, produce, read_topic
from tests.integration.streams import reference

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_at_least_once_rides_out_a_broker_crash_and_loses_nothing(own_broker):
    bootstrap = own_broker.bootstrap
    create_topics(bootstrap, "in", "out", "dlq")
    records, expected = generate(StreamSpec(uniques=15_000, seed=1))
    produce(bootstrap, "in", records)
    core = Deduplicator(RuleSet(), InMemoryStateStore(), SystemClock())
    engine = build_kafka_engine(core, f"kafka://{bootstrap}/in?group=g", f"kafka://{bootstrap}/out",
                                f"kafka://{bootstrap}/dlq", batch_size=300, stop_at_end=True)
    # 1. the broker dies between two batches and stays away for two seconds
    # 2. it comes back (same ports, same log); the engine's writes and commits were waiting
    totals = run_through_outage(engine, own_broker, after_records=3000, crash=True)
    # 3. every verdict as if nothing happened
    counts = totals.as_dict()
    assert {name: counts[name] for name in expected.as_accounting()} == expected.as_accounting()
    assert [m.value for m in read_topic(bootstrap, "out")] == reference(records).emitted
