"""Smoke test of deploy/local/services.py: a real Kafka 4 broker (KRaft) and a real redis-server.

Needs `scripts/bootstrap-services.sh` to have run (broker jars, java, redis-server); fails
with that hint otherwise. Client libraries missing -> the matching test is skipped.
"""

from __future__ import annotations

import importlib.util
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.kafka, pytest.mark.redis]

REPO_ROOT = Path(__file__).resolve().parents[1]
SERVICES_PY = REPO_ROOT / "deploy" / "local" / "services.py"


def _load_services():
    name = "streamdedup_local_services"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SERVICES_PY)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


services = _load_services()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = services.KafkaBroker(tmp_path_factory.mktemp("kafka"))
    try:
        b.start(timeout=90)
    except services.ServiceError as e:
        pytest.fail(f"Kafka broker did not start: {e}")
    yield b
    b.stop()


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    r = services.RedisServer(tmp_path_factory.mktemp("redis"), appendonly=True)
    try:
        r.start()
    except services.ServiceError as e:
        pytest.fail(f"redis-server did not start: {e}")
    yield r
    r.stop()


def _read_all(bootstrap: str, topic: str, expect: int, timeout: float = 20.0) -> list[tuple[int, bytes, bytes]]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

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
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    errors: list = []
    p.produce(topic, key=key, value=value, on_delivery=lambda err, _msg: err and errors.append(err))
    assert p.flush(20) == 0, "message not delivered in time"
    assert not errors, errors


def test_kafka_produce_consume_survives_restart(broker):
    pytest.importorskip("confluent_kafka")
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
    redis = pytest.importorskip("redis")
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
