"""The Spark engine with delivery guarantees and error policies.

``PolicySparkEngine`` is a ``SparkEngine`` whose micro-batches are written by a
``batch_writers`` writer (at-least-once or exactly-once, transient failures retried per
policy) and whose invalid records follow the ``invalid`` policy's last step:

* ``dead-letter`` (and ``invalidate``: an invalid record has no key to forget): to the
  dead-letter output with the original bytes and reason;
* ``skip``: counted as ``skipped``, written nowhere;
* ``fail``: the micro-batch fails (``raise_error`` in the plan), so the query stops
  without committing it and the restart strategy decides.

Late records are always dead-lettered (as in the domain core). With ``notifications`` (a
Kafka topic or JSONL directory) INVALIDATE notifications take effect on the state
(``invalidation``). With ``redis_state`` the deduplication state is Redis instead of
Spark's state store (``redis_state``). Wrap it in ``restart.RestartingEngine`` for the
restart strategy.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from domain.policies import Policies, Terminal

from adapters.spark.batch_writers import SKIP, AtLeastOnceWriter, retried
from adapters.spark.engine import SparkEngine
from adapters.spark.invalidation import with_notifications
from adapters.spark.metrics import accounting_metrics, accounting_of
from adapters.spark.parse import parse
from adapters.spark.plan import DEAD_LETTER, DedupPlan, _operator_input, _verdicts
from adapters.spark.redis_state import RedisBatchJudge
from adapters.spark.sources import read_stream


def apply_invalid_policy(judged: DataFrame, policies: Policies) -> DataFrame:
    """``judged`` with invalid records' verdict per the ``invalid`` policy (see the module docstring)."""
    terminal = policies.chains["invalid"].terminal
    invalid = (F.col("verdict") == DEAD_LETTER) & (F.col("reason") != "late")
    if terminal is Terminal.SKIP:
        return judged.withColumn("verdict", F.when(invalid, F.lit(SKIP)).otherwise(F.col("verdict")))
    if terminal is Terminal.FAIL:
        failure = F.raise_error(F.concat(F.lit("invalid record (policy invalid=fail): "), F.col("reason")))
        return judged.withColumn("verdict", F.when(invalid, failure.cast("string")).otherwise(F.col("verdict")))
    return judged


@dataclass
class PolicySparkEngine(SparkEngine):
    writer: object | None = None
    policies: Policies | None = None
    notifications: str | None = None
    redis_state: RedisBatchJudge | None = None

    def judged(self) -> DataFrame:
        """The plan up to the verdicts, invalid records per policy, with its accounting observed.

        With Redis state the stream stops before judging: each micro-batch is judged in
        ``write_batch`` (``redis_state``), and counted there."""
        if self.redis_state is not None:
            return self.operator_input()
        return accounting_metrics(apply_invalid_policy(self.verdicts(), self._policies()))

    def verdicts(self) -> DataFrame:
        """``SparkEngine.verdicts``, with the INVALIDATE notifications unioned in when configured."""
        if self.notifications is None:
            return super().verdicts()
        hook = with_notifications(self._notes(), DedupPlan(self.rules), self.guard.fallback)
        return DedupPlan(self.rules, before_operator=hook, state_rows=self.state_rows).judge(self._records())

    def operator_input(self) -> DataFrame:
        """Source → the rows the state judges (key, t, window, …), notifications unioned in."""
        plan = DedupPlan(self.rules)
        rows = _operator_input(plan.annotate(parse(self._records(), plan.extra_fields)))
        return rows if self.notifications is None else with_notifications(self._notes(), plan)(rows)

    def run(self, stop=None, available_now: bool | None = None):
        """``SparkEngine.run``; the writer's producer (exactly-once) is closed when the run ends."""
        try:
            return super().run(stop, available_now)
        finally:
            close = getattr(self.writer, "close", None)
            if close is not None:
                close()

    def write_batch(self, batch: DataFrame, batch_id: int) -> None:
        if self.writer is None and self.redis_state is None:
            super().write_batch(batch, batch_id)
            return
        if self.redis_state is None and getattr(self.writer, "reads_once", False):
            self.writer.write(batch, batch_id, recount=self.listener.recount)
            return
        batch.persist()
        try:
            if self.redis_state is None:
                self.writer.write(batch, batch_id)
            else:
                self._judge_and_write(batch, batch_id)
        finally:
            batch.unpersist()

    def _judge_and_write(self, rows: DataFrame, batch_id: int) -> None:
        policies = self._policies()
        judged = retried(lambda: _materialized(self.redis_state.judge(rows, batch_id)), policies)
        try:
            verdicts = apply_invalid_policy(_verdicts(judged), policies)
            writer = self.writer or AtLeastOnceWriter(self._events, self._dead_letters, policies)
            writer.write(verdicts, batch_id)
            retried(lambda: self.redis_state.advance(rows, batch_id), policies)
            self.listener.totals.add(accounting_of(verdicts))
        finally:
            judged.unpersist()

    def _records(self) -> DataFrame:
        records = read_stream(self.session(), self.guard.source(self.source), self.max_records_per_batch,
                              self.kafka_options.get("consumer", {}))
        return self.guard.records(records)

    def _notes(self) -> DataFrame:
        return read_stream(self.session(), self.notifications, None, self.kafka_options.get("consumer", {}))

    def _policies(self) -> Policies:
        return self.policies or Policies()


def _materialized(df: DataFrame) -> DataFrame:
    df.persist()
    df.count()
    return df
