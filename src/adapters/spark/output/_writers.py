"""Writers of a judged micro-batch, one per delivery guarantee: the engine's ``writer`` part.

Called by ``SparkEngine.write_batch`` with the judged batch and its ``batch_id``, before Spark
commits the batch to the checkpoint. A writer makes one attempt and raises on failure; the
engine retries it per the ``transient`` policy and decides whether the batch is cached
(``reads``: how many times one attempt reads the batch).

Kafka topics are written by the executors (``output._executor_writer.ExecutorWriter``): each task
sends its partition of the judged batch with a producer its executor keeps between batches,
unique events and dead letters (when on the same cluster) in one pass; the driver collects
one line per task, never the records. Where the verdicts come out of the stream itself (the
operator's judge), each row's record is part of the streaming plan (``in_stream``,
``output._spark_writer.with_records``): a batch goes to the executors as Spark planned it,
with no plan of its own built and optimized in ``foreachBatch``.

* ``AtLeastOnceWriter``: without transactions (an idempotent producer, flushed before the task
  ends). A batch replayed after a crash between the write and Spark's checkpoint commit is
  written to Kafka again. JSONL directories (and dead letters on another Kafka cluster) are
  written by Spark's own writers (``output._spark_writer.BatchSink``), a directory replaced per batch.
  Spark's own Kafka writer is not used for the events' topic: written alone the two are level
  (docs/design/measurements.md, "Kafka writers, the write alone"), and one write path for both deliveries
  keeps their producers, counts and failure handling the same.
* ``ExactlyOnceWriter``: each task writes its partition in one Kafka transaction with a commit
  marker (``output._executor_writer``) under the checkpoint's transactional id (``identity``,
  resolved by ``open`` at each start) and its partition; a retried task or replayed batch
  never produces a committed partition twice. Dead letters to a JSONL directory are replaced
  per batch (effectively once) before the transactions.

``open(spark)`` is called at each start of the query, before it runs; ``close()`` when it ends.

Both take only what their Kafka topics take (``oversize``): ``routed`` turns a unique event
too large for the events topic into a dead letter, and dead letters are bounded to fit theirs.
"""

from __future__ import annotations

import json
import logging
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from adapters.spark.checkpoint import Checkpoint, Identity, committed_pending, resolve_identity, settle, write_identity
from adapters.spark.output._executor_writer import (
    BATCHING,
    NO_BATCH,
    PRODUCER_DEFAULTS,
    CommitLog,
    ExecutorWriter,
    PartitionWrite,
    control_topic_for,
    fence,
    java_client_settings,
)
from adapters.spark.output._oversize import OversizeRoute, dead_letter_bound, events_route, producer_max
from adapters.spark.output._spark_writer import BatchSink, accounted_records, with_records
from adapters.spark.shared import SparkSetupError
from adapters.spark.stream import DEAD_LETTER, DUPLICATE, EMIT
from domain import DEFAULT_MAX_BYTES

log = logging.getLogger(__name__)
WHOLE = 2**31 - 1  # a duplicate report in a JSONL directory is never cut


@dataclass
class AtLeastOnceWriter:
    events: BatchSink
    dead_letters: BatchSink
    routed: OversizeRoute = field(default_factory=OversizeRoute)  # the judged batch, as this writer takes it
    executors: ExecutorWriter | None = None  # writes the Kafka topics (None: events to a JSONL directory)
    spark: object = field(default=None, repr=False)
    duplicates: BatchSink | None = None  # the duplicate reports (None: off)
    records_in_batch: bool = False  # each batch carries its records (``in_stream``)

    def in_stream(self, judged: DataFrame) -> DataFrame:
        """The stream of verdicts this writer takes its batches from (``records_in_stream``)."""
        return records_in_stream(self, judged)

    @property
    def reads(self) -> int:
        """One write for the outputs on the events' Kafka cluster reads the batch once; each other output once more."""
        if self.executors is None:
            return 2 + (self.duplicates is not None)
        return 1 + len(apart_from(self.events, self.dead_letters, self.duplicates))

    @property
    def kafka(self) -> bool:
        return "kafka" in (self.events.endpoint.kind, self.dead_letters.endpoint.kind)

    def open(self, spark) -> None:
        """Nothing to prepare: no identity without transactions."""
        self.spark = spark

    def write(self, batch: DataFrame, batch_id: int) -> None:
        if self.executors is None:
            self.events.write(batch.filter(F.col("verdict") == EMIT), batch_id)
            self.dead_letters.write(batch.filter(F.col("verdict") == DEAD_LETTER), batch_id)
            if self.duplicates is not None:
                self.duplicates.write(batch.filter(F.col("verdict") == DUPLICATE), batch_id)
        else:
            write_from_executors(
                batch,
                batch_id,
                self.events,
                self.dead_letters,
                self.executors,
                duplicates=self.duplicates,
                records_in_batch=self.records_in_batch,
            )

    def sink_options(self) -> dict[str, str] | None:
        """The JVM sink's options when it can write this writer's batches (``jvm_sink_options``), else None."""
        return jvm_sink_options(self, None)

    def close(self) -> None:
        if self.executors is not None and self.spark is not None:
            ExecutorWriter.close(self.spark)


