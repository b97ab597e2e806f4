"""The Spark standalone cluster of the tests: a master and two workers of one core each
(``deploy/local/services/spark_cluster.py``), started at the first test that asks for it and
stopped when the session ends. ``DEDUP_TEST_SPARK_MASTER`` (``spark://HOST:PORT``) points the
tests at a running cluster instead; the tests that kill its processes are then skipped."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

from deploy.local.services.spark_cluster import SparkCluster
from tests.support.fixtures import running

pytest.importorskip("pyspark")


@dataclass(frozen=True)
class ExistingCluster:
    url: str


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    if os.environ.get("DEDUP_TEST_SPARK_MASTER"):
        yield ExistingCluster(os.environ["DEDUP_TEST_SPARK_MASTER"])
        return
    with running(SparkCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2, cores=1), timeout=90) as cluster:
        yield cluster


@pytest.fixture
def own_cluster(spark_cluster):
    """The session's cluster, for a test that kills its processes (skipped on a cluster not started here);
    after the test every worker runs again and no application holds it."""
    if isinstance(spark_cluster, ExistingCluster):
        pytest.skip("DEDUP_TEST_SPARK_MASTER: a cluster not started by the tests is not killed by them")
    yield spark_cluster
    for worker in spark_cluster.workers:
        worker.start()
    spark_cluster.wait_idle()
