"""The streaming plan: sources, strict parsing in Spark expressions, the state key, the rules
compiled into columns (``DedupPlan``), the JVM operator's calls, INVALIDATE notifications,
the per-partition watermarks each micro-batch is judged against, and the two judges
(``OperatorJudge``, ``RedisBatchJudge``)."""

from adapters.spark.exports import lazy

_MODULE_OF = {
    "with_notifications": "invalidation",
    "OperatorJudge": "judges",
    "from_legacy_column": "keys",
    "join_escaped": "keys",
    "key_parts": "keys",
    "rule_column": "keys",
    "state_row_counter": "operator",
    "DEAD_LETTER": "plan",
    "EMIT": "plan",
    "NOTIFICATION": "plan",
    "DedupPlan": "plan",
    "Hook": "plan",
    "RedisBatchJudge": "redis_judge",
    "Endpoint": "sources",
    "parse_uri": "sources",
    "read_stream": "sources",
    "BatchWatermarks": "watermarks",
}
__all__ = sorted(_MODULE_OF)  # noqa: PLE0605 (goes with lazy exports, issue 55)
__getattr__ = lazy(__name__, _MODULE_OF)
