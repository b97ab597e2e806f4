"""A single-node Apache Kafka 4.x broker (KRaft: broker and controller in one JVM) on loopback ports.

Settings (``KafkaBroker._server_properties``): process.roles=broker,controller, node.id=1, a
PLAINTEXT and a CONTROLLER listener on two loopback ports, every replication factor / min
ISR = 1, group.initial.rebalance.delay.ms=0, timed-out transactions aborted within a second,
num.partitions=1 (configurable) and **auto.create.topics.enable=false** (configurable): topics
must be created explicitly (``create_topic``), so a typo in a topic name fails loudly, as it
would in production.
Logs go to files under the workdir (``logs/server.log``, the JVM's output in
``logs/stdout.log``), never to the caller's stdout.

Readiness, topic creation and the warm-up use confluent-kafka's clients (AdminClient, a
transactional Producer): the same client library the engine uses.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .prerequisites import BOOTSTRAP_HINT, DEFAULT_KAFKA_JARS, java
from .process import LOOPBACK, Service, ServiceError, find_free_port, wait_until, write_json

_QUIET = logging.getLogger("streamdedup.local_services.kafka_clients")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False
# librdkafka logs every refused connection while the broker starts: keep its clients quiet
# and retrying fast (its reconnect back-off grows to 10 s by default).
QUIET_CLIENT = {
    "logger": _QUIET,
    "error_cb": lambda _error: None,
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 500,
}


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, **QUIET_CLIENT})


def create_topics(
    bootstrap: str,
    *names: str,
    partitions: int = 1,
    config: dict[str, Any] | None = None,
    exists_ok: bool = True,
    timeout: float = 30,
) -> None:
    """Create topics (replication factor 1) and wait until every partition has a leader.

    An existing topic is fine unless ``exists_ok=False``; other failures raise KafkaException."""
    config = {k: str(v) for k, v in (config or {}).items()}
    admin = admin_client(bootstrap)
    new = [NewTopic(n, num_partitions=partitions, replication_factor=1, config=config) for n in names]
    for future in admin.create_topics(new, request_timeout=timeout).values():
        try:
            future.result(timeout=timeout)
        except KafkaException as exc:
            if not (exists_ok and exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS):
                raise
    for name in names:
        wait_for_leaders(admin, name, timeout)


_NOT_READY = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError._TIMED_OUT)


def topic_sizes(bootstrap: str, timeout: float = 10) -> dict[str, tuple[int, int]]:
    """Every topic but the internal ones -> (partitions, messages). Messages are counted by
    offsets (end minus start of each partition), so transaction markers count too."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "streamdedup-topic-sizes", **QUIET_CLIENT})
    try:
        metadata = consumer.list_topics(timeout=timeout)
        return {
            name: (len(topic.partitions), sum(_size(consumer, name, p, timeout) for p in topic.partitions))
            for name, topic in sorted(metadata.topics.items())
            if not name.startswith("__")
        }
    finally:
        consumer.close()


def _size(consumer: Consumer, topic: str, partition: int, timeout: float) -> int:
    """End minus start offset; retried while the partition's leader is not ready (a new topic)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
            return high - low
        except KafkaException as exc:
            if time.monotonic() >= deadline or exc.args[0].code() not in _NOT_READY:
                raise
            time.sleep(0.1)


def wait_for_leaders(admin: AdminClient, name: str, timeout: float = 30) -> None:
    """Wait until the metadata shows topic ``name`` with a leader for every partition."""
    if not wait_until(lambda: _has_leaders(admin, name), timeout, interval=0.1):
        raise ServiceError(f"topic {name!r} has no leader after {timeout}s")


def _has_leaders(admin: AdminClient, name: str) -> bool:
    try:
        topic = admin.list_topics(name, timeout=5).topics.get(name)
    except KafkaException:
        return False
    return bool(
        topic and topic.error is None and topic.partitions and all(p.leader >= 0 for p in topic.partitions.values())
    )


def _random_cluster_id() -> str:
    """Like Kafka's Uuid.randomUuid().toString(): 22-char url-safe base64, not starting with '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def _mb(size: str) -> int:
    s = size.strip().lower()
    mult = {"k": 1 / 1024, "m": 1, "g": 1024}.get(s[-1:])
    return int(float(s[:-1]) * mult) if mult else int(int(s) / (1024 * 1024))


