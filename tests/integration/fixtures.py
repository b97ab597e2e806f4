"""Session fixtures for the real services: a Kafka broker (KRaft) and a redis-server.

Both come from ``deploy/local/services.py`` and listen on free loopback ports; they stop
when the session ends. ``DEDUP_TEST_KAFKA`` (``HOST:PORT``) and ``DEDUP_TEST_REDIS`` (a
``redis://`` URL) point the tests at running services instead; then ``kafka_broker`` and
``redis_server`` are ``None`` and the tests that kill a service skip.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

SERVICES_PY = Path(__file__).resolve().parents[2] / "deploy" / "local" / "services.py"


def local_services():
    """``deploy/local/services.py`` as a module (it is a script, not a package)."""
    name = "streamdedup_local_services"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, SERVICES_PY)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    if os.environ.get("DEDUP_TEST_KAFKA"):
        yield None
        return
    services = local_services()
    broker = services.KafkaBroker(tmp_path_factory.mktemp("kafka"))
    try:
        broker.start(timeout=120)
    except services.ServiceError as exc:
        pytest.fail(f"the Kafka broker did not start: {exc}", pytrace=False)
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker) -> str:
    return os.environ.get("DEDUP_TEST_KAFKA") or kafka_broker.bootstrap


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    if os.environ.get("DEDUP_TEST_REDIS"):
        yield None
        return
    services = local_services()
    server = services.RedisServer(tmp_path_factory.mktemp("redis"))
    try:
        server.start()
    except services.ServiceError as exc:
        pytest.fail(f"redis-server did not start: {exc}", pytrace=False)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_url(redis_server) -> str:
    return os.environ.get("DEDUP_TEST_REDIS") or redis_server.url


@pytest.fixture
def own_redis(tmp_path):
    """A redis-server of this test's own, persisting every write (``appendonly``), to stop and restart."""
    services = local_services()
    server = services.RedisServer(tmp_path / "redis", appendonly=True)
    try:
        server.start()
    except services.ServiceError as exc:
        pytest.fail(f"redis-server did not start: {exc}", pytrace=False)
    yield server
    server.stop()
