"""The Spark engine, exactly-once, while its driver is killed and the broker restarted.

CI size (about 17,400 and 11,600 records); ``bench/eos_faults.py`` runs the same harness at full size.
"""

from __future__ import annotations

import pytest

from adapters.spark.session import kafka_jars
from tests.faults.harness import FaultPlan, FaultRun

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]


def test_every_unique_event_exactly_once_through_kills_and_a_broker_restart(own_broker, tmp_path):
    if not kafka_jars():
        pytest.skip("Spark's Kafka connector jars are missing (scripts/bootstrap --services)")
    report = FaultRun(FaultPlan(uniques=12_000, per_batch=2_000, kills=3, restart_broker=True), own_broker,
                      tmp_path).run()
    print("\n".join(report.lines()))
    assert len(report.faults) == 4
    assert (report.lost, report.duplicated, report.unexpected) == (0, 0, 0)
    assert (report.dead_lost, report.dead_duplicated) == (0, 0)
    assert report.read_unique == report.expected_unique > 8_000
    assert report.read_dead == report.expected_dead > 0
    assert report.balanced and report.committed["out"] == report.expected_unique
    assert report.last_run["exit"] == 0


def test_with_redis_state_through_kills_a_broker_restart_and_a_redis_restart(own_broker, own_redis, tmp_path):
    if not kafka_jars():
        pytest.skip("Spark's Kafka connector jars are missing (scripts/bootstrap --services)")
    plan = FaultPlan(uniques=8_000, per_batch=1_000, kills=3, restart_broker=True, restart_redis=True, seed=12)
    report = FaultRun(plan, own_broker, tmp_path, redis=own_redis).run()
    print("\n".join(report.lines()))
    assert len(report.faults) == 5 and any("redis" in f for f in report.faults)
    assert (report.lost, report.duplicated, report.unexpected) == (0, 0, 0)
    assert (report.dead_lost, report.dead_duplicated) == (0, 0)
    assert report.read_unique == report.expected_unique > 5_000
    assert report.balanced and report.read_dead == report.expected_dead > 0
