"""A listener's events read as JSON (``adapters.spark.metrics._events``) are the events
PySpark's own wrapper builds field by field."""

from __future__ import annotations

import json
import time

import pytest
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQueryListener

from adapters.spark.metrics import JsonEventListener

pytestmark = pytest.mark.spark


class Kept:
    def __init__(self):
        self.started, self.progress, self.terminated = [], [], []

    def onQueryStarted(self, event):
        self.started.append(event)

    def onQueryProgress(self, event):
        self.progress.append(event.progress)

    def onQueryIdle(self, event):
        pass

    def onQueryTerminated(self, event):
        self.terminated.append(event)


class PySparks(Kept, StreamingQueryListener):
    pass


class Ours(Kept, JsonEventListener):
    pass


def offset(text):
    """A source offset as JSON (PySpark's own wrapper writes a missing one as ``None``)."""
    return None if text in (None, "None", "null") else json.loads(text)


def described(p) -> dict:
    state = p.stateOperators[0]
    return {
        "id": p.id,
        "runId": p.runId,
        "name": p.name,
        "timestamp": p.timestamp,
        "batchId": p.batchId,
        "numInputRows": p.numInputRows,
        "durationMs": p.durationMs,
        "eventTime": p.eventTime,
        "state": (state.operatorName, state.numRowsTotal, state.numRowsUpdated, state.customMetrics),
        "sources": [
            (
                s.description,
                offset(s.startOffset),
                offset(s.endOffset),
                offset(s.latestOffset),
                s.numInputRows,
                s.metrics,
            )
            for s in p.sources
        ],
        "sink": p.sink.description,
        "observed": {k: row.asDict() for k, row in p.observedMetrics.items()},
    }


def test_progress_read_as_json_is_what_pyspark_reads_field_by_field(spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    for i in range(3):
        (source / f"{i}.txt").write_text(f"a{i}\nb\nb\n")
    theirs, ours = PySparks(), Ours()
    spark.streams.addListener(theirs)
    spark.streams.addListener(ours)
    try:
        counted = (
            spark.readStream.option("maxFilesPerTrigger", 1)
            .text(str(source))
            .observe("seen", F.count(F.lit(1)).alias("rows"), F.sum(F.length("value")).alias("chars"))
            .groupBy("value")
            .count()
        )
        query = (
            counted.writeStream.outputMode("update")
            .format("noop")
            .trigger(availableNow=True)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .start()
        )
        query.awaitTermination(120)
        # the listener bus delivers asynchronously (PySpark's wrapper through py4j callbacks): wait for both
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (len(theirs.terminated) == len(ours.terminated) == 1):
            time.sleep(0.1)
    finally:
        spark.streams.removeListener(theirs)
        spark.streams.removeListener(ours)
    assert len(ours.progress) == len(theirs.progress) == 3
    assert [described(p) for p in ours.progress] == [described(p) for p in theirs.progress]
    assert [p.observedMetrics["seen"]["rows"] for p in ours.progress] == [3, 3, 3]
    assert [(e.id, e.runId, e.name) for e in ours.started] == [(e.id, e.runId, e.name) for e in theirs.started]
    assert [(e.id, e.runId, e.exception) for e in ours.terminated] == [
        (e.id, e.runId, e.exception) for e in theirs.terminated
    ]
