"""The Spark engine on a standalone cluster: executors are JVMs of their own, started by the
workers in their own directories, and run the code the driver ships with the job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.adapters.spark.conftest import SESSION_MASTER

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

ROOT = Path(__file__).resolve().parents[4]

WHERE_EXECUTORS_IMPORT_FROM = """
import json, sys
from adapters.spark.runtime import build_session
# both workers' executors registered before the first task (a cold executor may start after 4 tiny tasks ran)
spark = build_session(sys.argv[1], "where-executors-import-from",
                      conf={"spark.cores.max": "2", "spark.scheduler.minRegisteredResourcesRatio": "1.0",
                            "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s"})

def origin(_):
    import os, domain, adapters.spark.stream._sources
    return [domain.__file__, adapters.spark.stream._sources.__file__, os.getcwd(), os.getpid()]

print(json.dumps(spark.sparkContext.parallelize(range(4), 4).map(origin).collect()))
import adapters.spark._engine
from adapters.spark.runtime import local_class_archive
jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
mapped = str(local_class_archive()) in open(f"/proc/{jvm}/maps").read()
print(json.dumps([adapters.spark._engine.__file__, mapped]))
spark.stop()
"""


def test_executors_run_the_code_the_driver_ships_not_the_working_tree(spark_cluster, tmp_path):
    driver = subprocess.run(
        [sys.executable, "-c", WHERE_EXECUTORS_IMPORT_FROM, spark_cluster.url],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert driver.returncode == 0, driver.stderr[-3000:]
    executors, driver_side = (json.loads(line) for line in driver.stdout.splitlines()[-2:])
    for domain_file, sources_file, cwd, _pid in executors:
        assert "streamdedup-code-" in domain_file and domain_file.endswith(".zip/domain/__init__.py")
        assert "streamdedup-code-" in sources_file
        assert not cwd.startswith(str(ROOT)) and cwd != str(tmp_path)
    if "DEDUP_TEST_SPARK_MASTER" not in os.environ:  # both workers' executors took tasks
        assert len({cwd for _, _, cwd, _ in executors}) == 2
    # the driver itself keeps importing its own files (the JVM sources beside them are found)
    assert driver_side[0] == str(ROOT / "src" / "adapters" / "spark" / "_engine.py")
    # and a cluster's driver maps the class-data archive bootstrap wrote, as a local one does
    assert driver_side[1] is True


def in_a_session_on(cluster, kafka_bootstrap: str, *tests: str) -> subprocess.CompletedProcess:
    """Spark tests of tests/adapters/spark run by pytest in a process of their own, whose session's SparkSession
    runs on ``cluster`` (``DEDUP_TEST_SESSION_MASTER``) and whose Kafka tests use this session's broker
    (``DEDUP_TEST_KAFKA``) rather than start one of their own."""
    env = {**os.environ, SESSION_MASTER: cluster.url, "DEDUP_TEST_KAFKA": kafka_bootstrap}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=0", *tests],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


EXECUTOR_WRITES = (
    "a_replayed_micro_batch_is_not_produced_twice",
    "a_restart_spelling_the_checkpoint_otherwise",
    "at_least_once_produces_a_replayed_micro_batch_again",
    "aborted_upstream_transaction",
    "at_least_once_writes_every_unique_event",
    "a_write_retried_after_its_records_were_sent",
)
THROUGH_BOTH_WRITERS = 3  # of those, the tests run through foreachBatch and the JVM sink (test_spark_eos's ``sink``)


def test_the_golden_scenarios_and_the_exactly_once_tests_on_the_cluster(spark_cluster, kafka_bootstrap):
    """Every golden scenario (in one stream, each under types of its own), the invalid records, and
    the tests of tests/adapters/spark/output/test_spark_eos.py whose outputs the executors write, in one session
    on the cluster: every output partition's transaction is written by a task on an executor of its
    own (issue 19). The file's other tests (the driver's checks and its notification topic) run on
    ``local[2]`` only."""
    run = in_a_session_on(
        spark_cluster,
        kafka_bootstrap,
        "tests/adapters/spark/test_spark_engine.py::test_every_scenario_in_one_stream",
        "tests/adapters/spark/test_spark_engine.py::test_invalid_records_are_dead_lettered_with_their_bytes_and_reason",
        "tests/adapters/spark/output/test_spark_eos.py",
        "-k",
        " or ".join(["every_scenario_in_one_stream", "invalid_records_are_dead_lettered", *EXECUTOR_WRITES]),
    )
    summary = run.stdout.strip().splitlines()[-1]
    print(run.stdout[run.stdout.find("slowest") :])  # the durations on the cluster (pytest -s shows them)
    assert run.returncode == 0, run.stdout[-4000:]
    passed = int(summary.split(" passed")[0].split()[-1])
    # none skipped for want of the connector
    assert passed == 2 + len(EXECUTOR_WRITES) + THROUGH_BOTH_WRITERS and "skipped" not in summary, summary
