"""What the micro-batches write to the checkpoint's state, and the state's size there.

Spark's progress does not say it with changelog checkpointing (the engine's default): each
micro-batch writes a changelog per state partition, and a snapshot (a zip and its new SST
files) every ``minDeltasForSnapshot`` versions, but ``rocksdbBytesCopied`` counts only the SST
files of the last snapshot upload, reported again by every micro-batch until the next one, and
after a restart the files downloaded to load the state (seen with Spark 4.0.1). With RocksDB's
bounded memory (also the default) ``memoryUsedBytes`` is 0, as is ``rocksdbSstFileSize`` until
RocksDB flushes a memtable. So the state directory is looked at instead, after every
micro-batch (``streamdedup.checkpoint.StateFiles``, one recursive listing in the JVM): the files that
appeared since the last look are what was written (changelogs or deltas, snapshots, their SST
files), and all its files are the state's size in the checkpoint. Hidden files are left out: files being written (renamed into place once
complete) and Hadoop's checksums, which ``dedup state inspect`` counts on a local checkpoint
(about 1% more there).

Failure behaviour: a look that fails (the file system unavailable, a file deleted while it was
listed) is logged and skipped, and the next look counts what was written since the last one
that succeeded; the metrics never stop the query.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from adapters.spark.checkpoint._logs import Checkpoint
from domain import first_line

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StateLook:
    written: int  # bytes of the files that appeared since the last look
    size: int  # bytes of every file of the state directory


@dataclass
class StateFiles:
    files: Any  # streamdedup.checkpoint.StateFiles (JVM)

    @classmethod
    def open(cls, spark, checkpoint: str) -> StateFiles | None:
        """The state directory of ``checkpoint``; what it holds now is not counted as written.
        None (logged) when it cannot be listed: the run goes on without these figures."""
        location = str(Checkpoint.at(checkpoint, spark).path / "state")
        try:
            return cls(
                spark._jvm.streamdedup.checkpoint.StateFiles(location, spark.sparkContext._jsc.hadoopConfiguration())
            )
        except Exception as exc:
            log.warning("the checkpoint's state files could not be listed: %s", first_line(exc))
            return None

    def look(self) -> StateLook | None:
        """What was written since the last look, and the size; None when the listing failed."""
        try:
            written, size = self.files.look()
        except Exception as exc:
            log.warning("the checkpoint's state files could not be listed: %s", first_line(exc))
            return None
        return StateLook(int(written), int(size))
