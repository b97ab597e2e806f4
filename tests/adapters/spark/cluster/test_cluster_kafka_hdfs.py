"""Kafka → the Spark engine on the standalone cluster → Kafka, its checkpoint on HDFS, started
the way docs/engines/spark.md tells a user: ``spark-submit --master spark://… --jars …`` of the entrypoint,
in client mode (the project's code reaches the executors as the session ships it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from adapters.kafka import parse_kafka_uri, produce
from adapters.spark.runtime import connector_jars, operator_jar
from app import StreamSpec, generate_parts
from tests.adapters.spark.checkpoint.test_spark_hdfs import CLIENT_CONF
from tests.adapters.spark.runtime.test_spark_app import COUNTS, assert_exact_output
from tests.support.kafka_io import create_topics, unique
from tests.support.partitioned import spread

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.cluster]

ROOT = Path(__file__).resolve().parents[4]


def spark_submit(master: str, args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    import pyspark

    jars = ",".join(str(j) for j in [operator_jar(), *connector_jars()])
    hadoop = [arg for name, value in CLIENT_CONF.items() for arg in ("--conf", f"spark.hadoop.{name}={value}")]
    command = [
        str(Path(pyspark.__file__).parent / "bin" / "spark-submit"),
        "--master",
        master,
        "--jars",
        jars,
        *hadoop,
        str(ROOT / "src" / "app" / "spark_submit.py"),
        *args,
    ]
    return subprocess.run(
        command,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )


def test_kafka_to_the_cluster_to_kafka_exactly_once_with_an_hdfs_checkpoint(
    spark_cluster, kafka_bootstrap, hdfs_uri, tmp_path
):
    if not connector_jars():
        pytest.skip("Spark's Kafka connector jars are missing (scripts/bootstrap --services)")
    topics = {role: unique(f"cluster-{role}") for role in ("in", "out", "dlq")}
    create_topics(kafka_bootstrap, *topics.values(), partitions=4)
    uri = {role: f"kafka://{kafka_bootstrap}/{topic}" for role, topic in topics.items()}
    parts, expected = generate_parts(StreamSpec(uniques=1500, seed=31), 2)
    checkpoint = f"{hdfs_uri}/cluster-tests/{topics['in']}"
    env = {
        "DEDUP_SPARK__CHECKPOINT": checkpoint,
        "DEDUP_SPARK__AVAILABLE_NOW": "true",
        "DEDUP_SPARK__MAX_OFFSETS_PER_TRIGGER": "1000",
        "DEDUP_KAFKA__DELIVERY": "exactly-once",
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    summaries = []
    # the late records go in after the rest was processed: the second run continues from the checkpoint
    for run, batch in enumerate((parts[:-1], parts[-1:])):
        produce(parse_kafka_uri(uri["in"], "preload"), spread([r for part in batch for r in part], 4).records)
        summary = tmp_path / f"summary-{run}.json"
        done = spark_submit(
            spark_cluster.url,
            [
                "--source",
                uri["in"],
                "--sink",
                uri["out"],
                "--dlq",
                uri["dlq"],
                "--no-progress",
                "--summary-json",
                str(summary),
            ],
            env,
            tmp_path,
        )
        assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
        summaries.append(json.loads(summary.read_text()))
    assert_exact_output(kafka_bootstrap, topics, [r for part in parts for r in part], expected.late)
    assert {k: sum(s[k] for s in summaries) for k in COUNTS} == {k: expected.as_accounting()[k] for k in COUNTS}
    assert summaries[1]["in"] == len(parts[-1])
    for summary in summaries:
        assert summary["in"] == summary["out"] + summary["duplicates"] + summary["dead_lettered"]