def jvm_sink_options(writer, transactional_id: str | None) -> dict[str, str] | None:
    """The options of the JVM streaming sink (``streamdedup.output.KafkaSink``) for ``writer``'s batches,
    or None when the sink cannot write them as ``write`` does: some output is not on the events' Kafka
    cluster (Spark's own writer writes it), or the batches do not carry their records."""
    if writer.executors is None or not writer.records_in_batch:
        return None
    if apart_from(writer.events, writer.dead_letters, writer.duplicates):
        return None
    return writer.executors.sink_options(transactional_id)


def write_from_executors(
    batch: DataFrame,
    batch_id: int,
    events: BatchSink,
    dead_letters: BatchSink,
    executors: ExecutorWriter,
    transactional_id: str | None = None,
    query_id: str | None = None,
    duplicates: BatchSink | None = None,
    records_in_batch: bool = False,
) -> list[PartitionWrite]:
    """The judged batch's Kafka records written by the executors, in one transaction per partition
    under ``transactional_id`` (None: at-least-once). Dead letters and duplicate reports go with the
    unique events when on the same Kafka cluster; otherwise Spark's own writer writes them first.
    ``records_in_batch``: the batch's stream carries its records already (``records_in_stream``)."""
    apart = apart_from(events, dead_letters, duplicates)
    for sink, verdict in ((dead_letters, DEAD_LETTER), (duplicates, DUPLICATE)):
        if sink in apart:
            sink.write(batch.filter(F.col("verdict") == verdict), batch_id)
    records = batch if records_in_batch else accounted_records(batch, *record_topics(events, dead_letters, duplicates))
    return executors.write(records, batch_id, transactional_id, query_id)


def record_topics(events: BatchSink, dead_letters: BatchSink, duplicates: BatchSink | None) -> tuple:
    """``accounted_records``' topics and bounds after the events': dead letters and reports on the
    events' cluster go with them (None: written apart, or off)."""
    apart = apart_from(events, dead_letters, duplicates)
    letters = None if dead_letters in apart else dead_letters.endpoint.topic
    reports = None if duplicates is None or duplicates in apart else duplicates.endpoint.topic
    assert events.endpoint.topic is not None  # the executors write to Kafka: a Kafka endpoint names its topic
    bound = duplicates.max_bytes if duplicates else DEFAULT_MAX_BYTES
    return events.endpoint.topic, letters, dead_letters.max_bytes, reports, bound


def records_in_stream(writer, judged: DataFrame) -> DataFrame:
    """``judged`` (a stream of verdicts) with the records the writer's executors write, when it has
    them (``with_records``); the writer then takes them from each batch as they are."""
    if writer.executors is None:
        return judged
    writer.records_in_batch = True
    return with_records(judged, *record_topics(writer.events, writer.dead_letters, writer.duplicates))


def apart_from(events: BatchSink, *others: BatchSink | None) -> list[BatchSink]:
    """Of ``others`` (None: off), those not on the events' Kafka cluster: Spark's own writer writes them."""
    return [sink for sink in others if sink is not None and not events.same_cluster(sink)]


