"""The judge that runs inside the streaming plan.

``OperatorJudge`` is the ``_parts.Judge`` whose verdicts come out of the stream itself: the
JVM operator (``DedupPlan.with_verdicts``) with its state in the checkpoint, the writer's route
applied once in the plan, and the plan's ``observe`` counting every row. Spark commits the
operator's state with the batch, and the operator collects the batch's newest times
(``stream._watermarks``), so nothing is left to settle after the write.
``stream.redis_judge.RedisBatchJudge`` is the other judge.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import DataFrame

from adapters.spark.batch._parts import BatchTools, JudgedBatch, Route
from adapters.spark.metrics import accounting_metrics
from adapters.spark.stream import DedupPlan

__all__ = ["OperatorJudge"]


class OperatorJudge:
    """The JVM operator judges in the stream; its state is kept in the checkpoint."""

    state_in_checkpoint = True
    verdicts_in_stream = True

    def stream(self, plan: DedupPlan, records: DataFrame, route: Route) -> DataFrame:
        return accounting_metrics(route(plan.with_verdicts(records)), plan.rules.rules)

    @contextmanager
    def judge(self, batch: DataFrame, batch_id: int, reads: int, tools: BatchTools) -> Iterator[JudgedBatch]:
        with JudgedBatch(batch, reads, observed=True) as judged:
            yield judged
