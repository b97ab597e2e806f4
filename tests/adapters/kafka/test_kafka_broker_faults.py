"""The broker itself goes away mid-run (kill -9) and comes back: the engine waits it out."""

from __future__ import annotations

import time

import pytest

from adapters import SystemClock
from adapters.kafka import ProducerChannel, build_kafka_engine, parse_kafka_uri, producer_config
from adapters.memory import InMemoryStateStore
from app import StreamSpec, generate
from domain import Deduplicator, RuleSet, SinkUnavailable
from tests.support.faults.injection import run_through_outage
from tests.support.kafka_io import create_topics, produce, read_topic
from tests.support.streams import reference

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_at_least_once_rides_out_a_broker_crash_and_loses_nothing(own_broker):
    bootstrap = own_broker.bootstrap
    create_topics(bootstrap, "in", "out", "dlq")
    records, expected = generate(StreamSpec(uniques=15_000, seed=1))
    produce(bootstrap, "in", records)
    core = Deduplicator(RuleSet(), InMemoryStateStore(), SystemClock())
    engine = build_kafka_engine(
        core,
        f"kafka://{bootstrap}/in?group=g",
        f"kafka://{bootstrap}/out",
        f"kafka://{bootstrap}/dlq",
        batch_size=300,
        stop_at_end=True,
    )
    # 1. the broker dies between two batches and stays away for two seconds
    # 2. it comes back (same ports, same log); the engine's writes and commits were waiting
    totals = run_through_outage(engine, own_broker, after_records=3000, crash=True)
    # 3. every verdict as if nothing happened
    counts = totals.as_dict()
    assert {name: counts[name] for name in expected.as_accounting()} == expected.as_accounting()
    assert [m.value for m in read_topic(bootstrap, "out")] == reference(records).emitted


def test_messages_failed_during_an_outage_longer_than_the_queue_are_all_produced_again(own_broker):
    """More messages fail (the broker away past ``message.timeout.ms``) than the producer's queue
    holds: a resend that meets a full queue keeps the rest failed, and a later flush sends them."""
    bootstrap = own_broker.bootstrap
    create_topics(bootstrap, "resent")
    config = {
        **producer_config(parse_kafka_uri(f"kafka://{bootstrap}/resent", "sink"), {}),
        "queue.buffering.max.messages": 10,
        "message.timeout.ms": 1500,
        "retry.backoff.ms": 100,
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 200,
    }
    channel = ProducerChannel(config, "test producer", flush_timeout=1.0)
    values = [f"m{i}".encode() for i in range(16)]
    channel.produce("resent", b"warm")
    channel.flush()
    own_broker.kill()
    for half in (values[:8], values[8:]):
        for value in half:
            channel.produce("resent", value)
        with pytest.raises(SinkUnavailable):  # not acknowledged: the broker is away
            channel.flush()
    with pytest.raises(SinkUnavailable):  # 16 failed, a queue of 10: the resend stops part-way
        channel.flush()
    own_broker.start(timeout=120)
    deadline = time.monotonic() + 60
    while True:
        try:
            channel.flush()
            break
        except SinkUnavailable:
            assert time.monotonic() < deadline, "the resent messages were never acknowledged"
    channel.close()
    assert sorted(m.value for m in read_topic(bootstrap, "resent") if m.value != b"warm") == sorted(values)
