"""Reading a Structured Streaming checkpoint's own logs.

A checkpoint directory holds ``offsets/N`` (the end offsets of micro-batch N, one line per
source after a version line and a metadata line), ``commits/N`` (batch N finished; its
``nextBatchWatermarkMs``), ``sources/<i>/`` (the file source's log of files read) and
``state/`` (the stateful operators' stores). ``streamdedup/`` is ours: the job's manifest,
its exactly-once identity, the running instance's lease and, after a migration, the old
state's read-only fallback.

Every location Spark can checkpoint to is read the same way, through the running Spark's
Hadoop file systems (``_hadoop_files.HadoopPath``): a local path, ``file:``, ``hdfs:``,
``s3a:``… A SparkSession must be running.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from adapters.spark.checkpoint._hadoop_files import HadoopPath

OURS = "streamdedup"


@dataclass(frozen=True)
class Checkpoint:
    path: HadoopPath

    @classmethod
    def at(cls, location: str, spark=None) -> Checkpoint:
        """The checkpoint at ``location`` (any Hadoop URI or path), read through ``spark``'s JVM
        (default: the running SparkContext's)."""
        return cls(HadoopPath.at(location, spark))

    @property
    def ours(self) -> HadoopPath:
        return self.path / OURS

    def last_committed(self) -> int | None:
        """The id of the last micro-batch that committed, or None for a checkpoint without progress."""
        return _last_batch(self.path / "commits")

    def query_id(self) -> str | None:
        """The query's id (``metadata``), which stays the same across restarts; None before the first start."""
        try:
            return json.loads((self.path / "metadata").read_text().splitlines()[0])["id"]
        except (ValueError, OSError, IndexError, KeyError):
            return None

    def has_progress(self) -> bool:
        return self.last_planned() is not None

    def last_planned(self) -> int | None:
        """The id of the last micro-batch whose offsets were written (committed or not)."""
        return _last_batch(self.path / "offsets")

    def source_offsets(self, batch: int) -> list[str]:
        """The end offsets of ``batch``, one JSON text per source (as the query's sources wrote them)."""
        return self.offsets(batch).sources

    def offsets(self, batch: int) -> OffsetEntry:
        """``offsets/N``: what Spark fixed for micro-batch ``batch`` before running it."""
        return OffsetEntry.parse((self.path / "offsets" / str(batch)).read_text())

    def recorded_conf(self) -> dict[str, str]:
        """The SQL settings Spark recorded with the last batch and restores on restart (e.g. the state provider)."""
        batch = _last_batch(self.path / "offsets")
        if batch is None:
            return {}
        lines = (self.path / "offsets" / str(batch)).read_text().splitlines()
        return json.loads(lines[1]).get("conf", {}) if len(lines) > 1 else {}

    def watermark_ms(self) -> int:
        """The event-time watermark after the last committed batch (0 when none committed)."""
        batch = self.last_committed()
        if batch is None:
            return 0
        lines = (self.path / "commits" / str(batch)).read_text().splitlines()
        return int(json.loads(lines[1]).get("nextBatchWatermarkMs", 0)) if len(lines) > 1 else 0

    def files_read(self, source: int, up_to_log_offset: int) -> list[str]:
        """The paths a file source read in its log batches ``0..up_to_log_offset`` (compacted logs included)."""
        directory = self.path / "sources" / str(source)
        paths = []
        for entry in sorted(directory.iterdir(), key=_log_order) if directory.exists() else []:
            if entry.name.startswith("."):
                continue
            for line in entry.read_text().splitlines()[1:]:
                record = json.loads(line) if line.strip() else None
                if record and record.get("batchId", 0) <= up_to_log_offset:
                    paths.append(record["path"])
        return sorted(set(paths))

    def state_bytes(self) -> int:
        """Bytes on disk of the stateful operators' stores (``state/``)."""
        return (self.path / "state").total_bytes()

    def total_bytes(self) -> int:
        return self.path.total_bytes()


@dataclass(frozen=True)
class OffsetEntry:
    """One micro-batch's entry of Spark's offset log, the same for every run of that batch."""

    timestamp_ms: int  # batchTimestampMs: the batch's processing time, as its tasks see it
    sources: list[str]  # the end offsets, one JSON text per source

    @classmethod
    def parse(cls, text: str) -> OffsetEntry:
        """An ``offsets/N`` file's entry: its version line, its metadata, a line per source."""
        lines = text.splitlines()
        metadata = json.loads(lines[1]) if len(lines) > 1 else {}
        return cls(int(metadata.get("batchTimestampMs", 0)), [line for line in lines[2:] if line.strip()])


def _last_batch(directory: HadoopPath) -> int | None:
    ids = [int(p.name) for p in directory.iterdir() if p.name.isdigit()] if directory.exists() else []
    return max(ids, default=None)


def _log_order(path: HadoopPath) -> int:
    head = path.name.split(".")[0]
    return int(head) if head.isdigit() else -1
