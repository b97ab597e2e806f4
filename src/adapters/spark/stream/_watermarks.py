"""The Spark engine's watermarks: the domain's per-partition ones (``domain._watermarks``), kept
by the driver and handed to every micro-batch.

Spark's own watermark is one per query: the highest event time of any type in any
partition, kept in the checkpoint. It made one far-future record, or one partition read
ahead of the others, declare everything else late. The engine does not use it. Instead:

* Before micro-batch N runs, ``prepare(N)`` puts into the operator's ``RuleHorizons`` what
  N is judged against (each rule's watermark, each rule and partition's newest time, from
  batches before N) and first writes it to the checkpoint (``streamdedup/watermarks/N.json``),
  so a replay of N is judged against the same values whatever the wall clock says. The table
  is kept under N's timestamp in Spark's offset log, which every task of N reads from its
  ``GroupState``: a task of N recomputed at any moment (a lost executor's partitions, a
  resubmitted stage, a retried write) takes N's table, never a later one.
* While N runs, the operator collects the newest time it judged per rule and partition
  (``NewestTimes``; with Redis state the judge computes them); ``advance(N)`` folds them in
  after N's output is written and records the result in the same file.
* A restart resumes from the newest file. The partitions a Kafka source reads come from
  the batch's offsets in the checkpoint; every file of a directory source is one partition.

The files are read and written through Hadoop's file systems, wherever the checkpoint is,
each in one call into the JVM (``checkpoint.BatchFiles``) on the micro-batch's critical path: a
batch costs one read (its offsets entry), two writes (its table before, the watermarks after)
and the deletion of the file ``KEPT_FILES`` batches back; the directory is listed once per
start, and a batch's file is read only when it was there at that start (a replay).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from adapters.spark.checkpoint import DIRECTORY, BatchFiles, Checkpoint, OffsetEntry
from adapters.spark.checkpoint import restored as _restore
from domain import Watermarks

KEPT_FILES = 10


@dataclass
class BatchWatermarks:
    marks: Watermarks
    horizons: Any  # the JVM RuleHorizons the operator reads
    newest: Any  # the JVM NewestTimes accumulator the operator fills
    checkpoint: Checkpoint
    batch_files: BatchFiles  # the batch's offsets entry and watermark file, one JVM call each
    topic: str | None = None  # the Kafka topic whose partitions hold the watermarks back
    used: dict = field(default_factory=dict)  # the batch's table, as judged (rule → watermark, (rule, lane) → newest)
    files: set[int] | None = None  # the batch ids whose files are in the checkpoint (listed once, then kept)
    document: tuple[int, dict] | None = None  # the last batch's file as written by ``prepare``

    @classmethod
    def open(cls, spark, checkpoint: str, idle_timeout: float, topic: str | None = None) -> BatchWatermarks:
        package = spark._jvm.streamdedup.stream
        newest = package.NewestTimes()
        spark.sparkContext._jsc.sc().register(newest, "streamdedup.newest_times")
        location = Checkpoint.at(checkpoint, spark)
        marks = _restore(location, idle_timeout)
        return cls(marks, package.RuleHorizons(), newest, location, BatchFiles(spark, checkpoint), topic)

    def prepare(self, batch_id: int) -> None:
        """Set what micro-batch ``batch_id`` is judged against (the same on a replay)."""
        entry = self.batch_files.offsets(batch_id)
        saved = self._read(batch_id) if batch_id in self._files() else None
        if saved is not None and "use" in saved:
            watermarks, newest = saved["use"]["watermarks"], saved["use"]["newest"]
        else:
            partitions = self._partitions(entry)
            if partitions is not None:
                self.marks.expect(partitions, time.time())
            table = self.marks.table(time.time())
            watermarks, newest = table[0], [[rule, lane, t] for (rule, lane), t in table[1].items()]
            saved = {"use": {"watermarks": watermarks, "newest": newest}}
            self._write(batch_id, saved)
        self.document = (batch_id, saved)
        self.used = {
            "watermarks": watermarks,
            "newest": {(rule, lane): t for rule, lane, t in newest},
            "now": entry.timestamp_ms / 1000,
        }  # the batch's clock (domain._watermarks.clock_bound)
        lines = [f"{rule}\t{mark}" for rule, mark in watermarks.items()]
        lines += [f"{rule}\t{lane}\t{t}" for rule, lane, t in newest]
        self.horizons.load(entry.timestamp_ms, "\n".join(lines))
        self.newest.reset()

    def highest(self) -> int | None:
        """The highest rule watermark (what a migration's old state is retired by)."""
        return max(self.marks.table(time.time())[0].values(), default=None)

    def advance(self, batch_id: int, newest: list[tuple[str, str, int]] | None = None) -> None:
        """Fold in the newest times batch ``batch_id`` judged (default: what the operator collected)."""
        if newest is None:
            newest = [
                (rule, lane, int(t))
                for rule, lane, t in (line.split("\t") for line in self.newest.value().splitlines() if line)
            ]
        now = time.time()
        for rule, lane, t in newest:
            self.marks.observe(rule, lane, t, now)
        if self.document is not None and self.document[0] == batch_id:
            saved = self.document[1]
        else:
            saved = self._read(batch_id) or {}
        self._write(batch_id, {**saved, "after": self.marks.to_document()})
        self._forget_before(batch_id - KEPT_FILES)

    def _partitions(self, entry: OffsetEntry) -> list[str] | None:
        if self.topic is None:
            return None
        try:
            offsets = [json.loads(line) for line in entry.sources]
        except ValueError:
            return None
        return [
            f"{self.topic}:{p}" for source in offsets if isinstance(source, dict) for p in source.get(self.topic, {})
        ] or None

    def _read(self, batch_id: int) -> dict | None:
        return self.batch_files.read(batch_id)

    def _files(self) -> set[int]:
        """The batch ids with a file: the directory is listed once, then this instance keeps the
        set (it alone writes there while it holds the checkpoint's lease)."""
        if self.files is None:
            directory = self.checkpoint.ours / DIRECTORY
            self.files = {int(p.stem) for p in directory.glob("*.json") if p.stem.isdigit()}
            if not self.files:
                directory.mkdir(parents=True, exist_ok=True)
        return self.files

    def _write(self, batch_id: int, document: dict) -> None:
        files = self._files()
        self.batch_files.write(batch_id, document)
        files.add(batch_id)

    def _forget_before(self, batch_id: int) -> None:
        files = self._files()
        for old in sorted(b for b in files if b < batch_id):
            self.batch_files.delete(old)
            files.discard(old)
