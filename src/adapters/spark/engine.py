"""The Spark engine: source → parse → judge (per the RuleSet) → unique events + dead letters.

``SparkEngine(...).run(stop)`` starts one streaming query and returns the ``Accounting`` of
the micro-batches this run processed, calling ``on_batch(totals)`` after every query
progress, idle ones included (the CLI's progress line and the health check's stall
detection rest on it). Bounded (``available_now``, the default for a JSONL directory
source) it processes what the source holds at start, then stops; otherwise (the default
for Kafka) it runs until ``stop`` is set, then lets the running micro-batch finish and
stops the query cleanly. A restart with the same checkpoint continues after the last
committed micro-batch.

Failure behaviour: an exception in a micro-batch (a sink write, the operator) fails the
query and ``run`` raises ``SparkQueryError``; that batch is not committed and is replayed on
restart. Unique events written to a JSONL directory are replaced on replay (effectively
once); to Kafka they may repeat (Spark's Kafka writer is at-least-once).

The query is assembled from separable steps: ``judged()`` (source → verdicts, observed),
``write_outputs`` (the ``foreachBatch`` writer) and ``start_query``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from pyspark.sql import DataFrame, SparkSession

from adapters.spark.metrics import ProgressListener, accounting_metrics
from adapters.spark.guard import CheckpointGuard
from adapters.spark.plan import DedupPlan
from adapters.spark.session import build_session, require_classes, state_rows_tracked, state_store_conf
from adapters.spark.sinks import BatchSink, reads_once, write_judged
from adapters.spark.sources import parse_uri, read_stream
from adapters.spark.state_rows import StateRowGauge, state_row_counter
from domain.accounting import Accounting
from domain.errors import PermanentError
from domain.rules import RuleSet


class SparkQueryError(PermanentError):
    """The streaming query failed; its running micro-batch was not committed (a restart replays it)."""

    error_class = "bug"


@dataclass
class SparkEngine:
    rules: RuleSet
    source: str
    sink: str
    dead_letters: str
    checkpoint: str
    trigger_interval: str = "0 seconds"
    available_now: bool | None = None
    state_provider: str = "rocksdb"
    master: str | None = None
    max_records_per_batch: int | None = None
    shuffle_partitions: int | None = None
    conf: dict[str, str] = field(default_factory=dict)
    kafka_options: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)
    spark: SparkSession | None = None
    metrics: object | None = None
    on_batch: Callable[[Accounting], None] | None = None
    listener: ProgressListener = field(init=False, repr=False)
    guard: CheckpointGuard = field(init=False, repr=False)
    state_rows: object | None = field(init=False, default=None, repr=False)  # the operator's StateRowCount

    def __post_init__(self):
        self.listener = ProgressListener(self.metrics)
        self.guard = CheckpointGuard(self.rules, self.checkpoint)
        producer = self.kafka_options.get("producer", {})
        self._events = BatchSink.from_uri(self.sink, "events", producer)
        self._dead_letters = BatchSink.from_uri(self.dead_letters, "dead_letters", producer)

    def session(self) -> SparkSession:
        if self.spark is None:
            self.spark = build_session(self.master, conf=self.conf)
        return self.spark

    def judged(self) -> DataFrame:
        """The streaming plan up to the verdicts, with its accounting observed."""
        return accounting_metrics(self.verdicts())

    def verdicts(self) -> DataFrame:
        """Source → verdicts; during a migration from the old job's position, with its old state as fallback."""
        records = read_stream(self.session(), self.guard.source(self.source), self.max_records_per_batch,
                              self.kafka_options.get("consumer", {}))
        plan = DedupPlan(self.rules, before_operator=self.guard.fallback, state_rows=self.state_rows)
        return plan.judge(self.guard.records(records))

    def bounded(self, available_now: bool | None = None) -> bool:
        """Whether this run stops once the source's backlog is processed."""
        for choice in (available_now, self.available_now):
            if choice is not None:
                return choice
        return parse_uri(self.source).kind == "jsonl"

    def run(self, stop: threading.Event | None = None, available_now: bool | None = None) -> Accounting:
        """Run the query (see the module docstring); returns this run's accounting counts."""
        spark = self.session()
        self._prepare(spark)
        self.guard.prepare(spark)  # refuses an incompatible checkpoint before anything is written
        tracked = state_rows_tracked(spark, self.state_provider)
        self.state_rows = state_row_counter(spark)
        gauge = StateRowGauge.open(spark, self.checkpoint, self.state_rows, count_missing=not tracked)
        self.listener = ProgressListener(self.metrics, self.on_batch, tracked, gauge)
        bounded = self.bounded(available_now)
        spark.streams.addListener(self.listener)
        try:
            query = self.start_query(bounded)
            self.listener.query_id = str(query.id)
            try:
                await_query(query, bounded, stop or threading.Event())
            finally:
                if query.isActive:  # waiting failed (e.g. the gateway): no query is left running
                    query.stop()
            last = query.lastProgress
            if last is not None:
                self.listener.wait_for(last["batchId"])
        finally:
            spark.streams.removeListener(self.listener)
        return self.listener.totals

    def _prepare(self, spark: SparkSession) -> None:
        """Checks the classpath and sets the SQL settings a query reads when it starts."""
        kafka = any(parse_uri(uri).kind == "kafka" for uri in (self.source, self.sink, self.dead_letters))
        require_classes(spark, kafka)
        runtime = state_store_conf(self.state_provider)
        if self.shuffle_partitions:
            runtime["spark.sql.shuffle.partitions"] = str(self.shuffle_partitions)
        runtime.update({k: v for k, v in self.conf.items() if k.startswith("spark.sql.")})
        for key, value in runtime.items():
            spark.conf.set(key, value)

    def start_query(self, bounded: bool):
        writer = self.judged().writeStream.foreachBatch(self.write_batch) \
            .option("checkpointLocation", self.checkpoint).queryName(f"streamdedup-{id(self)}")
        trigger = {"availableNow": True} if bounded else {"processingTime": self.trigger_interval}
        return writer.trigger(**trigger).start()

    def write_batch(self, batch: DataFrame, batch_id: int) -> None:
        write_outputs(batch, batch_id, self._events, self._dead_letters)


