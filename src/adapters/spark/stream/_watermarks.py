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

The bookkeeping is JVM code (``streamdedup.stream.BatchWatermarkFiles``, the domain's
watermarks in ``streamdedup.stream.Watermarks``, held to ``domain._watermarks`` by a parity
test): each of ``prepare`` and ``advance`` is one call from the Python driver. The files are read
and written through Hadoop's file systems, wherever the checkpoint is: a batch costs one read
(its offsets entry), two writes (its table before, the watermarks after) and the deletion of the
file ``KEPT_FILES`` batches back; the directory is listed once per start, and a batch's file is
read only when it was there at that start (a replay).
"""

from __future__ import annotations

from typing import Any

from adapters.spark.checkpoint import translated
from domain import Metrics, publish_table

KEPT_FILES = 10  # streamdedup.stream.BatchWatermarkFiles.KEPT_FILES


class BatchWatermarks:
    """The driver's watermarks of one query run: ``prepare`` and ``advance`` each micro-batch."""

    def __init__(self, files: Any, horizons: Any, newest: Any, location: str):
        self.files = files  # the JVM BatchWatermarkFiles
        self.horizons = horizons  # the JVM RuleHorizons the operator reads
        self.newest = newest  # the JVM NewestTimes accumulator the operator fills
        self.location = location
        self._table = ""  # the last batch's table, as prepared (RuleHorizons' lines)
        self._used: dict | None = None
        self._after = ""  # the table after the last batch, as ``advance`` returned it

    @classmethod
    def open(cls, spark, checkpoint: str, idle_timeout: float, topic: str | None = None) -> BatchWatermarks:
        package = spark._jvm.streamdedup.stream
        newest = package.NewestTimes()
        spark.sparkContext._jsc.sc().register(newest, "streamdedup.newest_times")
        horizons = package.RuleHorizons()
        with translated(checkpoint):
            files = package.BatchWatermarkFiles(
                checkpoint, spark.sparkContext._jsc.hadoopConfiguration(), float(idle_timeout), topic, horizons, newest
            )
        return cls(files, horizons, newest, checkpoint)

    def prepare(self, batch_id: int) -> None:
        """Set what micro-batch ``batch_id`` is judged against (the same on a replay)."""
        with translated(f"{self.location}: batch {batch_id}"):
            self._table, self._used = self.files.prepare(batch_id), None

    @property
    def used(self) -> dict:
        """The last batch's table, as judged: ``watermarks`` (rule → watermark), ``newest``
        ((rule, lane) → newest time) and ``now``, the batch's clock (``domain._watermarks.clock_bound``)."""
        if self._used is None:
            watermarks, newest = _parsed(self._table)
            self._used = {"watermarks": watermarks, "newest": newest, "now": self.files.timestampMs() / 1000}
        return self._used

    @used.setter
    def used(self, table: dict) -> None:
        self._used = table

    def highest(self) -> int | None:
        """The highest rule watermark (what a migration's old state is retired by)."""
        return max(_parsed(self.files.table())[0].values(), default=None)

    def advance(self, batch_id: int, newest: list[tuple[str, str, int]] | None = None) -> None:
        """Fold in the newest times batch ``batch_id`` judged (default: what the operator collected)."""
        judged = None if newest is None else "".join(f"{rule}\t{lane}\t{t}\n" for rule, lane, t in newest)
        with translated(f"{self.location}: batch {batch_id}"):
            self._after = self.files.advance(batch_id, judged)

    def publish(self, metrics: Metrics) -> None:
        """The watermarks after the last batch as gauges (``domain.publish_table``)."""
        publish_table(metrics, *_parsed(self._after))

    def publish_now(self, metrics: Metrics) -> None:
        """The watermarks as they are as gauges (a batch advanced them in the JVM: the JVM sink)."""
        publish_table(metrics, *_parsed(self.files.table()))


def _parsed(table: str) -> tuple[dict[str, int], dict[tuple[str, str], int]]:
    """RuleHorizons' lines (``rule \t watermark``, ``rule \t partition \t newest``) as a table."""
    watermarks: dict[str, int] = {}
    newest: dict[tuple[str, str], int] = {}
    for line in table.splitlines():
        fields = line.split("\t")
        if len(fields) == 2:
            watermarks[fields[0]] = int(fields[1])
        elif len(fields) == 3:
            newest[(fields[0], fields[1])] = int(fields[2])
    return watermarks, newest
