"""The streaming plan: sources, strict parsing in Spark expressions, the state key, the rules
compiled into columns (``DedupPlan``), the JVM operator's calls, INVALIDATE notifications,
the per-partition watermarks each micro-batch is judged against, and the two judges
(``OperatorJudge``, ``RedisBatchJudge``)."""

from adapters.spark.stream.invalidation import with_notifications
from adapters.spark.stream.judges import OperatorJudge
from adapters.spark.stream.keys import from_legacy_column, join_escaped, key_parts, rule_column
from adapters.spark.stream.operator import state_row_counter
from adapters.spark.stream.plan import DEAD_LETTER, EMIT, NOTIFICATION, DedupPlan, Hook
from adapters.spark.stream.redis_judge import RedisBatchJudge
from adapters.spark.stream.sources import Endpoint, parse_uri, read_stream
from adapters.spark.stream.watermarks import BatchWatermarks

__all__ = ["DEAD_LETTER", "EMIT", "NOTIFICATION", "BatchWatermarks", "DedupPlan", "Endpoint", "Hook",
           "OperatorJudge", "RedisBatchJudge", "from_legacy_column", "join_escaped", "key_parts", "parse_uri",
           "read_stream", "rule_column", "state_row_counter", "with_notifications"]
