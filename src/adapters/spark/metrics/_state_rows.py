"""The state-rows gauge when RocksDB does not count its rows: the operator counts them.

RocksDB's own count (``trackTotalNumberOfRows``) reads every key before writing it, 14–24% of
the Kafka → Kafka rate at 10 M keys (docs/design/measurements.md), so the engine turns it
off and ``WindowDedup`` counts the keys it creates and removes instead (``StateRowCount``, a
Spark accumulator: replayed micro-batches replace their own count, never add to it).

The count is relative to the start of the run; the number of keys at that start is kept in
the checkpoint (``streamdedup/state_rows.json``, written after every micro-batch). A
checkpoint without that file but with progress (written before this count existed) is
counted once at start with Spark's state data source. The file is kept through the
checkpoint's own Hadoop file system (any checkpoint location). After a driver crash the
figure can be off by the keys of the micro-batch that was running.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from adapters.spark.checkpoint import Checkpoint, HadoopPath
from domain import first_line

log = logging.getLogger(__name__)
FILE = "state_rows.json"


@dataclass
class StateRowGauge:
    """Keys in the operator's state: ``base`` at the run's start plus the counter's net change."""

    counter: Any  # the JVM StateRowCount (stream._operator.state_row_counter)
    path: HadoopPath | None
    base: int | None

    @classmethod
    def open(cls, spark, checkpoint: str, counter) -> StateRowGauge:
        """The gauge of ``checkpoint``'s keys; a checkpoint with progress but no count kept is counted once."""
        location = Checkpoint.at(checkpoint, spark)
        path = location.ours / FILE
        if path.exists():
            return cls(counter, path, int(json.loads(path.read_text())["rows"]))
        if location.last_committed() is None or not (location.path / "state").exists():
            return cls(counter, path, 0)  # no operator state yet (or none at all: Redis state)
        from adapters.spark.checkpoint import read_state

        log.info("counting the keys of checkpoint %s once (it has no %s yet)", checkpoint, FILE)
        try:
            return cls(counter, path, read_state(spark, checkpoint).count())
        except Exception as exc:
            log.warning(
                "the state rows of %s could not be counted (%s); no state_rows gauge",
                checkpoint,
                first_line(exc, str(exc)),
            )
            return cls(counter, path, None)

    def rows(self) -> int | None:
        return None if self.base is None else self.base + int(self.counter.value())

    def removed(self) -> int:
        """Keys the operator removed in this run (their emissions expired, or an invalidation emptied them)."""
        return int(self.counter.removed())

    def record(self, rows: int | None = None) -> None:
        """Keeps the current count (or ``rows``, e.g. Spark's own exact one) in the checkpoint."""
        rows = self.rows() if rows is None else rows
        if self.path is None or rows is None or not self.path.parent.exists():
            return
        self.path.write_text(json.dumps({"rows": rows}))
