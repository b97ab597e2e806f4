"""What the Spark engine refuses at start, and how: one ``dedup:`` line naming the resource.

A checkpoint of another job, a missing input directory or Kafka topic, a checkpoint whose
state the job cannot use: waiting cannot heal them, so the engine stops at once (exit 2,
never restarted). A broker that does not answer may come back: each start's check gives up
within seconds, the restart strategy retries with a log line naming the broker, and when it
gives up the last line names it (exit 3). Where the operator's whole stderr matters (the JVM
writes there too) ``dedup run`` is a process of its own, as an operator starts it; the other
runs share the test session's SparkSession.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from adapters.kafka import KafkaConfigurationError
from adapters.spark import build_spark_engine
from adapters.spark.checkpoint import read_manifest
from adapters.spark.runtime import connector_jars
from app import main
from deploy.local.services import find_free_port
from domain import Policies, RuleSet
from tests.adapters.spark.checkpoint.test_spark_evolution import event, tree_digest
from tests.support.kafka_io import create_topics, unique

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[4]


def dedup_process(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """``dedup ARGS`` as a process of its own, in ``cwd``, with the ``DEDUP_*`` settings ``env`` alone."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("DEDUP_")}
    environ.update(PYTHONPATH=str(ROOT / "src"), PYSPARK_PYTHON=sys.executable, DEDUP_SPARK__MASTER="local[1]", **env)
    return subprocess.run(
        [sys.executable, "-m", "app", *args], cwd=cwd, env=environ, capture_output=True, text=True, timeout=600
    )


def one_line(stderr: str) -> str:
    """The one ``dedup:`` line of a stderr without a Python traceback or a Java stack trace."""
    ours = [line for line in stderr.splitlines() if line.startswith("dedup:")]
    assert len(ours) == 1, stderr[-4000:]
    assert "Traceback" not in stderr and "\tat " not in stderr, stderr[-4000:]
    return ours[0]


@pytest.fixture
def in_process(spark, monkeypatch):
    """``dedup ARGS`` in this process (the session's SparkSession), with the ``DEDUP_*`` settings ``env`` alone."""
    for name in [k for k in os.environ if k.startswith("DEDUP_")]:
        monkeypatch.delenv(name)

    def run(*args: str, **env: str) -> int:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return main(list(args))

    return run


def test_a_checkpoint_of_another_job_is_refused_naming_both_sources(in_process, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for directory in (a, b):
        directory.mkdir()
        (directory / "1.jsonl").write_text(event("x1", "x", "APP", 0) + "\n")
    checkpoint = tmp_path / "checkpoints" / "dedup"
    outputs = ("--sink", f"file:{tmp_path / 'out'}", "--dlq", f"file:{tmp_path / 'dlq'}")
    env = {"DEDUP_SPARK__CHECKPOINT": str(checkpoint), "DEDUP_SPARK__RESTART": "fixed-delay(attempts=3,delay=1)"}
    # 1. a job reads a; its checkpoint records it
    assert in_process("run", "--engine", "spark", "--no-progress", "--source", f"file:{a}", *outputs, **env) == 0
    before = tree_digest(checkpoint)

    # 2. another job (source b) on the same checkpoint: refused at once, one line naming both sources
    done = dedup_process("run", "--engine", "spark", "--source", f"file:{b}", *outputs, cwd=tmp_path, **env)
    assert done.returncode == 2, done.stderr[-4000:]
    assert one_line(done.stderr) == (
        f"dedup: checkpoint {checkpoint} belongs to another job: its source is {a}, this job's is {b}. Use another "
        "spark.checkpoint (DEDUP_SPARK__CHECKPOINT) for this job, or the same --source as that job. The checkpoint "
        "was not modified"
    )
    assert "restart 1" not in done.stderr and tree_digest(checkpoint) == before

    # 3. a checkpoint written before endpoints were recorded is adopted, and records them
    manifest = checkpoint / "streamdedup" / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "endpoints": None}))
    (manifest.parent / ".manifest.json.crc").unlink(missing_ok=True)
    (a / "2.jsonl").write_text(event("x2", "x", "APP", 1) + "\n")
    assert in_process("run", "--engine", "spark", "--no-progress", "--source", f"file:{a}", *outputs, **env) == 0
    assert read_manifest(manifest.parent).endpoints["source"] == {"path": f"file:{a}"}


