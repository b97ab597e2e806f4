"""Batch writers for the judged micro-batch: unique events and dead letters.

Both are called from ``foreachBatch`` with the micro-batch's id, after the verdicts are
computed and before Spark commits the batch to the checkpoint.

* JSONL directory: each micro-batch writes ``<dir>/batch=<id>/part-*.txt`` with mode
  ``overwrite``, so a replayed batch replaces its own earlier attempt (effectively once).
  Readers take every ``part-*`` file under the directory.
* Kafka: Spark's Kafka writer, at-least-once: a batch replayed after a crash between the
  write and the checkpoint commit is written again.

A failed write raises; the batch is then not committed and is replayed on restart.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

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

    def _value(self) -> Column:
        return F.col("value") if self.kind == "events" else dead_letter_document().cast("binary")

    def _write_kafka(self, payload: DataFrame) -> None:
        writer = payload.write.format("kafka").option("kafka.bootstrap.servers", self.endpoint.location) \
            .option("topic", self.endpoint.topic)
        for key, value in {**self.kafka_options, **self.endpoint.options}.items():
            writer = writer.option(key, value)
        writer.save()
