"""The rule watermarks a job leaves in its checkpoint, read back (``streamdedup/watermarks/N.json``).

The engine's watermarks (``adapters.spark.stream._watermarks``) write one file per micro-batch: the table
the batch was judged against (``use``) and the watermarks after it (``after``). A restart, a
migration, ``state inspect`` and ``state explain`` read the newest ``after`` here. These are the
domain's per-rule watermarks (``domain._watermarks``), not Spark's own event-time watermark (the
commit log's ``nextBatchWatermarkMs``), which is over every rule at once and only wakes the
operator's keys (their expiry queues' timers).
"""

from __future__ import annotations

import json
import time

from adapters.spark.checkpoint._logs import Checkpoint
from domain import DEFAULT_IDLE_TIMEOUT, Watermarks

DIRECTORY = "watermarks"


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
