"""Spark's own writers for a judged micro-batch: unique events, dead letters and duplicate reports.

Both are called from ``foreachBatch`` with the micro-batch's id, after the verdicts are
computed and before Spark commits the batch to the checkpoint.

* JSONL directory: each micro-batch writes ``<dir>/batch=<id>/part-*.txt`` with mode
  ``overwrite``, so a replayed batch replaces its own earlier attempt (effectively once).
  Readers take every ``part-*`` file under the directory.
* Kafka: Spark's Kafka writer, at-least-once: a batch replayed after a crash between the
  write and the checkpoint commit is written again. The engine uses it only where the
  executor writer (``output._executor_writer``) does not go: dead letters on a Kafka cluster
  other than the unique events', or next to unique events written to a JSONL directory.

Dead letters are encoded as ``domain._dead_letters`` defines them (``adapters.spark.output._dead_letters``),
duplicate reports as ``domain._duplicates`` does (``adapters.spark.output._duplicates``): on Kafka
the original key and value with ``dedup.*`` headers, in a directory the JSON document, the key
plus value bounded by the sink's ``max_bytes``.

A failed write raises; the batch is then not committed and is replayed on restart.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from adapters.spark.metrics import bucket_of, is_input
from adapters.spark.output._dead_letters import bounded_record, json_document, kafka_headers, no_headers
from adapters.spark.output._duplicates import bounded_record as report_record
from adapters.spark.output._duplicates import json_document as report_document
from adapters.spark.output._duplicates import kafka_headers as report_headers
from adapters.spark.shared import Endpoint, parse_uri, with_clock
from adapters.spark.stream import DEAD_LETTER, DUPLICATE, EMIT
from domain import DEFAULT_MAX_BYTES


@dataclass(frozen=True)
class BatchSink:
    """Writes one kind of output (``events``, ``dead_letters`` or ``duplicates``) to a JSONL dir or Kafka topic."""

    endpoint: Endpoint
    kind: str
    kafka_options: dict[str, str] = field(default_factory=dict, repr=False)
    max_bytes: int = DEFAULT_MAX_BYTES  # dead letters and duplicate reports: their key plus value at most

    @classmethod
    def from_uri(cls, uri: str, kind: str, kafka_options: dict[str, str] | None = None) -> BatchSink:
        """``kafka_options``: client settings (``kafka.``-prefixed) for a Kafka topic, under the URI's own."""
        return cls(parse_uri(uri), kind, dict(kafka_options or {}))

    def write(self, rows: DataFrame, batch_id: int) -> None:
        payload = with_clock(rows).select(*self._columns())
        if self.endpoint.kind == "kafka":
            self.write_kafka(payload)
        else:
            payload.select(F.col("value").cast("string")).write.mode("overwrite").text(
                f"{self.endpoint.location}/batch={batch_id:010d}"
            )

    def same_cluster(self, other: BatchSink) -> bool:
        """Whether both are Kafka topics of one cluster (one producer, or one transaction, can write both)."""
        return (
            self.endpoint.kind == other.endpoint.kind == "kafka" and self.endpoint.location == other.endpoint.location
        )

    def _columns(self) -> list[Column]:
        """Kafka: key, original value and, for dead letters and reports, their headers; a JSONL directory: the line."""
        if self.endpoint.kind != "kafka":
            line = {
                "events": F.col("value"),
                "dead_letters": json_document(max_bytes=self.max_bytes),
                "duplicates": report_document(self.max_bytes),
            }[self.kind]
            return [line.alias("value")]
        if self.kind == "events":
            return [F.col("kafka_key").alias("key"), F.col("value")]
        record = bounded_record(self.max_bytes)
        headers = kafka_headers() if self.kind == "dead_letters" else report_headers(self.max_bytes)
        return [record["key"].alias("key"), record["value"].alias("value"), headers.alias("headers")]

    def client_options(self) -> dict[str, str]:
        return {**self.kafka_options, **self.endpoint.options}

    def write_kafka(self, payload: DataFrame) -> None:
        writer = (
            payload.write.format("kafka")
            .option("kafka.bootstrap.servers", self.endpoint.location)
            .option("topic", self.endpoint.topic)
        )
        for key, value in self.client_options().items():
            writer = writer.option(key, value)
        writer.save()


