"""Exactly-once Kafka output for the Spark engine: one Kafka transaction per micro-batch.

``batch_writers.ExactlyOnceWriter`` collects a judged micro-batch's unique events and dead
letters to the driver (``BatchOutput``); ``TransactionalProducer`` produces them, with a
*commit marker* ``(transactional id, query id, batch_id, counts)`` on a control topic, in
one transaction of a producer whose ``transactional.id`` is stable for the query (kept in
its checkpoint, ``identity``, unless configured). Before writing, it
reads the last committed marker of its id from the control topic (``read_committed``): a
batch whose id is not above it was already committed, and is skipped.

Why this is exactly-once: Spark commits a batch to its checkpoint only after
``foreachBatch`` returned, and replays an uncommitted batch with the same ``batch_id``
(FACTS.md). A crash before the Kafka commit leaves an open transaction, which the next
instance's ``init_transactions`` aborts (the same id fences the old producer); the replay
writes the batch again. A crash after the Kafka commit and before Spark's leaves the
marker behind; the replay finds it and writes nothing. Readers with
``isolation.level=read_committed`` therefore see each batch's output exactly once.

Failure behaviour: any error in a transaction (broker unavailable, a failed delivery, a
fenced or stuck producer) aborts it, drops the producer and raises ``SinkUnavailable``;
the caller's retry policy runs the attempt again, which starts a fresh producer
(``init_transactions`` completes or aborts whatever the failed one left) and re-reads the
marker first, so an attempt whose commit did land but whose answer was lost is not
written twice.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from domain.errors import SinkUnavailable

from adapters.kafka.config import KafkaEndpoint, admin_config, client_settings, producer_config
from adapters.kafka.producer import ProducerChannel
from adapters.kafka.topics import describe

log = logging.getLogger(__name__)

NO_BATCH = -1
BROKER_DEFAULT = -1  # a NewTopic replication factor of -1: the broker's default.replication.factor (KIP-464)


def control_topic_for(events_topic: str) -> str:
    return f"{events_topic}.commits"


@dataclass
class CommitLog:
    """The control topic: the last committed marker per transactional id (compacted, 1 partition).

    ``replication_factor``: of the topic when ``ensure`` creates it; None (the default) lets
    the broker apply its ``default.replication.factor``, as for any topic created without one,
    so the markers are as durable as the cluster's other topics (with 1, losing that broker
    loses them, and a cluster with ``min.insync.replicas`` ≥ 2 refuses every transaction).
    """

    endpoint: KafkaEndpoint
    settings: Mapping[str, Any] = field(default_factory=dict)
    timeout: float = 30.0
    replication_factor: int | None = None

    def ensure(self) -> None:
        """Create the control topic when missing (compacted: only the last marker per id matters).
        Raises ``SinkUnavailable`` (one line, naming the replication factor asked for) when the
        broker refuses it."""
        admin = AdminClient(admin_config(self.endpoint, self.settings))
        try:
            if self.endpoint.topic in admin.list_topics(timeout=self.timeout).topics:
                return
            topic = NewTopic(self.endpoint.topic, 1, self.replication_factor or BROKER_DEFAULT,
                             config={"cleanup.policy": "compact"})
            admin.create_topics([topic])[self.endpoint.topic].result(self.timeout)
        except KafkaException as exc:
            if exc.args and getattr(exc.args[0], "code", lambda: None)() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            factor = self.replication_factor or "the broker's default.replication.factor"
            raise SinkUnavailable(f"cannot create the commit topic {self.endpoint} with replication factor {factor} "
                                  f"(kafka.commit_topic_replication_factor): {describe(exc)}") from None

    def last_committed(self, transactional_id: str, query_id: str | None = None) -> int:
        """The highest batch id committed under ``transactional_id`` by query ``query_id``
        (``NO_BATCH`` when none). Markers of another query (a checkpoint deleted and created
        anew at the same location restarts batch ids at 0) do not count."""
        consumer = Consumer({**client_settings(self.settings, "consumer"), "bootstrap.servers": self.endpoint.bootstrap,
                             "group.id": f"{transactional_id}-marker-reader", "enable.auto.commit": "false",
                             "isolation.level": "read_committed", "enable.partition.eof": "true"})
        try:
            consumer.assign([TopicPartition(self.endpoint.topic, 0, 0)])
            return self._scan(consumer, transactional_id.encode(), query_id)
        except KafkaException as exc:
            raise SinkUnavailable(f"cannot read the commit topic {self.endpoint}: {describe(exc)}") from None
        finally:
            consumer.close()

    def _scan(self, consumer: Consumer, key: bytes, query_id: str | None) -> int:
        last, deadline = NO_BATCH, time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                if message.error() is None:
                    marker = json.loads(message.value()) if message.key() == key else None
                    if marker and (query_id is None or marker.get("query_id") in (None, query_id)):
                        last = max(last, marker["batch_id"])
                elif message.error().code() == KafkaError._PARTITION_EOF:
                    return last
                else:
                    raise KafkaException(message.error())
        raise SinkUnavailable(f"the commit topic {self.endpoint} was not read to its end within {self.timeout:g}s")

    @staticmethod
    def marker(transactional_id: str, batch_id: int, counts: Mapping[str, int], query_id: str | None = None) -> bytes:
        return json.dumps({"transactional_id": transactional_id, "query_id": query_id, "batch_id": batch_id,
                           "counts": dict(counts), "time": time.time()}).encode()


@dataclass(frozen=True)
class BatchOutput:
    """A micro-batch's output collected on the driver: ``(topic, key, value, headers)`` rows and its counts."""

    batch_id: int
    rows: list[tuple[str, bytes | None, bytes, list[tuple[str, bytes]] | None]]
    counts: dict[str, int]


