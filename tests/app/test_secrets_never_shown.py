"""A secret planted in every place one can be given never appears in anything the program writes.

The places: a Redis URL's user and password, a Redis URL's ``?password=``, ``kafka.config``'s
``sasl.password`` and ``ssl.key.password`` (environment and config file), and secret query
parameters of Kafka URIs. What is read: stdout, stderr and the logs (at DEBUG), the summary
JSON, ``dedup state inspect`` (text and JSON) and ``dedup state migrate``, ``/metrics`` and
``/health``, on success paths (a kafka engine running against the real broker) and on error
paths (unreachable or refusing Redis, wrong-case schemes, mismatched migrate URIs, the wrong
engine for a URI, a setting error on the secret itself).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.app.test_cli import run_cli
from tests.support.kafka_io import create_topics, produce, unique

pytestmark = pytest.mark.kafka
SECRET = f"hunter2-{secrets.token_hex(6)}"
ROOT = Path(__file__).resolve().parents[2]


def assert_hidden(*texts) -> None:
    for text in texts:
        text = text.decode(errors="replace") if isinstance(text, bytes) else str(text)
        assert SECRET not in text, text[:2000]


def redis_with_secret(redis_url: str) -> list[str]:
    address = redis_url.removeprefix("redis://").split("/", 1)[0]
    return [
        f"redis://{SECRET}:{SECRET}@{address}/0",
        f"redis://:{SECRET}@{address}/0",
        f"redis://{address}/0?password={SECRET}",
    ]


@pytest.mark.redis
def test_state_commands_and_state_errors_never_show_a_redis_secret(own_redis, tmp_path):
    seen = []
    for url in redis_with_secret(own_redis.url):
        for command in (
            ["state", "inspect", "--state", url],
            ["state", "inspect", "--state", url, "--json"],
            ["state", "migrate", "--from", url, "--to", url, "--dry-run"],
            ["state", "migrate", "--from", url, "--to", url.replace("/0", "/1")],
            ["state", "migrate", "--from", url, "--to", str(tmp_path / "new")],
            ["run", "--state", url, "--source", "-", "--sink", "-", "--dlq", f"file:{tmp_path / 'd'}"],
            ["run", "--state", url.replace("redis://", "REDIS://"), "--source", "-"],
        ):
            done = run_cli(*command, env={"DEDUP_LOG_LEVEL": "DEBUG"})
            seen.append(done.returncode)
            assert_hidden(done.stdout, done.stderr)
    assert 0 in seen and set(seen) - {0}  # success paths and error paths were both taken


def test_setting_errors_never_show_a_secret(tmp_path):
    config = tmp_path / "dedup.yaml"
    config.write_text(f"kafka:\n  config:\n    sasl.password: [{SECRET}]\n    ssl.key.password: {SECRET}\n")
    cases = [
        (["run", "--config", str(config)], {}),
        (["run", "--sink", f"kafka://127.0.0.1:1/x?sasl.password={SECRET}"], {}),
        (["run", "--sink", f"kafka://127.0.0.1:nope/x?sasl.password={SECRET}"], {}),
        (["run", "--sink", f"kafak://127.0.0.1:1/x?ssl.key.password={SECRET}"], {}),
        (["run", "--engine", "spark", "--source", "-", "--sink", f"kafka://u:{SECRET}@127.0.0.1:1/x"], {}),
        (["run"], {"DEDUP_KAFKA__CONFIG": json.dumps({"sasl.password": 5, "ssl.key.password": SECRET})}),
        (["run"], {"DEDUP_KAFKA__CONFIG__SASL_PASSWORD": SECRET, "DEDUP_BATCH_SIZE": "0"}),
        (["run"], {"DEDUP_KAFKA__CONFIG": "{not json " + SECRET}),
        (["run"], {"DEDUP_KAFKA__CONFIG__SASL_PASSWORD": SECRET, "DEDUP_KAFKA__CONFG__X": SECRET}),
        (["run"], {"DEDUP_MIGRATION__STATE_FROM": f"redis://:{SECRET}@127.0.0.1:notaport/0"}),
        # passwords holding / ? # @ (generated ones often do), and one-slash typos of the scheme
        *((["run", "--state", f"redis://admin:{SECRET}{c}{SECRET}@h:99999/0"], {}) for c in "/?#@"),
        (["run", "--state", f"redis:/admin:{SECRET}@h:6379/0"], {}),
        (["run"], {"DEDUP_MIGRATION__STATE_FROM": f"redis://admin:{SECRET}/{SECRET}@h:0/0"}),
        *(
            (["run", "--engine", engine, "--source", source, "--sink", sink, "--dlq", "kafka://127.0.0.1:1/d"], {})
            for engine, source in (
                ("memory", "-"),
                ("kafka", "kafka://127.0.0.1:1/in"),
                ("spark", "kafka://127.0.0.1:1/in"),
            )
            for sink in (
                f"kafka:/admin:{SECRET}@127.0.0.1:1/t",
                f"kafka://admin:{SECRET}/{SECRET}@127.0.0.1:nope/t",
                f"kafka://admin:{SECRET}#{SECRET}@127.0.0.1:1/t?x=1",
                f"kafak://admin:{SECRET}/{SECRET}@127.0.0.1:1/t",
            )
        ),
    ]
    for args, env in cases:
        done = run_cli(*args, env=env)
        assert done.returncode == 2, (args, done.stderr)
        assert_hidden(done.stdout, done.stderr)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(port: int, path: str) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
            return reply.read().decode()
    except urllib.error.HTTPError as err:
        return err.read().decode()
    except urllib.error.URLError:
        return ""  # not listening yet


@pytest.mark.redis
def test_a_running_kafka_engine_never_shows_its_kafka_or_redis_secrets(kafka_bootstrap, redis_url, tmp_path):
    topics = {role: unique(f"secret-{role}") for role in ("in", "out", "dlq")}
    create_topics(kafka_bootstrap, *topics.values(), partitions=2)
    produce(
        kafka_bootstrap,
        topics["in"],
        [
            json.dumps(
                {"id": str(i), "uniqueValue": f"u{i % 5}", "type": "APP", "timestamp": 1_700_000_000 + i}
            ).encode()
            for i in range(20)
        ]
        + [b"not json"],
    )
    port = free_port()
    address = redis_url.removeprefix("redis://").split("/", 1)[0]
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "DEDUP_LOG_LEVEL": "DEBUG",
        "DEDUP_KAFKA__CONFIG": json.dumps(
            {"sasl.password": SECRET, "ssl.key.password": SECRET, "sasl.username": "user"}
        ),
        "DEDUP_STATE": f"redis://{address}/0?socket_timeout=5",
    }
    args = [
        sys.executable,
        "-m",
        "app",
        "run",
        "--engine",
        "kafka",
        "--source",
        f"kafka://{kafka_bootstrap}/{topics['in']}?group=g&sasl.oauthbearer.client.secret={SECRET}",
        "--sink",
        f"kafka://{kafka_bootstrap}/{topics['out']}",
        "--dlq",
        f"kafka://{kafka_bootstrap}/{topics['dlq']}",
        "--metrics-port",
        str(port),
        "--summary-json",
        str(tmp_path / "summary.json"),
    ]
    engine = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline, metrics = time.monotonic() + 60, ""
        while "dedup_records_in_total 21" not in metrics and time.monotonic() < deadline:
            time.sleep(0.5)
            metrics = fetch(port, "/metrics") if engine.poll() is None else metrics
        health = fetch(port, "/health")
    finally:
        engine.send_signal(signal.SIGTERM)
        out, err = engine.communicate(timeout=60)
    assert "dedup_records_in_total 21" in metrics, err.decode()[-3000:]
    assert engine.returncode == 0, err.decode()[-3000:]
    assert b"DEBUG" in err  # the logs were read at their most talkative
    assert_hidden(out, err, metrics, health, (tmp_path / "summary.json").read_text())
