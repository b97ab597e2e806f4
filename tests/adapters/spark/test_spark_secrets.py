"""The Spark engine never shows a secret either: not on the terminal, not in Spark's own log.

A bounded ``dedup run --engine spark`` over a real topic with ``kafka.config`` holding
``sasl.username``/``sasl.password`` (turned into a JAAS config for Spark's Kafka clients, which
the PLAINTEXT broker ignores) and ``ssl.key.password``, a secret URI parameter, at DEBUG (Spark's
log reaches the terminal too) and with JSON logs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app import StreamSpec, generate
from tests.app.test_secrets_never_shown import SECRET, assert_hidden
from tests.support.kafka_io import create_topics, produce, unique

pytestmark = [pytest.mark.spark, pytest.mark.kafka]
ROOT = Path(__file__).resolve().parents[3]


def test_a_spark_run_shows_no_secret_on_the_terminal_or_in_its_log(kafka_bootstrap, tmp_path):
    topics = {role: unique(f"spark-secret-{role}") for role in ("in", "out", "dlq")}
    create_topics(kafka_bootstrap, *topics.values(), partitions=2)
    records = generate(StreamSpec(uniques=50))[0]
    produce(kafka_bootstrap, topics["in"], records)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "DEDUP_LOG_LEVEL": "DEBUG",
        "DEDUP_LOG_FORMAT": "json",
        "DEDUP_KAFKA__CONFIG": json.dumps(
            {"sasl.username": "user", "sasl.password": SECRET, "ssl.key.password": SECRET}
        ),
        "DEDUP_SPARK__CHECKPOINT": str(tmp_path / "checkpoint"),
        "DEDUP_SPARK__AVAILABLE_NOW": "true",
        "DEDUP_SPARK__LOG_FILE": str(tmp_path / "spark.log"),
    }
    broker = f"kafka://{kafka_bootstrap}"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "run",
            "--engine",
            "spark",
            "--source",
            f"{broker}/{topics['in']}?kafka.sasl.oauthbearer.client.secret={SECRET}",
            "--sink",
            f"{broker}/{topics['out']}",
            "--dlq",
            f"{broker}/{topics['dlq']}",
            "--summary-json",
            str(tmp_path / "summary.json"),
        ],
        env=env,
        capture_output=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert json.loads((tmp_path / "summary.json").read_text())["in"] == len(records)
    assert b"sasl.jaas.config" in done.stderr or (tmp_path / "spark.log").stat().st_size > 0  # the logs talked
    assert_hidden(
        done.stdout,
        done.stderr,
        (tmp_path / "spark.log").read_text(errors="replace"),
        (tmp_path / "summary.json").read_text(),
    )
