"""The rule watermarks a job leaves in its checkpoint, read back (``streamdedup/watermarks/N.json``).

``adapters.spark.stream._watermarks.BatchWatermarks`` writes one file per micro-batch: the table
the batch was judged against (``use``) and the watermarks after it (``after``). A restart, a
migration, ``state inspect`` and ``state explain`` read the newest ``after`` here. These are the
domain's per-rule watermarks (``domain._watermarks``), not Spark's own event-time watermark (the
commit log's ``nextBatchWatermarkMs``), which is over every rule at once and only wakes the
operator's keys (their expiry queues' timers).
"""

from __future__ import annotations

import json
import time

from adapters.spark.checkpoint._hadoop_files import translated
from adapters.spark.checkpoint._logs import OURS, Checkpoint, OffsetEntry
from domain import DEFAULT_IDLE_TIMEOUT, Watermarks

DIRECTORY = "watermarks"


class BatchFiles:
    """What a micro-batch reads and writes in the checkpoint on its critical path, each file in
    one call into the JVM (``streamdedup.checkpoint.CheckpointText``; the operator's jar): its
    offsets entry and its file of watermarks. Failures as ``HadoopPath``'s (``StateUnavailable``)."""

    def __init__(self, spark, location: str):
        context = spark.sparkContext
        with translated(location):
            self._files = context._jvm.streamdedup.checkpoint.CheckpointText(
                location, context._jsc.hadoopConfiguration()
            )

    def offsets(self, batch: int) -> OffsetEntry:
        """``offsets/N``, which Spark wrote before running batch N."""
        text = self._call("read", f"offsets/{batch}")
        if text is None:
            raise FileNotFoundError(f"offsets/{batch}")
        return OffsetEntry.parse(text)

    def read(self, batch: int) -> dict | None:
        """Batch N's watermark file, or None when missing or unreadable."""
        try:
            text = self._call("read", _watermark_file(batch))
            return None if text is None else json.loads(text)
        except (OSError, ValueError):
            return None

    def write(self, batch: int, document: dict) -> None:
        self._call("write", _watermark_file(batch), json.dumps(document))

    def delete(self, batch: int) -> None:
        self._call("delete", _watermark_file(batch))

    def _call(self, name: str, relative: str, *args):
        with translated(relative):
            return getattr(self._files, name)(relative, *args)


def _watermark_file(batch: int) -> str:
    return f"{OURS}/{DIRECTORY}/{batch}.json"


def restored(checkpoint: Checkpoint | None, idle_timeout: float = DEFAULT_IDLE_TIMEOUT) -> Watermarks:
    """The watermarks after the newest batch the checkpoint recorded (before it, if it did not finish)."""
    directory = None if checkpoint is None else checkpoint.ours / DIRECTORY
    files = (
        sorted((p for p in directory.glob("*.json") if p.stem.isdigit()), key=lambda p: int(p.stem))
        if directory is not None and directory.is_dir()
        else []
    )
    for path in reversed(files):
        try:
            saved = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if "after" in saved:
            return Watermarks.from_document(saved["after"], idle_timeout)
    return Watermarks(idle_timeout)


def rule_watermarks(checkpoint: Checkpoint) -> dict[str, int]:
    """Each rule's watermark (s) as the checkpoint's job left it: what a migration exports and
    floors by (their lowest) and retires the old state by (their highest)."""
    return restored(checkpoint).table(time.time())[0]
