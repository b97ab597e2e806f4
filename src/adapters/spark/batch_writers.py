"""Writers of a judged micro-batch, one per delivery guarantee: the engine's ``writer`` part.

Called by ``SparkEngine.write_batch`` with the judged batch and its ``batch_id``, before Spark
commits the batch to the checkpoint. A writer makes one attempt and raises on failure; the
engine retries it per the ``transient`` policy and decides whether the batch is cached
(``reads``: how many times one attempt reads the batch).

* ``AtLeastOnceWriter``: Spark's own writers (``sinks.BatchSink``): Kafka topics, or JSONL
  directories replaced per batch; both outputs in one Kafka write when they can share it.
  A batch replayed after a crash between the write and Spark's checkpoint commit is written
  to Kafka again.
* ``ExactlyOnceWriter``: unique events and dead letters collected to the driver and
  produced in one Kafka transaction with a commit marker (``transactional_sink``) under the
  checkpoint's transactional id (``identity``, resolved by ``open`` at each start); a
  replayed batch is never produced twice. Dead letters to a JSONL directory are replaced
  per batch (effectively once) before the transaction.

``open(spark)`` is called at each start of the query, before it runs; ``close()`` when it ends.

Both take only what their Kafka topics take (``oversize``): ``routed`` turns a unique event
too large for the events topic into a dead letter, and dead letters are bounded to fit theirs.
"""

from __future__ import annotations

import json
import operator
import re
from dataclasses import dataclass, field, replace
from functools import reduce
from typing import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from adapters.spark.checkpoint import Checkpoint
from adapters.spark.dead_letters import producer_headers
from adapters.spark.identity import committed_pending, resolve_identity, settle
from adapters.spark.jvm import SparkSetupError
from adapters.spark.metrics import accounting_of
from adapters.spark.oversize import OversizeRoute, dead_letter_bound, events_route, producer_max
from adapters.spark.plan import DEAD_LETTER
from adapters.spark.sinks import BatchSink, kafka_records, write_judged
from adapters.spark.transactional_sink import BatchOutput, CommitLog, TransactionalProducer
from domain.dead_letters import DEFAULT_MAX_BYTES


@dataclass
class AtLeastOnceWriter:
    events: BatchSink
    dead_letters: BatchSink
    routed: OversizeRoute = field(default_factory=OversizeRoute)  # the judged batch, as this writer takes it

    @property
    def reads(self) -> int:
        """One Kafka write for both outputs reads the batch once; otherwise each output reads it."""
        return 1 if self.events.shares_writer_with(self.dead_letters) else 2

    @property
    def kafka(self) -> bool:
        return "kafka" in (self.events.endpoint.kind, self.dead_letters.endpoint.kind)

    def open(self, spark) -> None:
        """Nothing to prepare: Spark's writers need no identity."""

    def write(self, batch: DataFrame, batch_id: int) -> None:
        write_judged(batch, batch_id, self.events, self.dead_letters)

    def close(self) -> None:
        """Spark's writers hold no client between batches."""


@dataclass
class ExactlyOnceWriter:
    events_topic: str
    dead_letters: BatchSink
    producer: TransactionalProducer
    checkpoint: str | None = None
    routed: OversizeRoute = field(default_factory=OversizeRoute)
    transactional_id: str | None = None  # configured (kafka.transactional_id); else the checkpoint's identity
    carried: Column | None = field(default=None, repr=False)  # rows an old job committed before a migration
    kafka = True

    @property
    def reads(self) -> int:
        """The collect and the counts, plus the dead letters' own write to a JSONL directory."""
        return 2 if self.dead_letters.endpoint.kind == "kafka" else 3

    def open(self, spark) -> None:
        """The transactional id for this start: the checkpoint's identity (created on its first start);
        after a migration, whether the old job committed its pending batch to Kafka (``identity.settle``)."""
        checkpoint = Checkpoint.at(self.checkpoint, spark)
        identity = resolve_identity(checkpoint, self.checkpoint, self.transactional_id)
        identity = settle(identity, checkpoint, _last_marker(self.producer.commits))
        self.producer.transactional_id, self.producer.query_id = identity.transactional_id, None
        self.carried = already_committed(committed_pending(identity))

    def write(self, batch: DataFrame, batch_id: int) -> None:
        if self.carried is not None:  # judged, but the old job produced them before the migration
            batch = batch.filter(~self.carried)
        self.producer.query_id = self.producer.query_id or query_id_of(self.checkpoint)
        if self.dead_letters.endpoint.kind != "kafka":
            self.dead_letters.write(batch.filter(F.col("verdict") == DEAD_LETTER), batch_id)
        self.producer.write(self.collect(batch, batch_id))

    def collect(self, batch: DataFrame, batch_id: int) -> BatchOutput:
        """The batch's Kafka records on the driver, as ``(topic, key, value, headers)``."""
        letters = self.dead_letters.endpoint.topic if self.dead_letters.endpoint.kind == "kafka" else None
        table = kafka_records(batch, self.events_topic, letters, self.dead_letters.max_bytes).toArrow()
        headers = map(producer_headers, table.column("headers").to_pylist())
        rows = list(zip(*(table.column(name).to_pylist() for name in ("topic", "key", "value")), headers))
        return BatchOutput(batch_id, rows, accounting_of(batch).as_dict())

    def close(self) -> None:
        self.producer.close()