@dataclass
class ExactlyOnceWriter:
    events: BatchSink
    dead_letters: BatchSink
    executors: ExecutorWriter
    commits: CommitLog
    checkpoint: str | None = None
    routed: OversizeRoute = field(default_factory=OversizeRoute)
    transactional_id: str | None = None  # configured (kafka.transactional_id); else the checkpoint's identity
    carried: Column | None = field(default=None, repr=False)  # rows an old job committed before a migration
    identity: Identity | None = field(default=None, repr=False)
    query_id: str | None = None
    spark: object = field(default=None, repr=False)
    duplicates: BatchSink | None = None  # the duplicate reports (None: off)
    records_in_batch: bool = False  # each batch carries its records (``in_stream``)
    kafka = True

    def in_stream(self, judged: DataFrame) -> DataFrame:
        """The stream of verdicts this writer takes its batches from (``records_in_stream``)."""
        return records_in_stream(self, judged)

    @property
    def reads(self) -> int:
        """One write from the executors, plus each own write to a JSONL directory."""
        return 1 + len(apart_from(self.events, self.dead_letters, self.duplicates))

    def open(self, spark) -> None:
        """The transactional id for this start: the checkpoint's identity (created on its first start);
        after a migration, whether the old job committed its pending batch to Kafka (``_identity.settle``);
        after an upgrade from a version that committed whole batches, what it committed (``upgrade``)."""
        if spark.conf.get("spark.speculation", "false").strip().lower() == "true":
            raise SparkSetupError(
                "kafka.delivery=exactly-once needs spark.speculation=false: a speculative copy of "
                "a writing task would fence the task it copies (see docs/delivery.md)"
            )
        assert self.checkpoint is not None  # writer_for gives the job's
        checkpoint = Checkpoint.at(self.checkpoint, spark)
        self.commits.ensure()
        identity = resolve_identity(checkpoint, self.checkpoint, self.transactional_id)
        identity = settle(identity, checkpoint, self.commits.last_committed)
        self.identity = upgrade(identity, checkpoint, self.commits)
        self.carried = already_committed(committed_pending(self.identity))
        self.query_id, self.spark = None, spark

    def write(self, batch: DataFrame, batch_id: int) -> None:
        assert self.identity is not None  # resolved by ``open``, before the query starts
        if self.identity.whole_batch_committed is not None and batch_id <= self.identity.whole_batch_committed:
            log.info(
                "batch %d was committed to Kafka by the previous version (marker found); not writing it again", batch_id
            )
            return
        if self.carried is not None:  # judged, but the old job produced them before the migration
            batch = batch.filter(~self.carried)
        self.query_id = self.query_id or query_id_of(self.checkpoint)
        tasks = write_from_executors(
            batch,
            batch_id,
            self.events,
            self.dead_letters,
            self.executors,
            self.identity.transactional_id,
            self.query_id,
            self.duplicates,
            self.records_in_batch,
        )
        skipped = sorted(task.partition for task in tasks if task.skipped)
        if skipped:
            report_skipped(batch_id, skipped)

    def sink_options(self) -> dict[str, str] | None:
        """The JVM sink's options (``jvm_sink_options``) for this start, or None: also when a previous
        version's whole-batch commits or a migration's carried rows need ``write``'s own checks."""
        assert self.identity is not None  # resolved by ``open``, before the query starts
        if self.identity.whole_batch_committed not in (None, NO_BATCH) or self.carried is not None:
            return None
        return jvm_sink_options(self, self.identity.transactional_id)

    def close(self) -> None:
        if self.spark is not None:
            ExecutorWriter.close(self.spark)


def report_skipped(batch_id: int, partitions: list[int]) -> None:
    """The partitions of a batch a write found committed before (their markers) and did not write again."""
    log.info(
        "batch %d: partitions %s were committed to Kafka before (markers found); not written again",
        batch_id,
        partitions,
    )


def upgrade(identity: Identity, checkpoint: Checkpoint, commits: CommitLog) -> Identity:
    """Once per checkpoint: the last batch a version writing whole batches from the driver committed under
    the bare transactional id (its open transaction, if any, aborted first), recorded in the identity.
    A checkpoint without progress has none to look up."""
    if identity.whole_batch_committed is not None:
        return identity
    last = NO_BATCH
    if checkpoint.has_progress():
        tid = identity.transactional_id
        fence(commits.endpoint, tid, commits.settings)
        last = commits.last_committed(tid, checkpoint.query_id()).get(tid, NO_BATCH)
    upgraded = replace(identity, whole_batch_committed=last)
    write_identity(checkpoint, upgraded)
    return upgraded


