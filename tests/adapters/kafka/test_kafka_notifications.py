"""INVALIDATE notifications through a real broker."""

from __future__ import annotations

import json
import time

import pytest

from adapters import InMemoryMetrics, SystemClock
from adapters.kafka import (
    KafkaDeadLetterSink,
    KafkaNotificationSink,
    KafkaNotificationSource,
    ProducerChannel,
    build_kafka_engine,
    parse_kafka_uri,
    producer_config,
)
from adapters.memory import InMemoryStateStore
from domain import Deduplicator, Event, Notification, RuleSet
from tests.support.kafka_io import create_topics, produce, read_topic, unique

pytestmark = pytest.mark.kafka

T = 1_689_019_596


def event(uid: str, t: int) -> bytes:
    return json.dumps({"id": f"{uid}@{t}", "uniqueValue": uid, "type": "APP", "timestamp": t}).encode()


def channel_to(bootstrap: str) -> ProducerChannel:
    return ProducerChannel(producer_config(parse_kafka_uri(f"kafka://{bootstrap}/any", "test"), None), "test producer")


def poll_notes(source: KafkaNotificationSource, want: int, timeout: float = 30) -> list[Notification]:
    notes, deadline = [], time.monotonic() + timeout
    while len(notes) < want and time.monotonic() < deadline:
        notes += source.poll(0.5)
    return notes


def test_notifications_are_read_in_their_own_group_and_bad_ones_dead_lettered(kafka_bootstrap):
    notes_topic, dlq = unique("notes"), unique("dlq")
    create_topics(kafka_bootstrap, notes_topic, dlq)
    channel = channel_to(kafka_bootstrap)
    sink = KafkaNotificationSink(channel, notes_topic)
    note = Notification("INVALIDATE", "sink refused the event", Event("e1", "u-1", "APP", T))
    produce(kafka_bootstrap, notes_topic, [b"garbage"])
    sink.publish(note)
    uri = parse_kafka_uri(f"kafka://{kafka_bootstrap}/{notes_topic}?group=notes", "notifications")

    source = KafkaNotificationSource(uri, KafkaDeadLetterSink(channel, dlq), time.time)
    [got] = poll_notes(source, 1)
    source.commit()
    source.close()

    assert (got.kind, got.exception, got.event) == ("INVALIDATE", "sink refused the event", note.event)
    [dead] = read_topic(kafka_bootstrap, dlq)
    assert (dead.value, dead.headers["dedup.reason"]) == (b"garbage", "bad_notification")
    # the group resumes after what was acknowledged: the next notification comes first
    marker = Notification("INVALIDATE", "marker", Event("e2", "u-2", "APP", T))
    sink.publish(marker)
    again = KafkaNotificationSource(uri, KafkaDeadLetterSink(channel, dlq), time.time)
    assert [n.exception for n in poll_notes(again, 1)] == ["marker"]
    again.close()
    channel.close()


def test_the_engine_forgets_an_invalidated_key(kafka_bootstrap):
    topics = {role: unique(role) for role in ("in", "out", "dlq", "notes")}
    create_topics(kafka_bootstrap, *topics.values())
    uris = [f"kafka://{kafka_bootstrap}/{topics[r]}" for r in ("in", "out", "dlq")]
    uris[0] += "?group=g"
    core = Deduplicator(RuleSet(), InMemoryStateStore(), SystemClock())
    # 1. u-1 is emitted, its repeat inside the window dropped
    produce(kafka_bootstrap, topics["in"], [event("u-1", T), event("u-1", T + 1)])
    assert build_kafka_engine(core, *uris, stop_at_end=True).run().duplicates == 1
    # 2. an INVALIDATE for u-1 arrives and takes effect
    channel = channel_to(kafka_bootstrap)
    produce(kafka_bootstrap, topics["notes"], [b'{"notification": "INVALIDATE"}'])  # no event: rejected
    KafkaNotificationSink(channel, topics["notes"]).publish(
        Notification("INVALIDATE", "downstream lost it", Event("x", "u-1", "APP", T))
    )
    metrics = InMemoryMetrics()
    engine = build_kafka_engine(
        core, *uris, notifications_uri=f"kafka://{kafka_bootstrap}/{topics['notes']}", stop_at_end=True, metrics=metrics
    )
    deadline = time.monotonic() + 30
    while engine.pipeline.totals.invalidations == 0 and time.monotonic() < deadline:
        engine.pipeline.apply_notifications()
        time.sleep(0.2)
    assert engine.pipeline.totals.invalidations == 1
    # the rejected one: dead-lettered, and counted in the totals and the metrics
    assert engine.pipeline.totals.rejected_notifications == 1 and metrics.counters["rejected_notifications"] == 1
    assert [m.headers["dedup.reason"] for m in read_topic(kafka_bootstrap, topics["dlq"])] == ["bad_notification"]
    # 3. u-1 sent again inside the window is emitted again
    produce(kafka_bootstrap, topics["in"], [event("u-1", T + 2)])
    assert engine.run().out == 1
    assert [m.value for m in read_topic(kafka_bootstrap, topics["out"])] == [event("u-1", T), event("u-1", T + 2)]
    channel.close()
