"""The Spark engine: source → parse → judge (per the RuleSet) → unique events + dead letters.

``SparkEngine(...).run()`` starts one streaming query and returns the accounting counts
of the micro-batches it ran (``Accounting.as_dict()`` shape). With ``available_now=True``
it processes the backlog available at start, then stops; otherwise it runs until ``stop``
is set, then lets the running micro-batch finish and stops the query cleanly. A restart
with the same checkpoint continues after the last committed micro-batch.

Failure behaviour: an exception in a micro-batch (a sink write, the operator) fails the
query; that batch is not committed and is replayed on restart. Unique events written to
a JSONL directory are replaced on replay (effectively once); to Kafka they may repeat
(Spark's Kafka writer is at-least-once).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession

from adapters.spark.metrics import ProgressListener, accounting_metrics
from adapters.spark.migration import CheckpointGuard
from adapters.spark.plan import DEAD_LETTER, EMIT, DedupPlan
from adapters.spark.session import build_session, state_store_conf
from adapters.spark.sinks import BatchSink
from adapters.spark.sources import read_stream
from domain.rules import RuleSet


@dataclass
class SparkEngine:
    rules: RuleSet
    source: str
    sink: str
    dead_letters: str
    checkpoint: str
    trigger_interval: str = "0 seconds"
    state_provider: str = "rocksdb"
    master: str = "local[*]"
    max_records_per_batch: int | None = None
    spark: SparkSession | None = None
    metrics: object | None = None
    listener: ProgressListener = field(init=False)
    guard: CheckpointGuard = field(init=False, repr=False)

    def __post_init__(self):
        self.listener = ProgressListener(self.metrics)
        self.guard = CheckpointGuard(self.rules, self.checkpoint)
        self._events = BatchSink.from_uri(self.sink, "events")
        self._dead_letters = BatchSink.from_uri(self.dead_letters, "dead_letters")

    def session(self) -> SparkSession:
        if self.spark is None:
            self.spark = build_session(self.master)
        return self.spark

    def judged(self) -> DataFrame:
        """The streaming plan up to the verdicts, with its accounting observed."""
        return accounting_metrics(self.verdicts())

    def verdicts(self) -> DataFrame:
        """Source → verdicts; during a migration from the old job's position, with its old state as fallback."""
        records = read_stream(self.session(), self.guard.source(self.source), self.max_records_per_batch)
        plan = DedupPlan(self.rules, before_operator=self.guard.fallback)
        return plan.judge(self.guard.records(records))

    def run(self, available_now: bool = True, stop: threading.Event | None = None) -> dict[str, int]:
        """Run the query (see the module docstring); returns this run's accounting counts."""
        spark = self.session()
        for key, value in state_store_conf(self.state_provider).items():
            spark.conf.set(key, value)
        self.guard.prepare(spark)  # refuses an incompatible checkpoint before anything is written
        spark.streams.addListener(self.listener)
        try:
            query = self._start(available_now)
            self.listener.query_id = str(query.id)
            self._await(query, available_now, stop or threading.Event())
            last = query.lastProgress
            if last is not None:
                self.listener.wait_for(last["batchId"])
        finally:
            spark.streams.removeListener(self.listener)
        return self.listener.totals.as_dict()

    def _start(self, available_now: bool):
        writer = self.judged().writeStream.foreachBatch(self._write_batch) \
            .option("checkpointLocation", self.checkpoint).queryName(f"streamdedup-{id(self)}")
        trigger = {"availableNow": True} if available_now else {"processingTime": self.trigger_interval}
        return writer.trigger(**trigger).start()

    def _write_batch(self, batch: DataFrame, batch_id: int) -> None:
        batch.persist()
        try:
            self._events.write(batch.filter(batch.verdict == EMIT), batch_id)
            self._dead_letters.write(batch.filter(batch.verdict == DEAD_LETTER), batch_id)
        finally:
            batch.unpersist()

    @staticmethod
    def _await(query, available_now: bool, stop: threading.Event) -> None:
        while query.isActive:
            if stop.is_set():
                _stop_after_running_batch(query)
                break
            query.awaitTermination(0.2 if available_now else 0.5)
        if query.exception() is not None:
            raise query.exception()


def _stop_after_running_batch(query, poll: float = 0.1) -> None:
    """Graceful stop: wait for the running micro-batch to commit, then stop the query."""
    while query.isActive and query.status["isTriggerActive"]:
        time.sleep(poll)
    query.stop()