@pytest.mark.parametrize("given", ["missing", "a file"])
def test_an_input_directory_missing_or_a_file_is_refused_at_once_not_restarted(
    in_process, tmp_path, capsys, caplog, given
):
    missing = tmp_path / "no-such-dir"
    if given == "a file":
        missing.write_text(event("x1", "x", "APP", 0) + "\n")
    with caplog.at_level(logging.WARNING, logger="adapters.spark._restart"):
        code = in_process(
            "run",
            "--engine",
            "spark",
            "--no-progress",
            "--source",
            f"file:{missing}",
            "--sink",
            f"file:{tmp_path / 'out'}",
            DEDUP_SPARK__CHECKPOINT=str(tmp_path / "checkpoint"),
            DEDUP_SPARK__RESTART="fixed-delay(attempts=3,delay=30)",
        )
    assert code == 2
    assert one_line(capsys.readouterr().err) == (
        (
            f"dedup: input directory {missing} (source) does not exist; create it, or give the directory that holds "
            "the input as --source"
        )
        if given == "missing"
        else (
            f"dedup: input {missing} (source) is a file; the Spark engine reads a directory of files (each new file one "
            "after another): give the directory that holds it as --source"
        )
    )
    assert not [r for r in caplog.records if "restart" in r.getMessage()]
    assert not (tmp_path / "checkpoint").exists()


@pytest.fixture
def kafka_ready():
    if not connector_jars():
        pytest.skip("Spark's Kafka connector jars are not in .cache/jars/spark-kafka (scripts/bootstrap --services)")


@pytest.mark.kafka
def test_a_missing_source_topic_is_refused_in_one_line_naming_it(kafka_ready, kafka_bootstrap, tmp_path):
    topics = {role: unique(f"start-{role}") for role in ("in", "out", "dlq")}
    create_topics(kafka_bootstrap, topics["out"], topics["dlq"])
    done = dedup_process(
        "run",
        "--engine",
        "spark",
        "--source",
        f"kafka://{kafka_bootstrap}/{topics['in']}",
        "--sink",
        f"kafka://{kafka_bootstrap}/{topics['out']}",
        "--dlq",
        f"kafka://{kafka_bootstrap}/{topics['dlq']}",
        cwd=tmp_path,
        DEDUP_SPARK__RESTART="fixed-delay(attempts=3,delay=1)",
    )
    assert done.returncode == 2, done.stderr[-4000:]
    assert one_line(done.stderr) == (
        f"dedup: kafka topic '{topics['in']}' (source) does not exist on {kafka_bootstrap}; create it first"
    )
    assert "restart 1" not in done.stderr


@pytest.mark.kafka
@pytest.mark.parametrize("missing", ["out", "dlq"])
def test_a_missing_output_topic_is_refused_before_the_query_starts(
    kafka_ready, spark, kafka_bootstrap, tmp_path, missing
):
    topics = {role: unique(f"start-{role}") for role in ("in", "out", "dlq")}
    create_topics(kafka_bootstrap, *[t for role, t in topics.items() if role != missing])
    uri = {role: f"kafka://{kafka_bootstrap}/{topic}" for role, topic in topics.items()}
    engine = build_spark_engine(
        RuleSet(),
        Policies(),
        source=uri["in"],
        sink=uri["out"],
        dead_letters=uri["dlq"],
        checkpoint=str(tmp_path / "checkpoint"),
        spark=spark,
        master="local[2]",
    )
    role = {"out": "sink", "dlq": "dlq"}[missing]
    with pytest.raises(KafkaConfigurationError, match=f"kafka topic '{topics[missing]}' \\({role}\\) does not exist"):
        engine.run(available_now=True)
    assert not (tmp_path / "checkpoint").exists()


