"""A micro-batch that Spark computes again gives the verdicts of its first computation.

Spark recomputes a batch's stateful stage whenever its result is read again uncached: a lost
executor's partitions, a resubmitted stage, a retried write. The driver moves on between
batches (the next batch's horizons are loaded before it runs), so a recomputation that took
whatever the driver held last judged honest events ``late`` (issue 29). Here a writer reads
each batch again after the driver has loaded another batch's horizons — far in the future,
so a task that took them would find every event late — and the verdicts must not move: with
the operator's state in the checkpoint, and with Redis as the state (where the batch is
cached, so the writer drops the cache first: the claims are made again, and their owners
make Redis grant what it granted before).
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
import redis
from pyspark.sql import functions as F

pytestmark = pytest.mark.spark

T = 1_700_000_000
FUTURE = "APP\t9999999999\nWEB\t9999999999\n" + "".join(f"{rule}\tfiles\t9999999999\n" for rule in ("APP", "WEB"))


class RecomputingWriter:
    """The engine's writer, after which the batch is read again twice: once as it is, once after
    the driver loaded the horizons of another micro-batch (as if the next batch had started)."""

    def __init__(self, inner, engine):
        self.inner, self.engine = inner, engine
        self.reads, self.kafka, self.routed = 1, inner.kafka, inner.routed  # uncached: every read recomputes
        self.verdicts: list[tuple[Counter, Counter]] = []

    def in_stream(self, judged):
        return self.inner.in_stream(judged)

    def sink_options(self):
        return None  # every batch through ``write``, which reads it again

    def open(self, spark) -> None:
        self.inner.open(spark)

    def write(self, batch, batch_id: int) -> None:
        self.inner.write(batch, batch_id)
        first = verdicts(batch.unpersist(blocking=True))
        marks = self.engine.watermarks  # the driver moves on to another batch's table
        marks.horizons.load(10**13 + batch_id, FUTURE)  # a batch of year 2286: its horizons are not clock-bound
        marks.used = {"watermarks": {"APP": 9_999_999_999, "WEB": 9_999_999_999}, "newest": {}}
        self.verdicts.append((first, verdicts(batch)))

    def close(self) -> None:
        self.inner.close()


def verdicts(batch) -> Counter:
    return Counter(
        {
            (row["verdict"], row["reason"]): row["n"]
            for row in batch.groupBy("verdict", "reason").agg(F.count("*").alias("n")).collect()
        }
    )


def event(i: int, key: str, t: int, kind: str = "APP") -> dict:
    return {"id": f"e{i}", "uniqueValue": key, "type": kind, "timestamp": t}


@pytest.mark.parametrize("state", ["checkpoint", "redis"])
def test_a_batch_recomputed_after_the_driver_moved_on_is_judged_as_it_was_first(files, state, request):
    # 1. three batches in event-time order, each with repeats inside the window
    files.add(event(0, "a", T), event(1, "b", T + 1), event(2, "a", T + 2))
    files.add(event(3, "c", T + 10), event(4, "b", T + 11), event(5, "w", T + 12, "WEB"))
    files.add(event(6, "d", T + 20), event(7, "w", T + 21, "WEB"), event(8, "c", T + 22))
    if state == "redis":
        redis_url = request.getfixturevalue("redis_url")
        state = f"{redis_url.rsplit('/', 1)[0]}/14"  # a database of this test's own
        redis.Redis.from_url(state).flushdb()
    engine = files.engine(state=state)
    writer = engine.writer = RecomputingWriter(engine.writer, engine)
    engine.run(available_now=True)
    # 2. every recomputation agreed with the first computation, which judged nothing late
    assert len(writer.verdicts) == 3
    for first, again in writer.verdicts:
        assert again == first
    first = sum((first for first, _ in writer.verdicts), Counter())
    assert first == Counter({("emit", None): 5, ("duplicate", None): 4})
    # 3. the output is the reference's: a, b, c, w and d once each
    out = [
        json.loads(line)["id"]
        for part in sorted((files.dir / "out").glob("batch=*/part-*"))
        for line in part.read_text().splitlines()
    ]
    assert sorted(out) == ["e0", "e1", "e3", "e5", "e6"]