LOG4J2 = """\
# generated by deploy/local/services
status = warn
name = streamdedup-local-kafka
appender.server.type = RollingFile
appender.server.name = server
appender.server.fileName = {logs}/server.log
appender.server.filePattern = {logs}/server.log.%i
appender.server.layout.type = PatternLayout
appender.server.layout.pattern = [%d] %p %m (%c)%n
appender.server.policies.type = Policies
appender.server.policies.size.type = SizeBasedTriggeringPolicy
appender.server.policies.size.size = 50MB
appender.server.strategy.type = DefaultRolloverStrategy
appender.server.strategy.max = 3
rootLogger.level = INFO
rootLogger.appenderRef.server.ref = server
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""


class KafkaBroker(Service):
    """A KRaft broker+controller (``kafka.Kafka``) on two loopback ports.

    Layout of ``workdir``: server.properties, log4j2.properties, state.json (ports and
    cluster id, so a later object on the same workdir reuses them), data/ (log.dirs and
    the KRaft metadata log), logs/ (server.log, stdout.log).

    Start-up takes ~3-4 s on an idle 2-core machine (first start: + ~1 s for the storage
    format), ~7 s after kill() (the old broker session must expire first), and 2-3x that
    while the machine is busy. A JVM class-data-sharing archive is written to
    ``.cache/jars/cds/`` on the first clean stop() and used afterwards (~1 s faster starts).
    """

    NAME = "Kafka broker"
    POLL_SECONDS = 0.2
    NODE_ID = 1
    MAIN_CLASS = "kafka.Kafka"
    STORAGE_TOOL_CLASS = "kafka.tools.StorageTool"

    def __init__(
        self,
        workdir: Path,
        jars_dir: Path | None = None,
        port: int | None = None,
        *,
        controller_port: int | None = None,
        num_partitions: int = 1,
        auto_create_topics: bool = False,
        heap: str = "512m",
        extra_config: dict[str, Any] | None = None,
        detach: bool = False,
    ) -> None:
        workdir = Path(workdir).resolve()
        self.data_dir, self.logs_dir = workdir / "data", workdir / "logs"
        super().__init__(workdir, port, detach=detach, stdout_log=self.logs_dir / "stdout.log")
        self.jars_dir = Path(jars_dir or DEFAULT_KAFKA_JARS).resolve()
        self.num_partitions = num_partitions
        self.auto_create_topics = auto_create_topics
        self.heap = heap
        self.extra_config = dict(extra_config or {})
        saved = self._saved()
        self.controller_port: int = controller_port or saved.get("controller_port") or find_free_port()
        while self.controller_port == self.port:
            self.controller_port = find_free_port()
        self.cluster_id: str | None = saved.get("cluster_id")
        self._cds_pending: tuple[Path, Path] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    # -- lifecycle
    def start(self, timeout: float = 90, warm_up: bool = True) -> KafkaBroker:
        """Start (formatting storage on first start) and wait until the broker is ready:
        it serves metadata listing itself, and (``warm_up``) the group coordinator and the
        transaction coordinator answer, so the first consumer group / idempotent or
        transactional producer of a test does not pay ~1-3 s of broker-side retries."""
        if self.is_running():
            return self
        self.check_jars()
        started = time.monotonic()
        super().start(timeout)
        if warm_up:
            self._warm_up(started + timeout)
        self.last_start_seconds = time.monotonic() - started
        return self

    def restart(self, timeout: float = 90, stop_timeout: float = 30, warm_up: bool = True) -> KafkaBroker:
        """stop() then start() on the same ports and data dirs: committed data survives."""
        self.stop(stop_timeout)
        self._started_once = True
        return self.start(timeout, warm_up=warm_up)

    def wait_ready(self, timeout: float = 60) -> None:
        if not wait_until(lambda: self._ready() or not self.is_running(), timeout, interval=0.2):
            raise ServiceError("Kafka broker not ready in time")
        if not self.is_running():
            raise ServiceError("Kafka broker is not running")

    def _ready(self) -> bool:
        """The broker answers metadata and lists itself (registered with the controller)."""
        try:
            return self.NODE_ID in admin_client(self.bootstrap).list_topics(timeout=2).brokers
        except KafkaException:
            return False

    def _warm_up(self, deadline: float) -> None:
        """Ask for a consumer group's coordinator (the broker creates __consumer_offsets) and
        initialise a transactional producer (it creates __transaction_state and fetches a
        block of producer ids from the controller), retrying until both answer."""
        pending = {"group coordinator": self._group_coordinator_ready, "producer ids": self._init_transactions}
        while pending:
            pending = {name: step for name, step in pending.items() if not step()}
            if not pending:
                return
            if time.monotonic() >= deadline:
                raise ServiceError(
                    f"Kafka broker up but not warmed up in time ({sorted(pending)}); see {self.logs_dir}"
                )
            if not self.is_running():
                raise ServiceError(f"Kafka broker died during warm-up; see {self.logs_dir}")
            time.sleep(0.1)

    def _group_coordinator_ready(self) -> bool:
        group, admin = "streamdedup-warm-up", admin_client(self.bootstrap)  # kept: a dropped client drops its futures
        try:
            admin.describe_consumer_groups([group], request_timeout=5)[group].result(timeout=10)
            return True
        except (KafkaException, TimeoutError):
            return False

    def _init_transactions(self) -> bool:
        producer = Producer(
            {"bootstrap.servers": self.bootstrap, "transactional.id": "streamdedup-warm-up", **QUIET_CLIENT}
        )
        try:
            producer.init_transactions(5)
            return True
        except KafkaException:
            return False

    # -- what Service runs
    def check_jars(self) -> None:
        """Raises ServiceError (naming the bootstrap script) when the broker jars are missing."""
        if not any(self.jars_dir.glob("kafka_2.13-*.jar")):
            raise ServiceError(f"no Kafka jars in {self.jars_dir}: {BOOTSTRAP_HINT}")

    def _prepare(self) -> None:
        server = self._write_configs()
        if not (self.data_dir / "meta.properties").exists():
            self._format(server)

    def _command(self) -> list[str]:
        jvm = self._jvm_args(self.heap)
        jvm[1:1] = self._cds_args()
        return jvm + [self.MAIN_CLASS, str(self.workdir / "server.properties")]

    def _log_files(self) -> list[Path]:
        return [self.stdout_log, self.logs_dir / "server.log"]

    def _state(self) -> dict[str, Any]:
        return {"port": self.port, "controller_port": self.controller_port, "cluster_id": self.cluster_id}

    def _pick_new_ports(self) -> None:
        self.port, self.controller_port = find_free_port(), find_free_port()

    def _exited(self, clean: bool) -> None:
        self._cds_finish(clean)

    # -- config files
    def _server_properties(self) -> dict[str, Any]:
        props: dict[str, Any] = {
            "process.roles": "broker,controller",
            "node.id": self.NODE_ID,
            "controller.quorum.voters": f"{self.NODE_ID}@{LOOPBACK}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{LOOPBACK}:{self.port},CONTROLLER://{LOOPBACK}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{LOOPBACK}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": self.num_partitions,
            "auto.create.topics.enable": str(self.auto_create_topics).lower(),
            "delete.topic.enable": "true",
            "default.replication.factor": 1,
            "min.insync.replicas": 1,
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 4,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 4,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
            # After kill() the restarted node can only re-register once the old broker
            # session has expired (default 9 s): keep it short, but not so short that a
            # busy 2-core machine fences the broker.
            "broker.session.timeout.ms": 4000,
            "broker.heartbeat.interval.ms": 500,
            # A transaction left open by a killed producer whose id nobody takes again hides what
            # follows it from read_committed readers until it times out and the broker aborts it;
            # the broker looks for such transactions every 10 s by default: every second here.
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
            "num.network.threads": 2,
            "num.io.threads": 4,
            "num.recovery.threads.per.data.dir": 1,
            "log.retention.hours": 168,
        }
        props.update(self.extra_config)
        return props

    def _write_configs(self) -> Path:
        for directory in (self.workdir, self.data_dir, self.logs_dir):
            directory.mkdir(parents=True, exist_ok=True)
        server = self.workdir / "server.properties"
        lines = ["# generated by deploy/local/services; rewritten at every start"]
        lines += [f"{k}={v}" for k, v in self._server_properties().items()]
        server.write_text("\n".join(lines) + "\n")
        (self.workdir / "log4j2.properties").write_text(LOG4J2.format(logs=self.logs_dir))
        write_json(self.state_file, self._state())
        return server

    def _jvm_args(self, heap: str) -> list[str]:
        return [
            java(),
            f"-Xms{min(128, _mb(heap))}m",
            f"-Xmx{heap}",
            "-XX:+ExitOnOutOfMemoryError",
            "-XX:MaxGCPauseMillis=20",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.logs_dir}",
            "-cp",
            f"{self.jars_dir}/*",
        ]

    def _format(self, server: Path) -> None:
        if not self.cluster_id:
            self.cluster_id = _random_cluster_id()
            self._write_configs()
        cmd = self._jvm_args("256m") + [
            self.STORAGE_TOOL_CLASS,
            "format",
            "-t",
            self.cluster_id,
            "-c",
            str(server),
            "--ignore-formatted",
        ]
        res = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        if res.returncode != 0 or not (self.data_dir / "meta.properties").exists():
            raise ServiceError(
                f"Kafka storage format failed (exit {res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
            )

    # -- class-data sharing
    def _cds_archive(self) -> Path | None:
        """Path of the AppCDS archive for this JVM + jar set (class-data sharing cuts the
        broker's start-up by ~1 s, ~35%). The first clean stop() writes it; a stale or
        foreign archive only makes the JVM print a warning and start without it.
        Disabled with STREAMDEDUP_KAFKA_CDS=0."""
        if os.environ.get("STREAMDEDUP_KAFKA_CDS", "1") == "0":
            return None
        binary = Path(java()).resolve()
        digest = hashlib.sha256(str(binary).encode())
        for lib in (binary.parent.parent / "lib" / "server" / "libjvm.so", binary):
            try:
                st = lib.stat()
                digest.update(f"{lib}:{st.st_size}:{st.st_mtime_ns}".encode())
            except OSError:
                pass
        for jar in sorted(self.jars_dir.glob("*.jar")):
            digest.update(f"{jar.name}:{jar.stat().st_size}".encode())
        return self.jars_dir.parent / "cds" / f"kafka-broker-{digest.hexdigest()[:16]}.jsa"

    def _cds_args(self) -> list[str]:
        self._cds_pending = None
        try:
            archive = self._cds_archive()
            if archive is None:
                return []
            if archive.is_file() and archive.stat().st_size > 0:
                return ["-Xlog:cds*=error", f"-XX:SharedArchiveFile={archive}"]
            if self.detach:  # stopped by another process (CLI "down"): never publishes
                return []
            archive.parent.mkdir(parents=True, exist_ok=True)
            if not os.access(archive.parent, os.W_OK):
                return []
            for stale in archive.parent.glob("*.tmp"):  # left by crashed runs
                if time.time() - stale.stat().st_mtime > 3600:
                    stale.unlink(missing_ok=True)
        except OSError:
            return []
        tmp = archive.with_name(f"{archive.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
        self._cds_pending = (tmp, archive)
        return ["-Xlog:cds*=error", f"-XX:ArchiveClassesAtExit={tmp}"]

    def _cds_finish(self, clean: bool) -> None:
        """After the JVM exited: publish the archive it dumped at exit (clean stops only)."""
        if self._cds_pending is None:
            return
        tmp, archive = self._cds_pending
        self._cds_pending = None
        try:
            if clean and tmp.is_file() and tmp.stat().st_size > 0:
                os.replace(tmp, archive)
            else:
                tmp.unlink(missing_ok=True)
        except OSError:
            pass

    # -- admin helpers
    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        config: dict[str, str] | None = None,
        *,
        exists_ok: bool = True,
        timeout: float = 30,
    ) -> None:
        """Create a topic (replication factor 1) and wait until every partition has a leader.
        An existing topic is fine unless ``exists_ok=False``."""
        create_topics(self.bootstrap, name, partitions=partitions, config=config, exists_ok=exists_ok, timeout=timeout)

    def wait_topic(self, name: str, timeout: float = 30) -> None:
        """Wait until the broker's metadata shows ``name`` with a leader for every partition."""
        wait_for_leaders(admin_client(self.bootstrap), name, timeout)

    def topics(self) -> dict[str, int]:
        """Existing topics (internal ones included) -> partition count."""
        metadata = admin_client(self.bootstrap).list_topics(timeout=10)
        return {name: len(topic.partitions) for name, topic in metadata.topics.items()}
