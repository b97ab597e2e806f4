"""Records put on a topic the way an upstream producer writes them: each keyed by its
``uniqueValue``, so every copy of an event lands on the same partition.

Used by ``dedup generate --out kafka://…`` and by the tests that preload topics. A record
without a parseable ``uniqueValue`` (an invalid record) has no key: the producer's
partitioner places it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from adapters.kafka._config import KafkaEndpoint, producer_config
from adapters.kafka._topics import config_error, describe
from domain import InvalidEvent, SinkUnavailable, parse_event

# a preload is one burst: large batches, a deep local queue
BULK = {"linger.ms": 20, "batch.size": 1_000_000, "queue.buffering.max.messages": 500_000}


def producer_key(value: bytes) -> bytes | None:
    """The key a producer gives ``value``: its ``uniqueValue``, or None when it has none."""
    try:
        return parse_event(value).unique_value.encode()
    except InvalidEvent:
        return None


def produce(
    endpoint: KafkaEndpoint,
    records: Iterable[tuple[int | None, bytes | None, bytes]],
    settings: Mapping[str, Any] | None = None,
    timeout: float = 60,
) -> int:
    """Produce ``(partition, key, value)`` records to ``endpoint.topic`` (idempotent, ``acks=all``)
    and wait until all are acknowledged; a partition of None lets the partitioner choose by key.

    Returns how many were produced. Raises ``SinkUnavailable`` naming the first failure when
    a record was refused or not acknowledged within ``timeout`` seconds (the topic must
    exist: ``_topics.require_topics``)."""
    failures: list[str] = []

    def on_delivery(error: KafkaError | None, _message: Message) -> None:
        if error:
            failures.append(error.str())

    config = producer_config(endpoint, {**BULK, **(settings or {})})
    try:
        producer = Producer({**config, "on_delivery": on_delivery})
    except KafkaException as exc:
        raise config_error(exc, "output", config) from None
    count = sum(_produce_one(producer, endpoint, *record) for record in records)
    unacknowledged = producer.flush(timeout)
    if failures or unacknowledged:
        raise SinkUnavailable(
            f"{endpoint}: {len(failures)} records refused, {unacknowledged} not acknowledged "
            f"within {timeout:g}s ({failures[0] if failures else 'timed out'})"
        )
    return count


def _produce_one(
    producer: Producer, endpoint: KafkaEndpoint, partition: int | None, key: bytes | None, value: bytes
) -> int:
    """Queue one record, waiting while the local queue is full."""
    while True:
        try:
            if partition is None:
                producer.produce(endpoint.topic, value, key)
            else:
                producer.produce(endpoint.topic, value, key, partition=partition)
            return 1
        except BufferError:
            producer.poll(0.05)
        except KafkaException as exc:
            raise SinkUnavailable(f"{endpoint}: {describe(exc)}") from None
