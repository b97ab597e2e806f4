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


class UpstreamProducer:
    """An idempotent, ``acks=all`` producer writing records as upstream does, kept open across
    calls of ``send``.

    Each new idempotent producer waits some 500 ms for its producer id before its first record
    is acknowledged (librdkafka looks for a broker to ask on a fixed 500 ms timer, and at creation
    knows none but the bootstrap address); a caller preloading topic after topic (the tests) keeps
    one instance instead. ``usable`` turns false once librdkafka reported a fatal error: such a
    producer must be closed and replaced."""

    def __init__(self, endpoint: KafkaEndpoint, settings: Mapping[str, Any] | None = None) -> None:
        self._endpoint = endpoint
        self._fatal: list[str] = []
        fatal = self._fatal  # not a bound method: the producer must not keep this object alive (a cycle
        # would leave a dropped producer's threads and connections running until the garbage collector ran)

        def on_error(error: KafkaError) -> None:
            if error.fatal():
                fatal.append(error.str())

        config = producer_config(endpoint, {**BULK, **(settings or {})})
        try:
            self._producer = Producer({**config, "error_cb": on_error})
        except KafkaException as exc:
            raise config_error(exc, "output", config) from None

    @property
    def usable(self) -> bool:
        return not self._fatal

    def send(
        self,
        records: Iterable[tuple[int | None, bytes | None, bytes]],
        topic: str | None = None,
        timeout: float = 60,
    ) -> int:
        """Produce ``(partition, key, value)`` records to ``topic`` (the endpoint's by default)
        and wait until all are acknowledged; a partition of None lets the partitioner choose by key.

        Returns how many were produced. Raises ``SinkUnavailable`` naming the first failure when
        a record was refused or not acknowledged within ``timeout`` seconds (the topic must
        exist: ``_topics.require_topics``)."""
        failures: list[str] = []

        def on_delivery(error: KafkaError | None, _message: Message) -> None:
            if error:
                failures.append(error.str())

        target = topic or self._endpoint.topic
        count = sum(_produce_one(self._producer, self._endpoint, target, on_delivery, *record) for record in records)
        unacknowledged = self._producer.flush(timeout)
        if failures or unacknowledged:
            raise SinkUnavailable(
                f"{self._endpoint}: {len(failures)} records refused, {unacknowledged} not acknowledged "
                f"within {timeout:g}s ({failures[0] if failures else 'timed out'})"
            )
        return count

    def close(self, timeout: float = 5) -> None:
        """Wait up to ``timeout`` s for what is queued, then let the producer go."""
        self._producer.flush(timeout)


def produce(
    endpoint: KafkaEndpoint,
    records: Iterable[tuple[int | None, bytes | None, bytes]],
    settings: Mapping[str, Any] | None = None,
    timeout: float = 60,
) -> int:
    """Produce ``(partition, key, value)`` records to ``endpoint.topic`` with a producer of their
    own (``UpstreamProducer.send``) and wait until all are acknowledged. Returns how many."""
    return UpstreamProducer(endpoint, settings).send(records, timeout=timeout)


def _produce_one(
    producer: Producer,
    endpoint: KafkaEndpoint,
    topic: str,
    on_delivery,
    partition: int | None,
    key: bytes | None,
    value: bytes,
) -> int:
    """Queue one record, waiting while the local queue is full."""
    while True:
        try:
            if partition is None:
                producer.produce(topic, value, key, on_delivery=on_delivery)
            else:
                producer.produce(topic, value, key, partition=partition, on_delivery=on_delivery)
            return 1
        except BufferError:
            producer.poll(0.05)
        except KafkaException as exc:
            raise SinkUnavailable(f"{endpoint}: {describe(exc)}") from None
