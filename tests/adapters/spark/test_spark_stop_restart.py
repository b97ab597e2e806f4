"""Stopping ``dedup run --engine spark`` mid-stream, gracefully or with kill -9, and restarting.

The input is a JSONL directory that keeps receiving files (one micro-batch each). The
reference outcome is the in-memory core's over the same records in the same order
(``tests.support.streams.reference``).
Nothing may be lost; what the sink committed is never emitted twice (a replayed micro-batch
replaces its own part files). A stop takes about as long as the running micro-batch: an idle
Kafka job stops within seconds.
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter

import pytest

from adapters.spark.runtime import connector_jars
from app import StreamSpec, generate, generate_parts
from domain import dead_letters
from tests.adapters.spark.processes import DedupProcess, FileFeed, wait_gone
from tests.support.kafka_io import create_topics, produce, unique
from tests.support.streams import reference

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1200)]

COUNTS = ("in", "out", "duplicates", "dead_lettered", "late", "invalid", "passed_through", "skipped")


@pytest.fixture
def stream(tmp_path):
    parts, expected = generate_parts(StreamSpec(uniques=1500, seed=21), 10)
    return FileFeed(tmp_path / "in", parts), expected, DedupProcess(tmp_path)


def assert_exactly_the_reference(feed: FileFeed, dedup: DedupProcess) -> None:
    """Every emission committed once (none lost, none twice), every dead letter once."""
    want = reference([r for part in feed.parts for r in part])
    assert Counter(dedup.committed("out")) == Counter(want.emitted)
    dead = [dead_letters.from_document(json.loads(line)).record.value for line in dedup.committed("dlq")]
    assert Counter(dead) == Counter(want.dead_letters)


def test_a_stop_request_finishes_the_batch_reports_and_a_restart_continues(stream):
    """SIGTERM stops the job mid-backlog, a restart continues, Ctrl-C stops that one mid-backlog too,
    and a last, bounded run drains the rest: each stop finishes its running micro-batch and reports."""
    feed, expected, dedup = stream
    feed.add(2)
    dedup.start(bounded=False)
    dedup.wait_for_counter("records_in", feed.records_written())
    # idle: the query keeps reporting, so /health sees progress although no record arrives
    time.sleep(4)
    code, health = dedup.health()
    assert code == 200 and health["last_progress_seconds_ago"] < 3, health
    summaries = []
    for stop, backlog in ((lambda: dedup.signal(signal.SIGTERM), 4), (dedup.interrupt, 4)):
        before = feed.records_written()
        feed.add(backlog)  # a backlog of micro-batches; stop once the first of them completed
        dedup.wait_for_counter("records_in", (before if not summaries else 0) + 1)
        stop()
        assert dedup.wait() == 0, dedup.output()[-3000:]
        summaries.append(dedup.summary())
        assert "dedup: in=" in dedup.output()
        assert 0 < sum(s["in"] for s in summaries) < feed.records_written() - len(feed.parts[feed.written - 1]), (
            "the backlog was drained before the stop"
        )
        if len(summaries) == 1:
            dedup.start(bounded=False)

    feed.rest()
    dedup.start(bounded=True)
    assert dedup.wait() == 0, dedup.output()[-3000:]
    summaries.append(dedup.summary())
    assert {k: sum(s[k] for s in summaries) for k in COUNTS} == {k: expected.as_accounting()[k] for k in COUNTS}
    assert_exactly_the_reference(feed, dedup)


@pytest.mark.kafka
@pytest.mark.parametrize("how", ["SIGTERM to the process group", "Ctrl-C"])
def test_an_idle_kafka_job_stops_within_seconds_and_reports(kafka_bootstrap, tmp_path, how):
    """Ctrl-C signals the terminal's process group, and so does a service manager's stop (systemd,
    ``kill -- -PGID``): the driver and the JVM it started alike."""
    if not connector_jars():
        pytest.skip("Spark's Kafka connector jars are not in .cache/jars/spark-kafka (scripts/bootstrap --services)")
    topics = {role: unique(f"stop-{role}") for role in ("source", "sink", "dlq")}
    create_topics(kafka_bootstrap, *topics.values())
    records, _ = generate(StreamSpec(uniques=200, seed=5))
    produce(kafka_bootstrap, topics["source"], records)
    dedup = DedupProcess(tmp_path, uris={role: f"kafka://{kafka_bootstrap}/{topic}" for role, topic in topics.items()})
    dedup.start(bounded=False)
    dedup.wait_for_counter("records_in", len(records))
    # idle: no micro-batch runs; Spark reports the idle query every second (the test's interval)
    time.sleep(4)
    stopped = time.monotonic()
    dedup.interrupt(signal.SIGTERM if how.startswith("SIGTERM") else signal.SIGINT)
    assert dedup.wait(120) == 0, dedup.output()[-3000:]
    assert time.monotonic() - stopped <= 8, dedup.output()[-3000:]
    assert f"dedup: in={len(records)}," in dedup.output()
    assert dedup.summary()["in"] == len(records)


def test_kill_9_of_the_driver_mid_stream_loses_nothing(stream):
    feed, expected, dedup = stream
    feed.add(1)
    dedup.start(bounded=False)
    dedup.wait_for_counter("records_in", feed.records_written())
    feed.add(3)
    dedup.wait_for_counter("records_in", len(feed.parts[0]) + len(feed.parts[1]))
    time.sleep(1.0)  # into the next micro-batch
    jvm = dedup.signal(signal.SIGKILL)
    assert dedup.wait() == -signal.SIGKILL
    wait_gone(jvm)

    feed.rest()
    dedup.start(bounded=True)
    assert dedup.wait() == 0, dedup.output()[-3000:]
    second = dedup.summary()
    assert 0 < second["in"] < expected.records  # the restart did not start over
    assert_exactly_the_reference(feed, dedup)
