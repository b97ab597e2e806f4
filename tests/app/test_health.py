"""``/health`` tells an idle engine (healthy) from a stuck one (503), on the memory and kafka engines."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.app.test_secrets_never_shown import fetch, free_port
from tests.support.kafka_io import create_topics, unique

ROOT = Path(__file__).resolve().parents[2]
STALL = "2s"


def start(args: list[str], port: int, **popen) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "DEDUP_STALL_TIMEOUT": STALL}
    return subprocess.Popen(
        [sys.executable, "-m", "app", "run", *args, "--metrics-port", str(port)],
        env=env,
        stderr=subprocess.PIPE,
        **popen,
    )


def health(port: int, deadline: float = 30) -> dict:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        body = fetch(port, "/health")
        if body:
            return json.loads(body)
        time.sleep(0.2)
    raise AssertionError("no /health answer")


def wait_for(port: int, status: str, deadline: float = 30) -> dict:
    end, seen = time.monotonic() + deadline, {}
    while time.monotonic() < end:
        seen = health(port)
        if seen["status"] == status:
            return seen
        time.sleep(0.3)
    raise AssertionError(f"/health never said {status}; last: {seen}")


def event(i: int) -> bytes:
    return (
        json.dumps(
            {"id": str(i), "uniqueValue": f"u{i}-" + "x" * 200, "type": "APP", "timestamp": 1_700_000_000}
        ).encode()
        + b"\n"
    )


def test_an_idle_memory_engine_is_healthy_and_a_blocked_one_is_stalled(tmp_path):
    port = free_port()
    engine = start(
        ["--source", "-", "--sink", "-", "--dlq", f"file:{tmp_path / 'd.jsonl'}"],
        port,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        time.sleep(3)  # longer than the stall timeout, with nothing to read
        idle = health(port)
        assert idle["status"] == "idle" and idle["last_progress_seconds_ago"] < 2, idle
        engine.stdin.write(event(0))
        engine.stdin.flush()
        assert wait_for(port, "ok")["last_record_seconds_ago"] < 2
        # nobody reads the engine's stdout: once the pipe is full its writes block, and so does it
        # (and so would this write to its stdin: it is left to a thread)
        threading.Thread(
            target=feed, args=(engine.stdin, b"".join(event(i) for i in range(1, 3000))), daemon=True
        ).start()
        stalled = wait_for(port, "stalled")
        assert stalled["last_progress_seconds_ago"] >= 2
        assert urllib_status(port) == 503
    finally:
        engine.kill()
        engine.wait(timeout=30)


def feed(pipe, data: bytes) -> None:
    try:
        pipe.write(data)
        pipe.flush()
    except (BrokenPipeError, ValueError):
        pass  # the engine was killed


def urllib_status(port: int) -> int:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as reply:
            return reply.status
    except urllib.error.HTTPError as err:
        return err.code


@pytest.mark.kafka
def test_an_idle_kafka_engine_is_healthy_past_the_stall_timeout(kafka_bootstrap, tmp_path):
    topics = {role: unique(f"health-{role}") for role in ("in", "out", "dlq")}
    create_topics(kafka_bootstrap, *topics.values(), partitions=2)
    port = free_port()
    engine = start(
        [
            "--engine",
            "kafka",
            "--source",
            f"kafka://{kafka_bootstrap}/{topics['in']}?group=g",
            "--sink",
            f"kafka://{kafka_bootstrap}/{topics['out']}",
            "--dlq",
            f"kafka://{kafka_bootstrap}/{topics['dlq']}",
        ],
        port,
    )
    try:
        health(port)
        time.sleep(4)  # twice the stall timeout without a record
        idle = health(port)
        assert idle["status"] == "idle" and idle["last_progress_seconds_ago"] < 2, idle
        assert urllib_status(port) == 200
    finally:
        engine.send_signal(signal.SIGTERM)
        _, err = engine.communicate(timeout=60)
    assert engine.returncode == 0, err.decode()[-2000:]
