"""Kills placed at the phases of a micro-batch on the tests' standalone cluster (issues 29 and 52): the
output and dead letters of the run equal the reference exactly. CI strikes one run three times: an
executor killed at an unplaced moment of the first micro-batch's operator stage, a worker killed
mid-write in the second, the driver killed after a partition's write committed in the third (the
executor halted at each writer phase is in test_cluster_eos_writer_faults.py, in one run with the
others); ``python -m tests.support.faults.phases --runs N [--fresh] [--shape backlog] [--delivery ...]`` runs
every target at every phase, one kill a run, many times."""

from __future__ import annotations

import pytest

from adapters.spark.runtime import connector_jars
from tests.support.faults.phases import Kill, PhaseRun, stream

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.cluster, pytest.mark.slow]

KILLS = [
    Kill("worker", "mid-write", batch=1, partition=1),
    Kill("driver", "after-write", batch=2, partition=1),
    Kill("executor", "shuffle", batch=0),
]


def test_a_kill_at_any_phase_of_a_batch_changes_no_verdict(own_cluster, kafka_bootstrap, tmp_path):
    if not connector_jars():
        pytest.skip("Spark's Kafka connector jars are missing (scripts/bootstrap --services)")
    runs = PhaseRun(own_cluster, kafka_bootstrap, tmp_path, stream(uniques=2_000), per_batch=700)
    outcome = runs.run(KILLS, "session")
    print("\n".join([outcome.HEADER, outcome.row()]))
    assert outcome.ok, outcome.row()