def already_committed(pending: dict | None) -> Column | None:
    """The rows of an old job's batch that it committed to Kafka before a migration (``identity``):
    records below the batch's end offsets, or the lines of the files it read."""
    if pending is None:
        return None
    if pending.get("files"):
        paths = [re.sub(r"^file:/+", "/", path) for path in pending["files"]]
        return F.regexp_replace("source", r"^file:/+", "/").isin(paths)
    ends = json.loads(pending["offsets"][0])
    return reduce(
        operator.or_,
        [
            (F.col("source") == topic) & (F.col("partition") == int(partition)) & (F.col("offset") < end)
            for topic, parts in ends.items()
            for partition, end in parts.items()
        ],
    )


def query_id_of(checkpoint: str | None) -> str | None:
    """The commit markers carry the query's id, so a checkpoint created anew at the same
    location (batch ids from 0 again) is not mistaken for the old query (None: no checkpoint). Read
    through the checkpoint's own file system, wherever it is."""
    return Checkpoint.at(checkpoint).query_id() if checkpoint else None


def writer_for(
    sink: str,
    dead_letters: str,
    delivery: str,
    checkpoint: str,
    kafka_settings: Mapping[str, str] | None = None,
    transactional_id: str | None = None,
    spark_producer_options: Mapping[str, str] | None = None,
    commit_replication: int | None = None,
    dead_letter_max_bytes: int = DEFAULT_MAX_BYTES,
    consumer_options: Mapping[str, str] | None = None,
    duplicates: str | None = None,
):
    """The batch writer for ``delivery`` (``at-least-once`` or ``exactly-once``).

    ``kafka_settings``: librdkafka settings (the transactional producer);
    ``spark_producer_options``: the same as options of Spark's Kafka writer (and, unprefixed, of the
    executor-side writer); ``consumer_options``: those of Spark's Kafka reader (the markers' lookups);
    ``commit_replication``: the commit-marker topic's replication factor (None: the broker's default);
    ``dead_letter_max_bytes``: a dead letter's key plus value at most (``domain._dead_letters``);
    ``duplicates``: where the duplicate reports go (``domain._duplicates``; None: off), cut only to fit a topic.
    """
    options = {**{f"kafka.{key}": value for key, value in BATCHING.items()}, **(spark_producer_options or {})}
    settings = dict(kafka_settings or {})
    events, letters = (
        BatchSink.from_uri(sink, "events", options),
        BatchSink.from_uri(dead_letters, "dead_letters", options),
    )
    letters = replace(letters, max_bytes=dead_letter_bound(letters.endpoint, settings, dead_letter_max_bytes))
    reports = None
    if duplicates:
        reports = BatchSink.from_uri(duplicates, "duplicates", options)
        whole = producer_max(options) if reports.endpoint.kind == "kafka" else WHOLE
        reports = replace(reports, max_bytes=dead_letter_bound(reports.endpoint, settings, whole))
    route = events_route(events.endpoint, settings, producer_max(options))
    if events.endpoint.kind != "kafka":
        if delivery == "exactly-once":
            raise SparkSetupError(
                "kafka.delivery=exactly-once needs a kafka:// sink (JSONL output is replaced "
                "per micro-batch, effectively once, with at-least-once)"
            )
        return AtLeastOnceWriter(events, letters, route, duplicates=reports)
    consumer = java_client_settings(events.endpoint.location, consumer_options or {})
    producer = {**PRODUCER_DEFAULTS, **java_client_settings(events.endpoint.location, events.client_options())}
    if delivery == "at-least-once":
        return AtLeastOnceWriter(events, letters, route, ExecutorWriter(producer, consumer), duplicates=reports)
    for output, what in ((letters, "dead-letter topic"), (reports, "duplicates topic")):
        if output is not None and output.endpoint.kind == "kafka" and not events.same_cluster(output):
            raise SparkSetupError(
                f"kafka.delivery=exactly-once needs the {what} on the sink's cluster "
                f"({events.endpoint.location}): a transaction spans one cluster"
            )
    from adapters.kafka import KafkaEndpoint

    assert events.endpoint.topic is not None  # a Kafka endpoint (parse_uri) always names its topic
    endpoint = KafkaEndpoint(events.endpoint.location, events.endpoint.topic)
    commits = CommitLog(
        KafkaEndpoint(
            endpoint.bootstrap, events.endpoint.options.get("commit_topic", control_topic_for(endpoint.topic))
        ),
        settings,
        replication_factor=commit_replication,
    )
    executors = ExecutorWriter(producer, consumer, commits.endpoint.topic)
    return ExactlyOnceWriter(
        events, letters, executors, commits, checkpoint, route, transactional_id=transactional_id, duplicates=reports
    )
