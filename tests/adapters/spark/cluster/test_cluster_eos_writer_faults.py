"""Exactly-once output on the standalone cluster through the deaths that matter to its transactions
(issue 19): an executor JVM halted right after its task's transaction committed, before Spark heard of
it; another halted mid-transaction, its records sent; the driver killed -9 while one partition of a
batch is still in its transaction and the others have committed; and, after the restart, an executor
halted as its task starts, before the operator judged a row (the phase test's executor kill). The
writer's own test faults (``spark.streamdedup.test.writerFault``, ``Faults.java``) strike at those
exact moments; the executors and the driver are real processes that die."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from adapters.spark.output import FAULT_SETTING
from adapters.spark.runtime import connector_jars
from app import StreamSpec, generate
from tests.adapters.spark.eos_output import committed, dead_letter_values, markers
from tests.support.faults.harness import Topics, engine_process
from tests.support.kafka_io import create_topics, unique
from tests.support.partitioned import produce_keyed, spread
from tests.support.spark_jvm import with_test_jvm
from tests.support.streams import reference

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.cluster, pytest.mark.slow]

PARTITIONS = 4


def executor_logs(cluster, leaving_out: frozenset = frozenset()) -> dict:
    """Each executor's stderr on the cluster's workers (``work/APP/N/stderr``), but those of ``leaving_out``."""
    return {
        path: path.read_text(errors="replace")
        for worker in cluster.workers
        for path in (worker.workdir / "work").glob("*/*/stderr")
        if path not in leaving_out
    }


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(1)
    raise AssertionError(f"not within {timeout:g}s: {what}")


def test_executor_deaths_around_commits_and_a_driver_kill_mid_batch_write_each_partition_once(
    own_cluster, kafka_bootstrap, tmp_path
):
    if not connector_jars():
        pytest.skip("Spark's Kafka connector jars are missing (scripts/bootstrap --services)")
    records, _ = generate(StreamSpec(uniques=3000, seed=23, late=0))
    topics = Topics(kafka_bootstrap, *(unique(f"cluster-eos-{role}") for role in ("in", "out", "dlq")))
    produce_keyed(kafka_bootstrap, topics.input, spread(records, PARTITIONS))
    create_topics(kafka_bootstrap, topics.output, topics.dead_letters)
    earlier = frozenset(executor_logs(own_cluster))  # executors of the applications before this test

    def engine(faults: str | None):
        process = engine_process(
            topics, tmp_path, per_batch=1000, delivery="exactly-once", bounded=True, master=own_cluster.url
        )
        conf = {"spark.sql.shuffle.partitions": str(PARTITIONS), **({FAULT_SETTING: faults} if faults else {})}
        process.env.update(DEDUP_SPARK__CONF=with_test_jvm(conf))
        process.start()
        return process

    # 1. batch 1: partition 0's executor halts after its commit, partition 1's mid-transaction;
    #    batch 2: partition 2 stalls in its transaction while the others commit, and the driver is killed
    first = engine("halt-after-commit:1:0,halt-before-commit:1:1,stall-before-commit:2:2")
    tid = wait_for(
        lambda: (
            (tmp_path / "checkpoint" / "streamdedup" / "identity").exists()
            and json.loads((tmp_path / "checkpoint" / "streamdedup" / "identity").read_text())["transactional_id"]
        ),
        180,
        "the checkpoint's identity",
    )
    others = {(2, p) for p in range(PARTITIONS) if p != 2}
    wait_for(
        lambda: others <= set(markers(kafka_bootstrap, topics.output, tid)),
        300,
        f"batch 2's partitions other than 2 committed (engine log: {first.log})",
    )
    # a worker copies its executor's stderr to the file as it comes: the stall's line may trail the commits
    wait_for(
        lambda: "task stalls before-commit" in "".join(executor_logs(own_cluster, earlier).values()),
        60,
        "the stalled task's line in its executor's log",
    )
    assert first.alive()
    first.kill9()
    first.proc.wait(30)
    found = markers(kafka_bootstrap, topics.output, tid)
    assert (2, 2) not in found and {(1, p) for p in range(PARTITIONS)} <= set(found)
    logs = "".join(executor_logs(own_cluster, earlier).values())
    assert "halting the JVM after-commit" in logs and "halting the JVM before-commit" in logs
    assert "task stalls before-commit" in logs
    # the stalled transaction is open: its records are on the topic, hidden from read_committed readers
    uncommitted = committed(kafka_bootstrap, topics.output, only_committed=False)
    assert sum(uncommitted.values()) > sum(committed(kafka_bootstrap, topics.output).values())

    # 2. the restart fences the open transaction, replays batch 2 and writes only partition 2;
    #    batch 3: partition 0's executor halts as its task starts
    restarted = frozenset(executor_logs(own_cluster))
    second = engine("halt-at-start:3:0")
    assert second.proc.wait(300) == 0, second.log.read_text()[-3000:]
    assert "halting the JVM at-start" in "".join(executor_logs(own_cluster, restarted).values())
    want = reference(records)
    assert committed(kafka_bootstrap, topics.output) == Counter(want.emitted)
    assert dead_letter_values(kafka_bootstrap, topics.dead_letters) == Counter(want.dead_letters)
    after = markers(kafka_bootstrap, topics.output, tid)
    assert set(after.values()) == {1} and {(b, p) for b in (1, 2, 3) for p in range(PARTITIONS)} <= set(after)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["in"] == summary["out"] + summary["duplicates"] + summary["dead_lettered"] + summary["skipped"]
