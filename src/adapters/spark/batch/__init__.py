"""One micro-batch's parts and the two judges, above the stream and the metrics: the
protocols a micro-batch is handled through (``parts``: ``Judge``, ``BatchWriter``,
``JudgedBatch``), the JVM operator's judge (``operator_judge.OperatorJudge``, its state in
the checkpoint) and the Redis judge (``redis_judge.RedisBatchJudge``)."""

from adapters.spark.batch.operator_judge import OperatorJudge
from adapters.spark.batch.parts import BatchTools, BatchWriter, Judge, JudgedBatch
from adapters.spark.batch.redis_judge import RedisBatchJudge

__all__ = [
    "BatchTools",
    "BatchWriter",
    "Judge",
    "JudgedBatch",
    "OperatorJudge",
    "RedisBatchJudge",
]
