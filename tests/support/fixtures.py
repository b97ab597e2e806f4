"""Session fixtures for the real services: a Kafka broker (KRaft), a redis-server and an HDFS
(NameNode + DataNode, started only when a test asks for ``hdfs`` or ``hdfs_uri``); and
``prometheus``, a Prometheus of a test's own scraping what the test runs.

They come from ``deploy/local/services`` and listen on free loopback ports; they stop when
the session ends. ``DEDUP_TEST_KAFKA`` (``HOST:PORT``), ``DEDUP_TEST_REDIS`` (a ``redis://``
URL) and ``DEDUP_TEST_HDFS`` (an ``hdfs://HOST:PORT`` URI) point the tests at running services
instead; then ``kafka_broker``, ``redis_server`` and ``hdfs`` are ``None``. ``own_broker`` and
``own_redis`` are a test's own, to kill or stop.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from deploy.local import services
from deploy.local.services.hdfs import HdfsCluster
from tests.support import kafka_io


@contextmanager
def running(service, **start) -> Iterator:
    """``service`` started (the test fails with the reason if it cannot start), stopped afterwards."""
    try:
        service.start(**start)
    except services.ServiceError as exc:
        pytest.fail(f"{service.NAME} did not start: {exc}", pytrace=False)
    try:
        yield service
    finally:
        service.stop()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    if os.environ.get("DEDUP_TEST_KAFKA"):
        yield None
        return
    with running(services.KafkaBroker(tmp_path_factory.mktemp("kafka")), timeout=120) as broker:
        yield broker


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker):
    yield os.environ.get("DEDUP_TEST_KAFKA") or kafka_broker.bootstrap
    kafka_io.close_producers()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    if os.environ.get("DEDUP_TEST_REDIS"):
        yield None
        return
    with running(services.RedisServer(tmp_path_factory.mktemp("redis"))) as server:
        yield server


@pytest.fixture(scope="session")
def redis_url(redis_server) -> str:
    return os.environ.get("DEDUP_TEST_REDIS") or redis_server.url


@pytest.fixture(scope="session")
def hdfs(tmp_path_factory):
    """The session's HDFS (``HdfsCluster``), started at the first test that asks for it."""
    if os.environ.get("DEDUP_TEST_HDFS"):
        yield None
        return
    with running(HdfsCluster(tmp_path_factory.mktemp("hdfs")), timeout=120) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def hdfs_uri(hdfs) -> str:
    """``hdfs://HOST:PORT``: the session's HDFS, or ``DEDUP_TEST_HDFS``."""
    return (os.environ.get("DEDUP_TEST_HDFS") or hdfs.uri).rstrip("/")


@pytest.fixture
def own_broker(tmp_path):
    """A Kafka broker of this test's own, to kill and restart."""
    with running(services.KafkaBroker(tmp_path / "kafka"), timeout=120) as broker:
        yield broker
        kafka_io.close_producers(broker.bootstrap)


@pytest.fixture
def own_redis(tmp_path):
    """A redis-server of this test's own, persisting every write (``appendonly``), to stop and restart."""
    with running(services.RedisServer(tmp_path / "redis", appendonly=True)) as server:
        yield server


@pytest.fixture
def prometheus(tmp_path):
    """Starts a Prometheus of this test's own: ``prometheus({job: ["HOST:PORT", ...]})`` scrapes
    those targets every second (``scrape_interval``, ``rule_files``: see ``PrometheusServer``)
    and returns the running server; it stops when the test ends."""
    started = []

    def start(targets: dict[str, list[str]], **options):
        server = services.PrometheusServer(tmp_path / f"prometheus-{len(started)}", targets, **options)
        started.append(server)
        try:
            return server.start()
        except services.ServiceError as exc:
            pytest.fail(f"{server.NAME} did not start: {exc}", pytrace=False)

    yield start
    for server in started:
        server.stop()
