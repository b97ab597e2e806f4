import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.spark_jvm import with_test_jvm  # noqa: E402

os.environ.setdefault("DEDUP_SPARK__CONF", with_test_jvm({}))  # every dedup process a test starts

from tests.support.fixtures import (  # noqa: E402,F401
    hdfs,
    hdfs_uri,
    kafka_bootstrap,
    kafka_broker,
    own_broker,
    own_redis,
    prometheus,
    redis_server,
    redis_url,
)

TESTS = Path(__file__).resolve().parent


def run_group(path: Path) -> int:
    """Where a test file runs in the suite: 0 the Spark standalone cluster's tests, first, before
    this process starts a SparkSession of its own; 2 the tests of the Spark adapter, on the
    session's local SparkSession; 3 the project-wide checks, last; 1 all the others, the Kafka
    and Redis tests among them."""
    if not path.is_relative_to(TESTS):
        return 1
    parts = path.relative_to(TESTS).parts
    if parts[:3] == ("adapters", "spark", "cluster"):
        return 0
    if parts[:2] == ("adapters", "spark"):
        return 2
    return 3 if parts[0] == "project" else 1


def pytest_collection_modifyitems(items):
    """The heavy groups run one after another, in the order they ran before the tests mirrored
    src/ (pytest's order by path alone would put the cluster's tests amid the local-Spark
    ones); inside a group, pytest's order stands (the sort is stable)."""
    items.sort(key=lambda item: run_group(item.path.resolve()))