def write_outputs(batch: DataFrame, batch_id: int, events: BatchSink, dead_letters: BatchSink) -> None:
    """The ``foreachBatch`` writer: emitted rows to ``events``, dead-lettered rows to ``dead_letters``.

    The batch is cached only when the outputs read it twice (``sinks.reads_once``): each read
    of an uncached batch would run the whole plan, the stateful operator included, again."""
    cached = not reads_once(events, dead_letters)
    if cached:
        batch.persist()
    try:
        write_judged(batch, batch_id, events, dead_letters)
    finally:
        if cached:
            batch.unpersist()


def await_query(query, bounded: bool, stop: threading.Event) -> None:
    """Wait for a bounded query to finish or for ``stop``; raises ``SparkQueryError`` if it failed."""
    while query.isActive:
        if stop.is_set():
            _stop_after_running_batch(query)
            break
        query.awaitTermination(0.2 if bounded else 0.5)
    failure = query.exception()
    if failure is not None:
        first = str(failure).strip().splitlines()[0] if str(failure).strip() else type(failure).__name__
        raise SparkQueryError(f"the Spark query failed: {first}") from failure


def _stop_after_running_batch(query, poll: float = 0.1) -> None:
    """Graceful stop: let the running micro-batch commit, then stop the query.

    Stops as soon as no micro-batch runs, or right after the running one reported its
    progress: behind a backlog Spark starts the next batch at once, and waiting for a gap
    would drain the whole backlog. That next batch is cancelled before it commits and is
    processed again on restart.
    """
    seen = _last_progress(query)
    while query.isActive and query.status["isTriggerActive"] and _last_progress(query) == seen:
        time.sleep(poll)
    query.stop()


def _last_progress(query) -> tuple | None:
    last = query.lastProgress
    return None if last is None else (last["batchId"], last["timestamp"])
