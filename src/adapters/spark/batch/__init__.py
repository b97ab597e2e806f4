"""One micro-batch's parts and the two judges, above the stream and the metrics: the
protocols a micro-batch is handled through (``_parts``: ``Judge``, ``BatchWriter``,
``JudgedBatch``), the JVM operator's judge (``_operator_judge.OperatorJudge``, its state in
the checkpoint) and the Redis judge (``_redis_judge.RedisBatchJudge``)."""

from adapters.spark.batch._operator_judge import OperatorJudge
from adapters.spark.batch._parts import BatchTools, BatchWriter, Judge, JudgedBatch
from adapters.spark.batch._redis_judge import RedisBatchJudge

__all__ = [
    "BatchTools",
    "BatchWriter",
    "Judge",
    "JudgedBatch",
    "OperatorJudge",
    "RedisBatchJudge",
]