def already_committed(pending: dict | None) -> Column | None:
    """The rows of an old job's batch that it committed to Kafka before a migration (``identity``):
    records below the batch's end offsets, or the lines of the files it read."""
    if pending is None:
        return None
    if pending.get("files"):
        paths = [re.sub(r"^file:/+", "/", path) for path in pending["files"]]
        return F.regexp_replace("source", r"^file:/+", "/").isin(paths)
    ends = json.loads(pending["offsets"][0])
    return reduce(operator.or_, [(F.col("source") == topic) & (F.col("partition") == int(partition))
                                 & (F.col("offset") < end) for topic, parts in ends.items()
                                 for partition, end in parts.items()])


def _last_marker(commits: CommitLog):
    """The last batch ``commits`` holds for (transactional id, query id); the topic is created when
    missing (an old job that wrote no marker)."""
    def last(transactional_id: str, query_id: str | None) -> int:
        commits.ensure()
        return commits.last_committed(transactional_id, query_id)
    return last


def query_id_of(checkpoint: str | None) -> str | None:
    """The commit markers carry the query's id, so a checkpoint created anew at the same
    location (batch ids from 0 again) is not mistaken for the old query (None: no checkpoint)."""
    try:
        return Checkpoint.at(checkpoint).query_id()
    except (TypeError, ValueError):
        return None


def writer_for(sink: str, dead_letters: str, delivery: str, checkpoint: str,
               kafka_settings: Mapping[str, str] | None = None, transactional_id: str | None = None,
               spark_producer_options: Mapping[str, str] | None = None, commit_replication: int | None = None,
               dead_letter_max_bytes: int = DEFAULT_MAX_BYTES):
    """The batch writer for ``delivery`` (``at-least-once`` or ``exactly-once``).

    ``kafka_settings``: librdkafka settings (the transactional producer);
    ``spark_producer_options``: the same as options of Spark's Kafka writer;
    ``commit_replication``: the commit-marker topic's replication factor (None: the broker's default);
    ``dead_letter_max_bytes``: a dead letter's key plus value at most (``domain.dead_letters``).
    """
    from adapters.kafka.config import KafkaEndpoint
    from adapters.spark.transactional_sink import CommitLog, control_topic_for

    options = dict(spark_producer_options or {})
    settings = dict(kafka_settings or {})
    events, letters = (BatchSink.from_uri(sink, "events", options),
                       BatchSink.from_uri(dead_letters, "dead_letters", options))
    letters = replace(letters, max_bytes=dead_letter_bound(letters.endpoint, settings, dead_letter_max_bytes))
    if delivery == "at-least-once":
        return AtLeastOnceWriter(events, letters, events_route(events.endpoint, settings, producer_max(options)))
    if events.endpoint.kind != "kafka":
        raise SparkSetupError("kafka.delivery=exactly-once needs a kafka:// sink (JSONL output is replaced "
                              "per micro-batch, effectively once, with at-least-once)")
    endpoint = KafkaEndpoint(events.endpoint.location, events.endpoint.topic)
    commits = CommitLog(KafkaEndpoint(endpoint.bootstrap, events.endpoint.options.get(
        "commit_topic", control_topic_for(endpoint.topic))), kafka_settings or {},
        replication_factor=commit_replication)
    producer = TransactionalProducer(endpoint, commits, transactional_id, kafka_settings)
    return ExactlyOnceWriter(endpoint.topic, letters, producer, checkpoint,
                             events_route(events.endpoint, settings, producer_max(librdkafka=settings)),
                             transactional_id=transactional_id)