def test_an_unreachable_broker_is_retried_per_the_restart_strategy_then_named(kafka_ready, tmp_path):
    broker = f"127.0.0.1:{find_free_port()}"  # nothing listens there
    started = time.monotonic()
    done = dedup_process(
        "run",
        "--engine",
        "spark",
        "--source",
        f"kafka://{broker}/events",
        "--sink",
        f"file:{tmp_path / 'out'}",
        "--dlq",
        f"file:{tmp_path / 'dlq'}",
        cwd=tmp_path,
        DEDUP_SPARK__RESTART="fixed-delay(attempts=1,delay=1)",  # each attempt waits 10 s for metadata
    )
    took = time.monotonic() - started
    assert done.returncode == 3, done.stderr[-4000:]
    unreachable = f"kafka broker {broker} unreachable (source 'events'): no metadata within 10s"
    attempts = [line for line in done.stderr.splitlines() if unreachable in line and not line.startswith("dedup:")]
    assert [re.search(r"restart \d+ in 1\.0s", line)[0] for line in attempts] == ["restart 1 in 1.0s"]
    assert one_line(done.stderr).startswith(
        "dedup: the streaming query failed 2 time(s) and the restart strategy fixed-delay(attempts=1,delay=1) gave "
        f"up; last error: {unreachable}"
    )
    assert took < 240, f"two checks of about 10 s each took {took:.0f} s"


def test_the_migration_a_refusal_suggests_runs_as_printed_and_the_job_runs_on_it(in_process, tmp_path, capsys):
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    source.mkdir()
    v2 = tmp_path / "v2.yaml"  # v2 keys WEB by uniqueValue and type
    v2.write_text("rules:\n  WEB: {window: 10m, key_fields: [uniqueValue, type]}\n")
    args = (
        "run",
        "--engine",
        "spark",
        "--no-progress",
        "--source",
        f"file:{source}",
        "--sink",
        f"file:{tmp_path / 'out'}",
        "--dlq",
        f"file:{tmp_path / 'dlq'}",
    )
    (source / "1.jsonl").write_text(event("w1", "w", "WEB", 0) + "\n")
    assert in_process(*args, DEDUP_SPARK__CHECKPOINT=str(checkpoint)) == 0

    # 1. v2 on v1's checkpoint is refused, with the migration as a command
    capsys.readouterr()
    assert in_process(*args, "--config", str(v2)) == 2
    refusal = one_line(capsys.readouterr().err)
    assert "rules.WEB.key_fields changed from uniqueValue to uniqueValue,type" in refusal
    (command,) = re.findall(r"`([^`]+)`", refusal)
    new_checkpoint = re.search(r"start this job with spark\.checkpoint=(\S+) ", refusal)[1]

    # 2. the command, as printed, in a shell elsewhere (the venv's dedup on the PATH)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(
        command,
        shell=True,
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=600,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("DEDUP_")},
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
            "PYSPARK_PYTHON": sys.executable,
            "DEDUP_SPARK__MASTER": "local[1]",
        },
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert f"start the new job on spark:{new_checkpoint}" in done.stdout

    # 3. v2 runs on the new checkpoint and remembers v1's w1
    (source / "2.jsonl").write_text(event("w2", "w", "WEB", 60) + "\n")
    summary = tmp_path / "summary.json"
    assert (
        in_process(*args, "--config", str(v2), "--summary-json", str(summary), DEDUP_SPARK__CHECKPOINT=new_checkpoint)
        == 0
    )
    counts = json.loads(summary.read_text())
    assert (counts["in"], counts["duplicates"]) == (1, 1)
