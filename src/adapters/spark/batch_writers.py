"""Writing a judged micro-batch under a delivery guarantee, retrying transient failures.

Called from ``foreachBatch`` with the judged batch and its ``batch_id`` (persisted by the caller
unless the writer ``reads_once``):

* ``AtLeastOnceWriter``: Spark's own writers (``sinks.BatchSink``): Kafka topics, or JSONL
  directories replaced per batch; both outputs in one Kafka write when they can share it. A batch replayed after a crash between the write and
  Spark's checkpoint commit is written to Kafka again.
* ``ExactlyOnceWriter``: unique events and dead letters collected to the driver and
  produced in one Kafka transaction with a commit marker (``transactional_sink``); a
  replayed batch is never produced twice. Dead letters to a JSONL directory are replaced
  per batch (effectively once) before the transaction.

Both retry a failed write per the ``transient`` policy (``retry(...)`` steps, then the
chain's end); any failure outlasting the retries raises ``PolicyExhausted``: the batch is
not committed, the query fails, and the restart strategy (``restart.RestartingEngine``)
decides whether it runs again.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Callable, Mapping

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from domain.accounting import Accounting
from domain.errors import DedupError, PolicyExhausted, SinkUnavailable
from domain.policies import Policies, Resolved, run_with_policy

from adapters.spark.metrics import NOTIFICATION, accounting_of
from adapters.spark.plan import DEAD_LETTER, DUPLICATE, EMIT
from adapters.spark.restart import first_line
from adapters.spark.sinks import BatchSink, kafka_records, reads_once, write_judged
from adapters.spark.transactional_sink import BatchOutput, TransactionalProducer

SKIP = "skip"


def retried(operation: Callable[[], object], policies: Policies, sleep: Callable[[float], None] = time.sleep):
    """Run a batch write under the transient policy; a failure of Spark's writers counts as transient."""
    def attempt():
        try:
            return operation()
        except DedupError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failed Spark write job: the sink could not take it
            raise SinkUnavailable(f"batch write failed: {first_line(exc)}") from None

    result = run_with_policy(attempt, policies, sleep)
    if isinstance(result, Resolved):
        raise PolicyExhausted(result.error, result.attempts)
    return result.value


def batch_counts(batch: DataFrame) -> dict[str, int]:
    """The batch's accounting (``in``, ``out``, ``duplicates``, ``dead_lettered``, ``skipped``,
    ``invalidations``)."""
    by_verdict = {row["verdict"]: row["count"] for row in batch.groupBy("verdict").count().collect()}
    invalidations = by_verdict.pop(NOTIFICATION, 0)
    return {"in": sum(by_verdict.values()), "out": by_verdict.get(EMIT, 0), "invalidations": invalidations,
            "duplicates": by_verdict.get(DUPLICATE, 0), "dead_lettered": by_verdict.get(DEAD_LETTER, 0),
            "skipped": by_verdict.get(SKIP, 0)}


@dataclass
class AtLeastOnceWriter:
    events: BatchSink
    dead_letters: BatchSink
    policies: Policies

    @property
    def reads_once(self) -> bool:
        """Whether ``write`` reads the batch once (one Kafka write for both outputs), so the caller
        need not cache it; otherwise each output reads it and the caller must persist it."""
        return reads_once(self.events, self.dead_letters)

    def write(self, batch: DataFrame, batch_id: int,
              recount: Callable[[int, Accounting], None] | None = None) -> None:
        """Writes the batch's unique events and dead letters, each write retried per policy.

        When ``reads_once``, a retry reads the batch again, so its observed accounting would
        count the rows of the failed attempt's finished tasks twice: the batch is then cached
        from the second attempt on and ``recount(batch_id, counts)`` gets its exact counts."""
        if not self.reads_once:
            retried(lambda: self.events.write(batch.filter(F.col("verdict") == EMIT), batch_id), self.policies)
            retried(lambda: self.dead_letters.write(batch.filter(F.col("verdict") == DEAD_LETTER), batch_id),
                    self.policies)
            return
        attempts = 0

        def attempt():
            nonlocal attempts
            attempts += 1
            if attempts == 2:
                batch.persist()
            write_judged(batch, batch_id, self.events, self.dead_letters)

        try:
            retried(attempt, self.policies)
            if attempts > 1 and recount is not None:
                recount(batch_id, accounting_of(batch))
        finally:
            if attempts > 1:
                batch.unpersist()


