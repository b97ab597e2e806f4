"""Exactly-once Kafka output for the Spark engine: one Kafka transaction per output partition.

``output._writers.ExactlyOnceWriter`` hands a judged micro-batch to the executors
(``ExecutorWriter``, the JVM's ``streamdedup.output.KafkaBatchWriter``): each task
writes its partition's unique events and dead letters in one transaction under the
transactional id ``ID-pN`` (``ID`` the checkpoint's identity, ``identity``; ``N`` the
partition), with a *commit marker* ``(transactional id, query id, batch id, partition,
counts)``: a record on the control topic (``CommitLog``) and, in the same transaction, the
offset ``batch + 1`` of the consumer group ``ID-pN`` on that topic, the marker's one-lookup
index. Before writing, a task reads its group's offset: a partition whose batch is committed
is skipped. The driver collects one line per task, never the records.

Why this is exactly-once: Spark commits a batch to its checkpoint only after
``foreachBatch`` returned, and replays an uncommitted batch with the same ``batch_id``
(Spark's MicroBatchExecution) and the same partitions: the judged batch comes out of the stateful operator's
hash partitioning over ``spark.sql.shuffle.partitions`` (frozen in the checkpoint), and the
same input offsets and state version give each partition the same rows. A task attempt's
``initTransactions`` fences every earlier producer of its id and completes or aborts what it
left; only then is the marker read (``read_committed``: never while a transaction holds a
pending offset for it). So a partition whose transaction committed is skipped by a retried
task or a replayed batch, and one whose did not is written in full. Speculative execution is
turned off for the engine (a speculative copy of a task would fence the original).

``transaction.timeout.ms`` bounds how long a transaction left open by a task that died, with
no retry to abort it (the whole job down), holds back ``read_committed`` readers of the
output topics; it must exceed the time a task takes to write its partition
(``PRODUCER_DEFAULTS``).

Versions before this one wrote the whole batch from the driver under the id ``ID`` itself,
with markers keyed ``ID``. At the first start after such a version (``upgrade``), the old
id is fenced (its open transaction aborted) and its last marker read once and recorded in
the identity: the batches it committed are not written again.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from adapters.kafka import KafkaEndpoint, admin_config, client_settings, describe, producer_config
from domain import SinkUnavailable

log = logging.getLogger(__name__)

NO_BATCH = -1
BROKER_DEFAULT = -1  # a NewTopic replication factor of -1: the broker's default.replication.factor (KIP-464)
FAULT_SETTING = "spark.streamdedup.test.writerFault"  # a test's injected writer failure (KafkaBatchWriter's Faults)
SINK_SETTING = "spark.streamdedup.sink"  # "jvm": the JVM streaming sink where it can write (SparkEngine.jvm_sink)
JVM_SINK = "streamdedup.output.KafkaSink"  # the executor writer as a Spark streaming sink (DataSource V2)

# The Kafka producers' settings unless kafka.config gives them (Java client names): batching for
# both deliveries (the executor-side writer, with or without transactions; Spark's own writer for
# dead letters on another cluster), measured one by one on the write alone
# (bench/kafka_writer_bench.py: batch.size 1.6 ×, lz4 1.5 × and 2.4 × fewer bytes, linger.ms
# nothing alone; docs/design/measurements.md, "Kafka writers, the write alone"), and the transactions' timeouts.
BATCHING = {"linger.ms": "20", "batch.size": "262144", "compression.type": "lz4"}
PRODUCER_DEFAULTS = {
    **BATCHING,
    "acks": "all",
    "enable.idempotence": "true",
    "transaction.timeout.ms": "120000",
    "delivery.timeout.ms": "120000",
}
COMMIT_TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.ms": str(3600 * 1000)}


def control_topic_for(events_topic: str) -> str:
    return f"{events_topic}.commits"


def partition_id(transactional_id: str, partition: int | str) -> str:
    """The transactional id (and marker group) of one output partition (``""``: the prefix of them all)."""
    return f"{transactional_id}-p{partition}"


@dataclass
class CommitLog:
    """The control topic: commit markers, keyed by transactional id (compacted, 1 partition).

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
            topic = NewTopic(
                self.endpoint.topic, 1, self.replication_factor or BROKER_DEFAULT, config=COMMIT_TOPIC_CONFIG
            )
            admin.create_topics([topic])[self.endpoint.topic].result(self.timeout)
        except KafkaException as exc:
            if exc.args and getattr(exc.args[0], "code", lambda: None)() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            factor = self.replication_factor or "the broker's default.replication.factor"
            raise SinkUnavailable(
                f"cannot create the commit topic {self.endpoint} with replication factor {factor} "
                f"(kafka.commit_topic_replication_factor): {describe(exc)}"
            ) from None

    def last_committed(self, transactional_id: str, query_id: str | None = None) -> dict[str, int]:
        """The highest batch id committed per marker key of ``transactional_id`` (the id itself,
        written by versions that committed a whole batch at once, and its partitions' ``ID-pN``)
        by query ``query_id``. Markers of another query (a checkpoint deleted and created anew at
        the same location restarts batch ids at 0) do not count."""
        consumer = Consumer(
            {
                **client_settings(self.settings, "consumer"),
                "bootstrap.servers": self.endpoint.bootstrap,
                "group.id": f"{transactional_id}-marker-reader",
                "enable.auto.commit": "false",
                "isolation.level": "read_committed",
                "enable.partition.eof": "true",
            }
        )
        try:
            consumer.assign([TopicPartition(self.endpoint.topic, 0, 0)])
            return self._scan(consumer, transactional_id, query_id)
        except KafkaException as exc:
            raise SinkUnavailable(f"cannot read the commit topic {self.endpoint}: {describe(exc)}") from None
        finally:
            consumer.close()

    def _scan(self, consumer: Consumer, transactional_id: str, query_id: str | None) -> dict[str, int]:
        last: dict[str, int] = {}
        ours = (transactional_id, partition_id(transactional_id, ""))
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                error = message.error()
                if error is None:
                    key = (message.key() or b"").decode(errors="replace")
                    if key != ours[0] and not key.startswith(ours[1]):
                        continue
                    value = message.value()
                    if value is None:  # as json.loads(None) would: no marker is written without a value
                        raise TypeError(f"a commit marker of {self.endpoint} has no value (key {key})")
                    marker = json.loads(value)
                    if query_id is None or marker.get("query_id") in (None, query_id):
                        last[key] = max(last.get(key, NO_BATCH), marker["batch_id"])
                elif error.code() == KafkaError._PARTITION_EOF:
                    return last
                else:
                    raise KafkaException(error)
        raise SinkUnavailable(f"the commit topic {self.endpoint} was not read to its end within {self.timeout:g}s")


