"""The JIT of the short-lived Spark JVMs the tests start: HotSpot's first tier only (C1).

A test's ``dedup`` process or cluster executor lives for a small run: its JVM spends its CPU
on compiling, and C2's optimizing compiles of Spark and Catalyst pay back only over minutes of
load. Stopped at C1, the JVMs of three files of subprocess-driven Spark tests
(``test_spark_stop_restart.py``, ``test_spark_one_instance.py``, ``test_spark_logs.py``) took
279 s against 334 s with both tiers (one run on two cores, 2026-12-06); in a whole suite the six
longest tests on the cluster took 651 s against 847 s. The session's own SparkSession keeps C2 for its
driver: it runs every test of the Spark adapter, some 25 minutes, and with C1 those tests that
run in it took up to 60% longer. Behaviour is the same; the product's own runs and the benches
keep C2, for their throughput.

``spark.*.defaultJavaOptions`` go before the engine's own ``extraJavaOptions``, which they
leave as they are; executors on the tests' cluster get them from the driver's settings. Every
``dedup`` process a test starts inherits them through ``DEDUP_SPARK__CONF`` (set for the
session by ``tests/conftest.py``); a test that sets that variable itself merges ``TEST_JVM``
into it (``with_test_jvm``)."""

from __future__ import annotations

import json

EXECUTOR_TEST_JVM = {"spark.executor.defaultJavaOptions": "-XX:TieredStopAtLevel=1"}
TEST_JVM = {"spark.driver.defaultJavaOptions": "-XX:TieredStopAtLevel=1", **EXECUTOR_TEST_JVM}


def with_test_jvm(conf: dict[str, str]) -> str:
    """``DEDUP_SPARK__CONF`` holding ``conf`` and the tests' JVM options (``conf``'s win)."""
    return json.dumps({**TEST_JVM, **conf})
