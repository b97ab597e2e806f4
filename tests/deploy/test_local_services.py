"""Smoke test of deploy/local/services: a real Kafka 4 broker (KRaft), a real redis-server, a real
HDFS (NameNode + DataNode) and a real Prometheus.

Needs `scripts/bootstrap-services.sh` to have run (broker jars, java, redis-server, prometheus); fails
with that hint otherwise.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import uuid

import pytest
import redis
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from deploy.local import services
from deploy.local.services.cli import read_env
from deploy.local.services.hdfs import HdfsCluster
from deploy.local.services.prerequisites import REPO_ROOT
from tests.support.fixtures import running

pytestmark = [pytest.mark.kafka, pytest.mark.redis]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with running(services.KafkaBroker(tmp_path_factory.mktemp("kafka")), timeout=90) as b:
        yield b


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    with running(services.RedisServer(tmp_path_factory.mktemp("redis"), appendonly=True)) as r:
        yield r


def _read_all(bootstrap: str, topic: str, expect: int, timeout: float = 20.0) -> list[tuple[int, bytes, bytes]]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got: list[tuple[int, bytes, bytes]] = []
        deadline = time.monotonic() + timeout
        while len(got) < expect and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.offset(), msg.key(), msg.value()))
        return got
    finally:
        c.close()


def _produce(bootstrap: str, topic: str, key: bytes, value: bytes) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    errors: list = []
    p.produce(topic, key=key, value=value, on_delivery=lambda err, _msg: err and errors.append(err))
    assert p.flush(20) == 0, "message not delivered in time"
    assert not errors, errors


def test_kafka_produce_consume_survives_restart(broker):
    assert broker.bootstrap == f"127.0.0.1:{broker.port}"
    topic = f"smoke-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, partitions=1)
    assert broker.topics()[topic] == 1

    _produce(broker.bootstrap, topic, b"k1", b"hello")
    assert _read_all(broker.bootstrap, topic, 1) == [(0, b"k1", b"hello")]

    port_before = broker.port
    broker.restart()
    assert broker.port == port_before  # same address: clients keep their bootstrap string
    assert _read_all(broker.bootstrap, topic, 1) == [(0, b"k1", b"hello")]

    # Still writable after the restart, and the log continues where it was.
    _produce(broker.bootstrap, topic, b"k2", b"again")
    assert _read_all(broker.bootstrap, topic, 2) == [(0, b"k1", b"hello"), (1, b"k2", b"again")]


def test_kafka_auto_create_is_off(broker):
    assert "auto.create.topics.enable=false" in (broker.workdir / "server.properties").read_text()


def test_redis_ping_set_get_and_restart(redis_server):
    assert redis_server.url == f"redis://127.0.0.1:{redis_server.port}/0"
    client = redis.Redis.from_url(redis_server.url)
    assert client.ping() is True
    client.set("smoke:key", "value")
    assert client.get("smoke:key") == b"value"
    client.close()

    redis_server.restart()  # appendonly=True: data survives on the same port
    client = redis.Redis.from_url(redis_server.url)
    assert client.get("smoke:key") == b"value"
    client.close()


def test_create_topic_tolerates_an_existing_topic_unless_told_not_to(broker):
    topic = f"twice-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, partitions=2)
    broker.create_topic(topic, partitions=2)
    assert broker.topics()[topic] == 2
    with pytest.raises(KafkaException, match="already exists"):
        broker.create_topic(topic, exists_ok=False)


def test_a_taken_port_is_re_picked_unless_it_was_given(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        (tmp_path / "picked").mkdir()
        (tmp_path / "picked" / "state.json").write_text(json.dumps({"port": port}))  # as a former run left it
        with running(services.RedisServer(tmp_path / "picked")) as server:
            assert server.port != port
        with pytest.raises(services.ServiceError, match="in use"):
            services.RedisServer(tmp_path / "given", port).start()


def test_the_command_line_starts_reports_and_stops_the_services(tmp_path):
    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "deploy.local.services", *args, "--dir", str(tmp_path)],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=180,
        )

    up = cli("up", "--hdfs", "--spark-workers", "1")
    try:
        assert up.returncode == 0, up.stderr
        env = read_env(tmp_path / "services.env")
        assert (tmp_path / "services.env").read_text() == up.stdout
        # exported for commands; the test suite's names set but not exported
        assert f"export KAFKA={env['DEDUP_TEST_KAFKA']}\nexport REDIS={env['DEDUP_TEST_REDIS']}\n" in up.stdout
        assert f"export HDFS={env['DEDUP_TEST_HDFS']}\n" in up.stdout and env["HDFS"].startswith("hdfs://127.0.0.1:")
        assert f"export SPARK_MASTER={env['DEDUP_TEST_SPARK_MASTER']}\n" in up.stdout
        assert (
            env["SPARK_MASTER"].startswith("spark://127.0.0.1:") and len(env["DEDUP_TEST_SPARK_PIDS"].split(",")) == 2
        )
        assert "export DEDUP_" not in up.stdout
        assert redis.Redis.from_url(env["REDIS"]).ping()
        assert cli("status").stdout == (
            f"kafka: up {env['DEDUP_TEST_KAFKA']}\nredis: up {env['DEDUP_TEST_REDIS']}\n"
            f"hdfs:  up {env['DEDUP_TEST_HDFS']}\n"
            f"spark: up {env['DEDUP_TEST_SPARK_MASTER']}\n"
        )
        assert cli("topics", "in", "out", "--partitions", "3").stdout.split() == [
            "in",
            "3",
            "partitions",
            "0",
            "messages",
            "out",
            "3",
            "partitions",
            "0",
            "messages",
        ]
    finally:
        assert cli("down").returncode == 0
    assert cli("status").returncode == 1
    assert not services.pid_alive(int(env["DEDUP_TEST_KAFKA_PID"]))
    assert not any(services.pid_alive(int(pid)) for pid in env["DEDUP_TEST_HDFS_PIDS"].split(","))
    assert not any(services.pid_alive(int(pid)) for pid in env["DEDUP_TEST_SPARK_PIDS"].split(","))
    assert "kafka is not up" in cli("topics").stderr


def test_hdfs_keeps_its_files_through_a_kill(tmp_path):
    cluster = HdfsCluster(tmp_path / "hdfs")
    with running(cluster):
        assert cluster.uri == f"hdfs://127.0.0.1:{cluster.namenode.port}"
        cluster.write_file("/demo/a.txt", b"written before the kill")
        # kill -9 of both daemons: the NameNode replays its edits, the DataNode reports the block again
        cluster.kill()
        cluster.start()
        assert cluster.uri == f"hdfs://127.0.0.1:{cluster.namenode.port}"  # the same address
        assert cluster.read_file("/demo/a.txt") == b"written before the kill"


def test_prometheus_scrapes_its_targets_answers_queries_and_stops(prometheus):
    # Prometheus scraping itself: the one target there is without another service
    server = prometheus({})
    server.targets = {"itself": [f"127.0.0.1:{server.port}"]}
    server.restart()  # same port, the new config
    assert server.config()["global"]["scrape_interval"] == "1s"
    deadline = time.monotonic() + 30
    while not server.query('up{job="itself"} == 1') and time.monotonic() < deadline:
        time.sleep(0.5)
    [up] = server.query('up{job="itself"}')
    assert up["metric"]["instance"] == f"127.0.0.1:{server.port}" and up["value"][1] == "1"
    with pytest.raises(services.ServiceError, match='unknown function with name "ratee"'):
        server.query("ratee(up[1m])")
    pid = server.pid
    server.stop()
    assert not services.pid_alive(pid)
