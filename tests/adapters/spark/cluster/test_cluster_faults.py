"""The Spark engine on the standalone cluster while its processes are killed: an executor in
the middle of a micro-batch, a whole worker, the driver; and the broker restarted. Input on
four partitions keyed by uniqueValue (two per core), CI size; the verifier reads
``read_committed``."""

from __future__ import annotations

import pytest

from adapters.spark.runtime import connector_jars
from tests.support.faults.harness import FaultPlan, FaultRun

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.cluster, pytest.mark.slow]


@pytest.fixture(autouse=True)
def connector():
    if not connector_jars():
        pytest.skip("Spark's Kafka connector jars are missing (scripts/bootstrap --services)")


def run(plan: FaultPlan, broker, cluster, workdir, redis=None):
    report = FaultRun(plan, broker, workdir, redis=redis, cluster=cluster).run()
    print("\n".join(report.lines()))
    assert (report.lost, report.unexpected, report.dead_lost) == (0, 0, 0)
    assert report.read_dead - report.dead_duplicated == report.expected_dead > 0
    assert report.balanced and report.ok and report.last_run["exit"] == 0
    return report


def test_exactly_once_through_executor_worker_and_driver_kills_and_a_broker_restart(own_broker, own_cluster, tmp_path):
    plan = FaultPlan(
        uniques=10_000,
        per_batch=1_500,
        partitions=4,
        master=own_cluster.url,
        kills=1,
        executor_kills=1,
        worker_kills=1,
        restart_broker=True,
        seed=21,
    )
    report = run(plan, own_broker, own_cluster, tmp_path)
    assert sorted(f.split(" at ")[0] for f in report.faults) == [
        "broker kill -9 + restart",
        "executor kill -9",
        "kill -9",
        "worker kill -9",
    ]
    assert (report.duplicated, report.dead_duplicated) == (0, 0)
    assert report.read_unique == report.expected_unique > 6_000
    assert report.committed["out"] == report.expected_unique


@pytest.mark.redis
def test_at_least_once_with_redis_state_through_executor_and_driver_kills(own_broker, own_redis, own_cluster, tmp_path):
    plan = FaultPlan(
        uniques=6_000,
        per_batch=1_000,
        partitions=4,
        master=own_cluster.url,
        kills=1,
        executor_kills=1,
        restart_broker=False,
        restart_redis=True,
        delivery="at-least-once",
        seed=22,
    )
    report = run(plan, own_broker, own_cluster, tmp_path, redis=own_redis)
    assert len(report.faults) == 3
    assert report.read_unique >= report.expected_unique > 4_000