class TransactionalProducer:
    """Writes ``BatchOutput``s exactly once under one transactional id (see the module docstring)."""

    def __init__(self, endpoint: KafkaEndpoint, commits: CommitLog, transactional_id: str | None,
                 settings: Mapping[str, Any] | None = None, timeout: float = 30.0):
        """``transactional_id``: None until the writer reads it from the checkpoint (``identity``)."""
        self.endpoint, self.commits, self.transactional_id = endpoint, commits, transactional_id
        self.settings = dict(settings or {})
        self.timeout = timeout
        self._channel: ProducerChannel | None = None
        self._committed: int | None = None
        self.query_id: str | None = None  # the streaming query's id (its checkpoint's), when known

    def write(self, output: BatchOutput) -> bool:
        """Produce ``output`` in one transaction; False when its batch was committed before."""
        channel = self._ready()
        if output.batch_id <= self._committed:
            log.info("batch %d was committed to Kafka before (marker found); not writing it again", output.batch_id)
            return False
        try:
            self._transaction(channel, output)
        except Exception as exc:  # noqa: BLE001 - every failure drops the producer, then is reported
            self._drop()
            raise _unavailable(exc, self.transactional_id) from None
        self._committed = output.batch_id
        return True

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def _ready(self) -> ProducerChannel:
        """A producer with transactions initialised (fencing older instances), and the last marker."""
        if self._channel is None:
            config = producer_config(self.endpoint, self.settings, self.transactional_id)
            config.update({"linger.ms": "20", "batch.size": "1000000", "queue.buffering.max.messages": "1000000",
                           "transaction.timeout.ms": str(int(self.timeout * 4 * 1000))})
            channel = ProducerChannel(config, f"exactly-once output {self.endpoint}", flush_timeout=self.timeout)
            try:
                channel.producer.init_transactions(self.timeout)
            except KafkaException as exc:
                raise SinkUnavailable(f"{channel.name}: cannot start transactions: {describe(exc)}") from None
            self._channel = channel
            self._committed = None
            self.commits.ensure()
        if self._committed is None:
            self._committed = self.commits.last_committed(self.transactional_id, self.query_id)
        return self._channel

    def _transaction(self, channel: ProducerChannel, output: BatchOutput) -> None:
        producer = channel.producer
        producer.begin_transaction()
        for topic, key, value, headers in output.rows:
            channel.produce(topic, value, key, headers)
        channel.produce(self.commits.endpoint.topic,
                        CommitLog.marker(self.transactional_id, output.batch_id, output.counts, self.query_id),
                        self.transactional_id.encode())
        producer.commit_transaction(self.timeout)

    def _drop(self) -> None:
        """Forget the producer after a failure; the next attempt starts a fresh one."""
        channel, self._channel, self._committed = self._channel, None, None
        if channel is None:
            return
        try:
            channel.producer.abort_transaction(5)
        except (KafkaException, RuntimeError) as exc:
            log.warning("aborting the failed transaction: %s (the next producer aborts it)", describe(exc))


def _unavailable(exc: Exception, transactional_id: str) -> SinkUnavailable:
    text = describe(exc) if isinstance(exc, KafkaException) else str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return SinkUnavailable(f"exactly-once write ({transactional_id}) failed, transaction aborted: {text}")
