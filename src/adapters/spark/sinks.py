"""Batch writers for the judged micro-batch: unique events and dead letters.

Both are called from ``foreachBatch`` with the micro-batch's id, after the verdicts are
computed and before Spark commits the batch to the checkpoint.

* JSONL directory: each micro-batch writes ``<dir>/batch=<id>/part-*.txt`` with mode
  ``overwrite``, so a replayed batch replaces its own earlier attempt (effectively once).
  Readers take every ``part-*`` file under the directory.
* Kafka: Spark's Kafka writer, at-least-once: a batch replayed after a crash between the
  write and the checkpoint commit is written again. When unique events and dead letters go
  to topics of the same cluster with the same client options, ``write_judged`` writes both
  in one Kafka write with a topic per row, reading the judged batch once (no cache).

A failed write raises; the batch is then not committed and is replayed on restart.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from adapters.spark.plan import DEAD_LETTER, EMIT
from adapters.spark.sources import Endpoint, parse_uri


def dead_letter_document() -> Column:
    """The dead letter as ``adapters.files.jsonl.dead_letter_to_json`` writes it."""
    text = F.col("value").cast("string")
    return F.to_json(F.struct(
        F.col("reason"), F.col("detail").alias("error"),
        F.lit("invalid").alias("error_class"),
        F.struct(F.col("source").alias("name"), "partition", "offset").alias("source"),
        F.lit(1).alias("attempts"), F.unix_timestamp(F.current_timestamp()).cast("double").alias("time"),
        F.when(F.is_valid_utf8(text), text).alias("value"),
        F.base64("value").alias("value_b64"),
    ), {"ignoreNullFields": "false"})


@dataclass(frozen=True)
class BatchSink:
    """Writes one kind of output (``events`` or ``dead_letters``) to a JSONL dir or Kafka topic."""

    endpoint: Endpoint
    kind: str
    kafka_options: dict[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def from_uri(cls, uri: str, kind: str, kafka_options: dict[str, str] | None = None) -> "BatchSink":
        """``kafka_options``: client settings (``kafka.``-prefixed) for a Kafka topic, under the URI's own."""
        return cls(parse_uri(uri), kind, dict(kafka_options or {}))

    def write(self, rows: DataFrame, batch_id: int) -> None:
        payload = rows.select(F.col("kafka_key").alias("key"), self._value().alias("value"))
        if self.endpoint.kind == "kafka":
            self._write_kafka(payload)
        else:
            payload.select(F.col("value").cast("string")).write.mode("overwrite") \
                .text(f"{self.endpoint.location}/batch={batch_id:010d}")

    def shares_writer_with(self, other: "BatchSink") -> bool:
        """Whether one Kafka write (a topic per row) can serve both sinks: same cluster, same options."""
        return self.endpoint.kind == other.endpoint.kind == "kafka" \
            and self.endpoint.location == other.endpoint.location and self._client_options() == other._client_options()

    def _value(self) -> Column:
        return F.col("value") if self.kind == "events" else dead_letter_document().cast("binary")

    def _client_options(self) -> dict[str, str]:
        return {**self.kafka_options, **self.endpoint.options}

    def _write_kafka(self, payload: DataFrame, per_row_topic: bool = False) -> None:
        writer = payload.write.format("kafka").option("kafka.bootstrap.servers", self.endpoint.location)
        if not per_row_topic:
            writer = writer.option("topic", self.endpoint.topic)
        for key, value in self._client_options().items():
            writer = writer.option(key, value)
        writer.save()


def reads_once(events: BatchSink, dead_letters: BatchSink) -> bool:
    """Whether ``write_judged`` reads the judged batch once (so it needs no cache)."""
    return events.shares_writer_with(dead_letters)


def write_judged(batch: DataFrame, batch_id: int, events: BatchSink, dead_letters: BatchSink) -> None:
    """Unique events (verdict ``emit``) to ``events``, dead letters to ``dead_letters``.

    One Kafka write with a topic per row when ``reads_once``; otherwise one write per sink,
    each reading ``batch`` (which the caller should then have persisted).
    """
    if not reads_once(events, dead_letters):
        events.write(batch.filter(F.col("verdict") == EMIT), batch_id)
        dead_letters.write(batch.filter(F.col("verdict") == DEAD_LETTER), batch_id)
        return
    events._write_kafka(kafka_records(batch, events.endpoint.topic, dead_letters.endpoint.topic),
                        per_row_topic=True)


def kafka_records(batch: DataFrame, events_topic: str, dead_letters_topic: str | None) -> DataFrame:
    """The batch's Kafka records, ``(topic, key, value)``: each unique event's original bytes to
    ``events_topic``, each dead letter's document to ``dead_letters_topic`` (None: left out)."""
    emit, dead = F.col("verdict") == EMIT, F.col("verdict") == DEAD_LETTER
    kept = emit if dead_letters_topic is None else emit | dead
    return batch.filter(kept).select(
        F.when(emit, F.lit(events_topic)).otherwise(F.lit(dead_letters_topic)).alias("topic"),
        F.col("kafka_key").alias("key"),
        F.when(emit, F.col("value")).otherwise(dead_letter_document().cast("binary")).alias("value"))
