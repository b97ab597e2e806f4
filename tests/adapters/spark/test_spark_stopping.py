"""A stop that interrupts a micro-batch inside ``foreachBatch`` ends the query as stopped.

Spark reads the interruption's text with a pattern that overflows the stream thread's stack
on a long text (``adapters.spark._stopping``): the query then ends with a ``StackOverflowError``
on stderr and without the status "Stopped". The interrupted batch is not committed, and a
restart writes it.
"""

from __future__ import annotations

import re
import threading
import time
import uuid

import pytest

from adapters.spark import QueryStopper, StoppedMidBatch
from tests.adapters.spark.conftest import FileRun

pytestmark = pytest.mark.spark

T = 1_700_000_000
SPARK_STOP_PATTERN = re.compile(
    r"py4j.protocol.Py4JJavaError: An error occurred while calling(?s:.)*"
    r"(java.lang.InterruptedException|java.io.InterruptedIOException|"
    r"java.nio.channels.ClosedByInterruptException)"
)
"""``StreamExecution.PROXY_ERROR`` (Spark 4.2), as Python reads it."""

LONG_INTERRUPTION = (
    "py4j.protocol.Py4JJavaError: An error occurred while calling o1.save.\n"
    ": java.lang.InterruptedException\n" + "\tat org.apache.spark.SomeClass.method(Some.scala:1)\n" * 2000
)
"""An interruption's text as deep as a Kafka write's stack with its causes (about 100 KB)."""


def events(first: int, count: int, run: str) -> list[dict]:
    return [
        {"id": f"e{i}", "uniqueValue": f"{run}-k{i}", "type": "APP", "timestamp": T + i}
        for i in range(first, first + count)
    ]


@pytest.mark.parametrize(
    "state, interruption",
    [
        ("checkpoint", "the write's own"),
        ("checkpoint", "a long one"),
        pytest.param("redis", "a long one", marks=pytest.mark.redis),
    ],
)
def test_a_stop_inside_a_micro_batch_ends_the_query_as_stopped_and_a_restart_writes_that_batch(
    files: FileRun, monkeypatch, request, state, interruption
):
    """Either judge (the operator with its state in the checkpoint, or Redis): the stop's
    translation wraps the whole ``foreachBatch`` body, judging included, and the failed write is
    not retried once the query is stopped."""
    run = uuid.uuid4().hex[:8]  # keys of this run only (Redis is the session's)
    files.add(*events(0, 5, run))
    files.add(*events(5, 5, run))
    settings = {"state": request.getfixturevalue("redis_url")} if state == "redis" else {}
    engine = files.engine(**settings)
    writer_class = type(engine.writer)
    write = writer_class.write
    in_second_batch, stopping, ended, attempts = threading.Event(), threading.Event(), [], []

    def write_after_the_stop(self, df, batch_id):
        if batch_id == 1:
            attempts.append(batch_id)
            in_second_batch.set()
            stopping.wait(120)
            time.sleep(1)  # the stop has cancelled the batch's jobs: its write fails
            if interruption == "a long one":
                raise RuntimeError(LONG_INTERRUPTION)
        write(self, df, batch_id)

    monkeypatch.setattr(writer_class, "write", write_after_the_stop)
    runner = threading.Thread(target=lambda: ended.append(engine.run(threading.Event(), available_now=False)))
    runner.start()
    assert in_second_batch.wait(180), "the second micro-batch never reached its write"
    query = next(q for q in files.spark.streams.active if q.name == f"streamdedup-{id(engine)}")
    stopping.set()
    engine.stopper.stop(query)
    runner.join(60)
    assert not runner.is_alive() and len(ended) == 1, "the engine did not return after the stop"
    assert query.exception() is None
    assert query.status["message"] == "Stopped", query.status
    assert len(attempts) == 1, "the interrupted write was retried after the stop"
    monkeypatch.undo()
    assert files.run(**settings).out_ids == sorted(f"e{i}" for i in range(10))


def test_a_failure_after_the_stop_is_a_short_text_spark_reads_as_a_stop():
    stopper = QueryStopper()

    class Query:
        def stop(self):
            pass

    with pytest.raises(ValueError), stopper.translated():
        raise ValueError(LONG_INTERRUPTION)  # before any stop: the failure itself
    stopper.stop(Query())
    with pytest.raises(StoppedMidBatch) as stopped, stopper.translated():
        raise ValueError(LONG_INTERRUPTION)
    assert SPARK_STOP_PATTERN.search(str(stopped.value)) and len(str(stopped.value)) < 300
    assert stopped.value.__suppress_context__
    with pytest.raises(StoppedMidBatch):
        stopper.sleep(30)  # a retry's wait after the stop: none
    stopper.arm()
    with pytest.raises(ValueError), stopper.translated():
        raise ValueError("a failure of the next start")
    stopper.sleep(0.01)
