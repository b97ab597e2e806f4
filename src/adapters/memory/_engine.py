"""The in-process engine over files: the domain's batch pipeline, nothing owned.

It runs ``domain._pipeline.BatchPipeline`` over whatever source and sinks it was given
(JSONL files, stdin, stdout) with the at-least-once ``SourceCommitter``: a batch is
acknowledged only after its outcomes are flushed, so a crash replays it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from domain import Accounting, BatchPipeline


@dataclass
class InMemoryEngine:
    pipeline: BatchPipeline
    on_batch: Callable[[Accounting], None] | None = None

    def run(self, stop: threading.Event | None = None) -> Accounting:
        """``BatchPipeline.run``: until the input ends or ``stop`` is set; returns the totals."""
        return self.pipeline.run(stop, self.on_batch)