def accounted_records(
    batch: DataFrame,
    events_topic: str,
    dead_letters_topic: str | None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    duplicates_topic: str | None = None,
    duplicates_max_bytes: int = DEFAULT_MAX_BYTES,
) -> DataFrame:
    """Every judged row, as its Kafka record (``topic``, ``key``, ``value``, ``headers``; ``topic`` null:
    nothing written: a duplicate without ``duplicates_topic``, a dead letter without ``dead_letters_topic``)
    and what it counts as: ``bucket`` (``metrics._listener.bucket_of``) and ``input``
    (``metrics._listener.is_input``),
    for a writer that counts what it writes (the executor-side writer's commit markers).

    The column expressions are built once per SparkContext and reused by every micro-batch:
    building them costs some 500 Python → JVM calls (``record_columns``)."""
    topics = (events_topic, dead_letters_topic, max_bytes, duplicates_topic, duplicates_max_bytes)
    return with_clock(batch).select(*record_columns(batch.sparkSession.sparkContext, *topics))


RECORD = "record_"  # the prefix of the record columns a judged stream carries (``with_records``)


def with_records(judged: DataFrame, *topics) -> DataFrame:
    """The judged stream with each row's Kafka record and accounting (``accounted_records``' six
    columns, given the same ``topics`` and bounds, named ``record_topic`` … ``record_input``) first,
    then its own columns.

    Made part of the streaming plan, the records are planned and their code generated once with
    the rest of the batch, not again over each batch's rows in ``foreachBatch``
    (docs/design/latency.md); the executor writer reads them by position. The judged columns
    stay for what else reads the batch (dead letters on another cluster, a recount)."""
    columns = record_columns(judged.sparkSession.sparkContext, *topics)
    named = [column.alias(f"{RECORD}{name}") for column, name in zip(columns, RECORD_NAMES, strict=True)]
    return with_clock(judged).select(*named, "*")


RECORD_NAMES = ("topic", "key", "value", "headers", "bucket", "input")
_COLUMNS: dict[tuple, tuple[object, list[Column]]] = {}


def record_columns(
    context,
    events_topic: str,
    dead_letters_topic: str | None,
    max_bytes: int,
    duplicates_topic: str | None = None,
    duplicates_max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[Column]:
    """The columns of ``accounted_records``, kept for ``context`` (a new SparkContext builds them again)."""
    key = (events_topic, dead_letters_topic, max_bytes, duplicates_topic, duplicates_max_bytes)
    cached = _COLUMNS.get(key)
    if cached is None or cached[0] is not context:
        cached = _COLUMNS[key] = (context, _record_columns(*key))
    return cached[1]


def _record_columns(
    events_topic: str,
    dead_letters_topic: str | None,
    max_bytes: int,
    duplicates_topic: str | None,
    duplicates_max_bytes: int,
) -> list[Column]:
    emit, dead = F.col("verdict") == EMIT, F.col("verdict") == DEAD_LETTER
    letters = F.lit(None).cast("string") if dead_letters_topic is None else F.lit(dead_letters_topic)
    record = bounded_record(max_bytes)
    topic, key = F.when(emit, F.lit(events_topic)).when(dead, letters), F.when(emit, F.col("kafka_key"))
    value, headers = F.when(emit, F.col("value")), F.when(emit, no_headers())
    if duplicates_topic is not None:  # the report's columns only where reports are written
        reported, report = F.col("verdict") == DUPLICATE, report_record(duplicates_max_bytes)
        topic, key = topic.when(reported, F.lit(duplicates_topic)), key.when(reported, report["key"])
        value = value.when(reported, report["value"])
        headers = headers.when(reported, report_headers(duplicates_max_bytes))
    return [
        topic.alias("topic"),
        key.otherwise(record["key"]).alias("key"),
        value.otherwise(record["value"]).alias("value"),
        headers.otherwise(kafka_headers()).alias("headers"),
        bucket_of().alias("bucket"),
        is_input().alias("input"),
    ]
