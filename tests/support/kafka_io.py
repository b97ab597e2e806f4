"""Test-side Kafka helpers: create topics, preload them, read them back to their end."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from adapters.kafka import UpstreamProducer, parse_kafka_uri
from deploy.local import services


@dataclass(frozen=True)
class Message:
    value: bytes
    key: bytes | None
    headers: dict[str, str]
    partition: int
    offset: int
    raw_headers: tuple[tuple[str, bytes], ...] = ()  # as read, in order


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topics(bootstrap: str, *names: str, partitions: int = 1) -> None:
    """New topics (an existing one is an error: test topics are unique), each partition with a leader."""
    services.create_topics(bootstrap, *names, partitions=partitions, exists_ok=False)


_producers: dict[str, UpstreamProducer] = {}  # by bootstrap address: one kept for the session


def produce(bootstrap: str, topic: str, values: Iterable[bytes], key_of=None) -> int:
    """Put ``values`` on ``topic`` as upstream does (idempotent, ``acks=all``; keyed by
    ``key_of(value)``, else unkeyed) and wait until all are acknowledged. Returns how many.

    One producer a broker is kept across calls (``close_producers`` lets them go): a new
    idempotent producer waits ~0.5 s for its producer id, which every preload used to pay.
    One that failed or reported a fatal error is not used again."""
    records = ((None, key_of(value) if key_of else None, value) for value in values)
    producer = _producers.get(bootstrap)
    if producer is None or not producer.usable:
        producer = _producers[bootstrap] = UpstreamProducer(parse_kafka_uri(f"kafka://{bootstrap}/{topic}", "preload"))
    try:
        return producer.send(records, topic)
    except Exception:
        _producers.pop(bootstrap, None)
        raise


def close_producers(bootstrap: str | None = None) -> None:
    """Let the producers ``produce`` kept go (``bootstrap``'s, or all): before their brokers stop."""
    for address in [bootstrap] if bootstrap else list(_producers):
        producer = _producers.pop(address, None)
        if producer is not None:
            producer.close()


def read_topic(bootstrap: str, topic: str, committed: bool = True, timeout: float = 60) -> list[Message]:
    """Every message of ``topic`` up to its current end, by partition then offset.

    ``committed``: read as a ``read_committed`` consumer (what downstream readers see).
    """
    out = []
    for m in consume_to_end(bootstrap, topic, committed, timeout):
        raw = tuple(m.headers() or ())
        headers = {k: v.decode() for k, v in raw}
        out.append(Message(m.value(), m.key(), headers, m.partition(), m.offset(), raw))
    return sorted(out, key=lambda m: (m.partition, m.offset))


def consume_to_end(bootstrap: str, topic: str, committed: bool = True, timeout: float = 60) -> Iterator:
    """Every message of ``topic`` up to its current end as confluent-kafka hands them over
    (partitions interleaved), for readers that count rather than keep them; each partition's end
    is the broker's end-of-partition event, which a ``read_committed`` reader gets at the last
    stable offset, past a transaction's commit marker. ``TimeoutError`` after ``timeout`` seconds.

    A reader of a topic at rest is asked for nothing more: the broker answers a fetch at a partition's
    end at once (``fetch.wait.max.ms``, 500 by default), and each ``consume`` returns what came within
    50 ms rather than waiting half a second for a full batch. A read of a small topic takes some 50 ms
    instead of a second (measured on a local broker, 100 records over 4 partitions); some ninety
    places in the tests read topics through here."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("reader"),
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed" if committed else "read_uncommitted",
            "fetch.wait.max.ms": 10,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        read, at_end, deadline = 0, set(), time.monotonic() + timeout
        while len(at_end) < len(partitions):
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {read} messages, partitions at end: {sorted(at_end)}")
            for m in consumer.consume(1000, 0.05):
                if m.error() is None:
                    read += 1
                    yield m
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                else:
                    raise KafkaException(m.error())
    finally:
        consumer.close()


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int = 1) -> list[int]:
    """The group's committed offset per partition (negative: nothing committed)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return [tp.offset for tp in tps]
    finally:
        consumer.close()