@dataclass
class ExactlyOnceWriter:
    events_topic: str
    dead_letters: BatchSink
    producer: TransactionalProducer
    policies: Policies
    checkpoint: str | None = None

    def write(self, batch: DataFrame, batch_id: int) -> None:
        self.producer.query_id = self.producer.query_id or query_id_of(self.checkpoint)
        if self.dead_letters.endpoint.kind != "kafka":
            retried(lambda: self.dead_letters.write(batch.filter(F.col("verdict") == DEAD_LETTER), batch_id),
                    self.policies)
        output = retried(lambda: self.collect(batch, batch_id), self.policies)
        retried(lambda: self.producer.write(output), self.policies)

    def collect(self, batch: DataFrame, batch_id: int) -> BatchOutput:
        """The batch's Kafka records on the driver, as ``(topic, key, value)``."""
        letters = self.dead_letters.endpoint.topic if self.dead_letters.endpoint.kind == "kafka" else None
        table = kafka_records(batch, self.events_topic, letters).toArrow()
        rows = list(zip(*(table.column(name).to_pylist() for name in ("topic", "key", "value"))))
        return BatchOutput(batch_id, rows, batch_counts(batch))

    def close(self) -> None:
        self.producer.close()


def query_id_of(checkpoint: str | None) -> str | None:
    """The query id Spark keeps in a local checkpoint's ``metadata`` file (None elsewhere).

    The commit markers carry it, so a checkpoint created anew at the same location (batch
    ids from 0 again) is not mistaken for the old query."""
    from adapters.spark.checkpoint import local_path

    try:
        return json.loads((local_path(checkpoint) / "metadata").read_text().splitlines()[0])["id"]
    except (TypeError, ValueError, OSError, IndexError, KeyError):
        return None


def writer_for(sink: str, dead_letters: str, delivery: str, checkpoint: str, policies: Policies,
               kafka_settings: Mapping[str, str] | None = None, transactional_id: str | None = None,
               spark_producer_options: Mapping[str, str] | None = None):
    """The batch writer for ``delivery`` (``at-least-once`` or ``exactly-once``).

    ``kafka_settings``: librdkafka settings (the transactional producer);
    ``spark_producer_options``: the same as options of Spark's Kafka writer.
    """
    from adapters.kafka.config import KafkaEndpoint
    from adapters.spark.jvm import SparkSetupError
    from adapters.spark.transactional_sink import (CommitLog, control_topic_for, default_transactional_id)

    options = dict(spark_producer_options or {})
    events, letters = (BatchSink.from_uri(sink, "events", options),
                       BatchSink.from_uri(dead_letters, "dead_letters", options))
    if delivery == "at-least-once":
        return AtLeastOnceWriter(events, letters, policies)
    if events.endpoint.kind != "kafka":
        raise SparkSetupError("kafka.delivery=exactly-once needs a kafka:// sink (JSONL output is replaced "
                              "per micro-batch, effectively once, with at-least-once)")
    endpoint = KafkaEndpoint(events.endpoint.location, events.endpoint.topic)
    commits = CommitLog(KafkaEndpoint(endpoint.bootstrap, events.endpoint.options.get(
        "commit_topic", control_topic_for(endpoint.topic))), kafka_settings or {})
    tid = transactional_id or default_transactional_id(checkpoint)
    return ExactlyOnceWriter(endpoint.topic, letters, TransactionalProducer(endpoint, commits, tid, kafka_settings),
                             policies, checkpoint)
