"""The JVM sink's hooks for one query run (``streamdedup.output.BatchHooks``): registered before
the query starts, read when it ends.

``SinkHooks.register`` names the hooks for the sink's ``hooks`` option; the checkpoint's lease
tells them each renewal (``renewed``) and its loss (``lost``). After each micro-batch the engine
reports the partitions the sink found committed before (``report_skipped``: the same log line
as ``foreachBatch``'s writer); when the query failed, ``aborted_batch`` says whether Spark
aborted a batch's write (then the engine retries that batch per the ``transient`` policy).
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from adapters.spark.output._writers import report_skipped

log = logging.getLogger(__name__)


@dataclass
class SinkHooks:
    name: str
    hooks: Any  # the JVM's BatchHooks

    @classmethod
    def register(cls, spark, watermark_files, fresh_ms: int) -> SinkHooks:
        """Hooks for one query run over ``watermark_files`` (``BatchWatermarkFiles``); a batch is
        refused when the lease was not found ours within ``fresh_ms``."""
        name = f"streamdedup-{uuid.uuid4().hex}"
        return cls(name, _hooks_class(spark).register(name, watermark_files, fresh_ms))

    def renewed(self) -> None:
        self.hooks.renewed()

    def lost(self, reason: str) -> None:
        self.hooks.lost(reason)

    def report_skipped(self) -> None:
        """Logs the partitions of the batches since the last call that were committed before."""
        skipped: dict[int, list[int]] = {}
        for entry in self.hooks.drainSkipped().split("\n"):
            if entry:
                batch, line = entry.split("\t", 1)
                skipped.setdefault(int(batch), []).append(json.loads(line)["partition"])
        for batch_id, partitions in sorted(skipped.items()):
            report_skipped(batch_id, sorted(partitions))

    def aborted_batch(self) -> int | None:
        """The last batch of this run whose write Spark aborted, or None (also when Spark's JVM is gone)."""
        try:
            batch = int(self.hooks.lastAborted())
        except Exception as exc:  # the JVM died with the query: no batch can be retried in it
            log.debug("the JVM sink's hooks did not answer (%s)", exc)
            return None
        return batch if batch >= 0 else None

    def unregister(self, spark) -> None:
        _hooks_class(spark).unregister(self.name)


def _hooks_class(spark):
    """The JVM sink's ``streamdedup.output.BatchHooks`` class (in the operator's jar)."""
    jvm = spark._jvm
    assert jvm is not None  # a running session has its gateway
    return jvm.streamdedup.output.BatchHooks
