"""The two parts a ``SparkEngine`` is assembled from, as the engine sees them.

A micro-batch goes source → ``Judge.stream`` (the streaming plan) → ``foreachBatch`` →
``Judge.judge`` (the verdicts of this batch) → ``BatchWriter.write`` → Spark commits the batch.
``_engine.build_spark_engine`` chooses one of each from the settings:

* judges (``stream.judges``): ``OperatorJudge``, the JVM operator inside the streaming plan
  with its state in the checkpoint, or ``RedisBatchJudge``, each batch judged against Redis;
* writers (``output._writers``): ``AtLeastOnceWriter`` or ``ExactlyOnceWriter``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from adapters.spark.stream import DedupPlan

__all__ = ["BatchTools", "BatchWriter", "Judge", "JudgedBatch", "Route"]

T = TypeVar("T")
Route = Callable[["DataFrame"], "DataFrame"]


@dataclass(frozen=True)
class BatchTools:
    """What a judge gets from the engine for one micro-batch."""

    plan: DedupPlan
    route: Route  # the writer's ``routed``: verdicts as the writer takes them (oversize events dead-lettered)
    retried: Callable[[Callable[[], T]], T]  # runs a piece of the batch's work per the ``transient`` policy
    recount: Callable[[DataFrame], None]  # makes these judged rows the batch's accounting


class JudgedBatch:
    """A micro-batch DataFrame (``df``), persisted while it is read more than once.

    ``observed``: the plan's ``observe`` counted these rows as Spark computed them, so a write
    that reads them again uncached must recount them; ``newest``: the batch's newest times per
    rule and partition, when the judge (not the operator) collects them.
    """

    def __init__(self, df: DataFrame, reads: int, observed: bool = False):
        self.df, self.cached, self.observed = df, False, observed
        self.newest: list[tuple[str, str, int]] | None = None
        if reads > 1:
            self.persist()

    def persist(self) -> None:
        if not self.cached:
            self.df.persist()
            self.cached = True

    def __enter__(self) -> JudgedBatch:
        return self

    def __exit__(self, *exc) -> None:
        if self.cached:
            self.df.unpersist()


class Judge(Protocol):
    """Where verdicts come from, and where the deduplication state lives."""

    state_in_checkpoint: bool  # the state is Spark's, kept in the checkpoint (the guard checks its format)
    # ``stream`` gives the verdicts: a batch is written as it comes (``BatchWriter.in_stream``)
    verdicts_in_stream: bool

    def stream(self, plan: DedupPlan, records: DataFrame, route: Route) -> DataFrame:
        """The streaming DataFrame whose micro-batches ``judge`` gets, built once per start."""

    def judge(
        self, batch: DataFrame, batch_id: int, reads: int, tools: BatchTools
    ) -> AbstractContextManager[JudgedBatch]:
        """The batch's judged rows, cached while the body runs when read more than ``reads`` times
        in all. The body writes them; when it returns, the judge settles the batch (its state, its
        counts, ``JudgedBatch.newest``); when it raises, nothing is settled and the batch is not
        committed. Raises what judging raises after ``tools.retried`` gave up."""


class BatchWriter(Protocol):
    """Writes a judged micro-batch's unique events and dead letters, before Spark commits the batch."""

    reads: int  # how many times one ``write`` reads the judged batch (more than once: it is cached)
    kafka: bool  # writes a Kafka topic (the Kafka connector must be on the classpath)
    routed: Route

    def in_stream(self, judged: DataFrame) -> DataFrame:
        """The stream of verdicts with what the writer computes per row added to it, once per start
        (a judge whose ``stream`` gives the verdicts): planned with the stream, not per batch."""

    def sink_options(self) -> dict[str, str] | None:
        """The options of the JVM streaming sink that writes the batches as ``write`` does, with no call
        into Python (``streamdedup.output.KafkaSink``), after ``open``; None: ``write`` writes them."""

    def open(self, spark: SparkSession) -> None:
        """Called at each start of the query, before it runs (e.g. the exactly-once identity)."""

    def write(self, batch: DataFrame, batch_id: int) -> None:
        """One attempt; raises on failure (the engine retries per the ``transient`` policy)."""

    def close(self) -> None:
        """Called when the query ends: the clients the writer opened are closed."""