def fence(endpoint: KafkaEndpoint, transactional_id: str, settings: Mapping[str, Any], timeout: float = 30.0) -> None:
    """Start transactions under ``transactional_id`` once: fences its older producers and
    aborts the transaction one left open."""
    producer = Producer(producer_config(endpoint, settings, transactional_id))
    try:
        producer.init_transactions(timeout)
    except KafkaException as exc:
        raise SinkUnavailable(f"cannot fence transactional id {transactional_id}: {describe(exc)}") from None
    finally:
        producer.flush(1)


@dataclass(frozen=True)
class PartitionWrite:
    """What one task did with its partition of a batch: ``counts`` of its rows (``in``, the
    accounting buckets, ``sent:TOPIC``); ``skipped``: its marker was found, nothing written."""

    partition: int
    attempt: int
    skipped: bool
    counts: dict[str, int]


@dataclass
class ExecutorWriter:
    """The executors' Kafka writer (``streamdedup.output.KafkaBatchWriter``).

    ``producer``/``consumer``: Java Kafka client settings (bootstrap, security), the producer's
    over ``PRODUCER_DEFAULTS``; ``markers``: the control topic (exactly-once only)."""

    producer: dict[str, str]
    consumer: dict[str, str]
    markers: str | None = None
    _jvm_side: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def write(
        self, records, batch_id: int, transactional_id: str | None = None, query_id: str | None = None
    ) -> list[PartitionWrite]:
        """Write ``records`` (``output._spark_writer.accounted_records``, or a batch of a stream ``with_records``:
        the record's six columns first) from the executors: in one transaction per partition under
        ``transactional_id``, or (None) at-least-once."""
        spark = records.sparkSession
        writer, strings, producer, consumer = self._jvm_objects(spark)
        lines = writer.write(
            records._jdf,
            batch_id,
            producer,
            consumer,
            transactional_id,
            self.markers,
            query_id,
            spark.conf.get(FAULT_SETTING, None),
        )
        # joined in the JVM: iterating the Java list from Python is a call per line, and its end a
        # Java exception that PySpark inspects with some forty more
        text = strings.join("\n", lines)
        return [PartitionWrite(**json.loads(line)) for line in text.split("\n") if line]

    def sink_options(self, transactional_id: str | None = None) -> dict[str, str]:
        """The options of the JVM streaming sink (``streamdedup.output.KafkaSink``) that writes as
        ``write`` does: in one transaction per partition under ``transactional_id``, or (None) at-least-once."""
        options = {f"producer.{key}": value for key, value in self.producer.items()}
        options.update({f"consumer.{key}": value for key, value in self.consumer.items()})
        if transactional_id is not None:
            assert self.markers is not None  # writer_for gives an exactly-once writer its control topic
            options.update(prefix=transactional_id, markers=self.markers)
        return options

    def _jvm_objects(self, spark) -> tuple:
        """The JVM's writer class and the client settings as Java maps, made once per SparkContext
        (each entry of a map handed over from Python is a call into the JVM)."""
        context = spark.sparkContext
        if self._jvm_side is None or self._jvm_side[0] is not context:
            jvm = spark._jvm
            maps = []
            for settings in (self.producer, self.consumer):
                java = jvm.java.util.HashMap()
                for key, value in settings.items():
                    java.put(key, value)
                maps.append(java)
            self._jvm_side = (context, jvm.streamdedup.output.KafkaBatchWriter, jvm.java.lang.String, *maps)
        return self._jvm_side[1:]

    @staticmethod
    def close(spark) -> None:
        """Close the producers this JVM keeps between batches (the query ended)."""
        spark._jvm.streamdedup.output.KafkaBatchWriter.closeProducers()


def java_client_settings(bootstrap: str, spark_options: Mapping[str, str]) -> dict[str, str]:
    """Spark Kafka options (``kafka.``-prefixed, ``kafka_options``) as Java client settings."""
    settings = {key.removeprefix("kafka."): value for key, value in spark_options.items() if key.startswith("kafka.")}
    return {"bootstrap.servers": bootstrap, **settings}
