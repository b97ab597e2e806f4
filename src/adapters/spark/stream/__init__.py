"""The streaming plan: sources, strict parsing in Spark expressions, the rules compiled into
columns (``plan.DedupPlan``), the JVM operator's calls (``operator``), INVALIDATE
notifications (``invalidation``) and the per-partition watermarks each micro-batch is judged
against (``watermarks.BatchWatermarks``)."""
