"""The broker itself goes away mid-run (kill -9) and comes back: the engine waits it out."""

from __future__ import annotations

import threading
import time

import pytest

from adapters.kafka.engine import build_kafka_engine
from adapters.memory.state_store import InMemoryStateStore
from adapters.system import SystemClock
from app.generator import StreamSpec, generate
from domain.dedup import Deduplicator
from domain.rules import RuleSet
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
    some_done, broker_down = threading.Event(), threading.Event()

    def on_batch(totals):
        if totals.records_in >= 3000 and not some_done.is_set():
            some_done.set()
            broker_down.wait(30)

    engine.on_batch = on_batch
    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(totals=engine.run()), daemon=True)
    runner.start()
    # 1. the broker dies between two batches and stays away for two seconds
    assert some_done.wait(60)
    own_broker.kill()
    broker_down.set()
    time.sleep(2)
    # 2. it comes back (same ports, same log); the engine's writes and commits were waiting
    own_broker.start(timeout=120)
    runner.join(180)
    # 3. every verdict as if nothing happened
    assert "totals" in result, "the engine did not finish"
    counts = result["totals"].as_dict()
    assert {name: counts[name] for name in expected.as_accounting()} == expected.as_accounting()
    assert [m.value for m in read_topic(bootstrap, "out")] == reference(records).emitted
