#!/usr/bin/env python3
"""Real local test services: a single-node Apache Kafka 4.x broker (KRaft) and redis-server.

Stdlib only (Python 3.11). Everything listens on 127.0.0.1 only, on free ports.

Prerequisites (installed by ``scripts/bootstrap-services.sh``, idempotent):
  * a Java 17+ ``java`` (``$JAVA_HOME/bin/java`` or on PATH),
  * the broker's jars in ``.cache/jars/kafka-broker/`` (from
    ``deploy/local/jars/kafka-broker/pom.xml``: org.apache.kafka:kafka_2.13 4.1.1),
  * ``redis-server`` (Debian package).

Library use (e.g. from pytest fixtures; deploy/ is not a package, so load it by path)::

    spec = importlib.util.spec_from_file_location("local_services", REPO / "deploy/local/services.py")
    services = importlib.util.module_from_spec(spec); sys.modules[spec.name] = services
    spec.loader.exec_module(services)

    broker = services.KafkaBroker(tmp_path / "kafka")      # jars_dir defaults to .cache/jars/kafka-broker
    broker.start()                                          # formats storage on first start
    broker.create_topic("events", partitions=3)
    ... broker.bootstrap  -> "127.0.0.1:PORT"
    broker.restart()    # same ports, same data dirs: committed data survives
    broker.kill()       # SIGKILL (fault tests); start() again recovers the log
    broker.stop()

    redis = services.RedisServer(tmp_path / "redis")       # appendonly=True to survive restarts
    redis.start(); redis.url -> "redis://127.0.0.1:PORT/0"; redis.stop()

Broker settings (see ``KafkaBroker._server_properties``): process.roles=broker,controller,
node.id=1, a PLAINTEXT listener and a CONTROLLER listener on two loopback ports, every
replication factor / min ISR = 1, group.initial.rebalance.delay.ms=0, num.partitions=1
(configurable) and **auto.create.topics.enable=false** (configurable): topics must be
created explicitly (``create_topic``), so a typo in a topic name fails loudly instead of
silently creating a new topic, as it would in production. Logs go to files under the
workdir (``logs/server.log``, JVM stdout/stderr in ``logs/stdout.log``), never to the
caller's stdout.

Start-up of the broker takes ~3-4 s on an idle 2-core machine (first start: + ~1 s for
the storage format), ~7 s after kill() (the old broker session must expire first), and
2-3x that while the machine is busy. A JVM class-data-sharing archive is written to
``.cache/jars/cds/`` on the first clean stop() and used afterwards (~1 s faster starts).

Unless ``detach=True``, the service processes get SIGKILL when the Python thread that
started them exits (Linux parent-death signal via ``setpriv --pdeathsig``), so a crashed
or killed test run leaves no broker behind. Start them from the main thread (pytest
fixtures run there); ``detach=True`` is what the CLI uses.

CLI::

    python deploy/local/services.py up   [--dir DIR]   # start both, detached; writes DIR/services.env
    python deploy/local/services.py down [--dir DIR] [--purge]
    python deploy/local/services.py status [--dir DIR]

DIR defaults to ``.cache/local-services`` under the repo root. ``services.env`` is
shell-sourceable: DEDUP_TEST_KAFKA=127.0.0.1:PORT, DEDUP_TEST_REDIS=redis://127.0.0.1:PORT/0,
DEDUP_TEST_KAFKA_PID, DEDUP_TEST_REDIS_PID.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

LOOPBACK = "127.0.0.1"
REPO_ROOT = Path(__file__).resolve().parents[2]
JARS_ROOT = REPO_ROOT / ".cache" / "jars"
DEFAULT_KAFKA_JARS = JARS_ROOT / "kafka-broker"
DEFAULT_SPARK_KAFKA_JARS = JARS_ROOT / "spark-kafka"
DEFAULT_SERVICES_DIR = REPO_ROOT / ".cache" / "local-services"
BOOTSTRAP_HINT = "run scripts/bootstrap-services.sh first"

__all__ = [
    "KafkaBroker",
    "RedisServer",
    "ServiceError",
    "find_free_port",
    "spark_kafka_jars",
    "DEFAULT_KAFKA_JARS",
    "DEFAULT_SPARK_KAFKA_JARS",
]


class ServiceError(RuntimeError):
    """A local service could not be started, reached or stopped."""


# ----------------------------------------------------------------------------- helpers


def find_free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def spark_kafka_jars(jars_dir: Path | None = None) -> list[str]:
    """Absolute paths of Spark's Kafka connector jars, for ``spark.jars`` (comma-joined)."""
    d = Path(jars_dir or DEFAULT_SPARK_KAFKA_JARS)
    jars = sorted(str(p.resolve()) for p in d.glob("*.jar"))
    if not jars:
        raise ServiceError(f"no jars in {d}: {BOOTSTRAP_HINT}")
    return jars


def _pid_alive(pid: int) -> bool:
    """True if pid exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        state = stat.rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return True


def _pid_cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _terminate(
    pid: int,
    proc: subprocess.Popen | None,
    timeout: float,
    sig: int = signal.SIGTERM,
) -> None:
    """Send ``sig``; SIGKILL if still alive after ``timeout`` s; reap our own child."""

    def gone(wait: float) -> bool:
        if proc is not None:
            try:
                proc.wait(timeout=wait)
                return True
            except subprocess.TimeoutExpired:
                return False
        deadline = time.monotonic() + wait
        while True:
            if not _pid_alive(pid):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        gone(0.5)
        return
    if gone(timeout if sig != signal.SIGKILL else 10):
        return
    if sig != signal.SIGKILL:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if gone(10):
            return
    raise ServiceError(f"process {pid} did not exit after SIGKILL")


def _tail(path: Path, offset: int = 0, max_chars: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return ""
    text = data.decode(errors="replace")
    return text[-max_chars:]


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if not java:
        raise ServiceError(f"no java on PATH (Java 17+ needed): {BOOTSTRAP_HINT}")
    return java


def _pdeathsig_prefix(detach: bool) -> list[str]:
    if detach:
        return []
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "SIGKILL", "--"] if setpriv else []


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


_BIND_ERRORS = ("Address already in use", "BindException")


# ------------------------------------------------------- minimal Kafka wire protocol (stdlib)
# Used for readiness checks and as the fallback for create_topic when confluent_kafka is not
# importable. Only non-flexible request versions are used: Metadata v1, CreateTopics v2.


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def _unpack(self, fmt: str) -> Any:
        val = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return val

    def i8(self) -> int:
        return self._unpack(">b")

    def i16(self) -> int:
        return self._unpack(">h")

    def i32(self) -> int:
        return self._unpack(">i")

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        s = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return s


def _kstr(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _kafka_call(host: str, port: int, api_key: int, version: int, body: bytes, timeout: float = 5.0) -> _Reader:
    client_id = b"streamdedup-local-services"
    corr = int(time.monotonic_ns() & 0x7FFFFFFF)
    msg = struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id + body
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(msg)) + msg)

        def recv_exact(n: int) -> bytes:
            buf = bytearray()
            while len(buf) < n:
                chunk = s.recv(n - len(buf))
                if not chunk:
                    raise ConnectionError("connection closed by broker")
                buf += chunk
            return bytes(buf)

        (size,) = struct.unpack(">i", recv_exact(4))
        r = _Reader(recv_exact(size))
    if r.i32() != corr:
        raise ConnectionError("correlation id mismatch")
    return r


def _kafka_metadata(host: str, port: int, topics: list[str] | None, timeout: float = 5.0) -> dict[str, Any]:
    """Metadata v1. topics=None asks for all topics, [] for none (cheap), else for those."""
    if topics is None:
        body = struct.pack(">i", -1)
    else:
        body = struct.pack(">i", len(topics)) + b"".join(_kstr(t) for t in topics)
    r = _kafka_call(host, port, 3, 1, body, timeout)
    brokers = []
    for _ in range(r.i32()):
        node_id, bhost, bport, _rack = r.i32(), r.string(), r.i32(), r.string()
        brokers.append((node_id, bhost, bport))
    controller_id = r.i32()
    out_topics: dict[str, Any] = {}
    for _ in range(r.i32()):
        err, name, _internal = r.i16(), r.string(), r.i8()
        parts = []
        for _ in range(r.i32()):
            perr, pidx, leader = r.i16(), r.i32(), r.i32()
            replicas = [r.i32() for _ in range(r.i32())]
            isr = [r.i32() for _ in range(r.i32())]
            parts.append({"error": perr, "partition": pidx, "leader": leader, "replicas": replicas, "isr": isr})
        out_topics[name] = {"error": err, "partitions": parts}
    return {"brokers": brokers, "controller_id": controller_id, "topics": out_topics}


def _kafka_find_group_coordinator(host: str, port: int, group: str, timeout: float = 5.0) -> int:
    """FindCoordinator v1 for a consumer group; returns the error code (0 = ready).

    The first such request makes the broker create __consumer_offsets."""
    r = _kafka_call(host, port, 10, 1, _kstr(group) + struct.pack(">b", 0), timeout)
    r.i32()  # throttle_time_ms
    return r.i16()


def _kafka_init_producer_id(host: str, port: int, timeout: float = 5.0) -> int:
    """InitProducerId v0 without a transactional id (what an idempotent producer sends
    first); returns the error code. The first one makes the broker fetch a block of
    producer ids from the controller (COORDINATOR_LOAD_IN_PROGRESS until then)."""
    r = _kafka_call(host, port, 22, 0, struct.pack(">hi", -1, 60000), timeout)
    r.i32()  # throttle_time_ms
    return r.i16()


def _kafka_create_topic_raw(
    host: str, port: int, name: str, partitions: int, config: dict[str, str], timeout_ms: int
) -> tuple[int, str | None]:
    """CreateTopics v2; returns (error_code, error_message). 36 = TOPIC_ALREADY_EXISTS."""
    cfg = b"".join(_kstr(k) + _kstr(str(v)) for k, v in config.items())
    topic = _kstr(name) + struct.pack(">ihi", partitions, 1, 0) + struct.pack(">i", len(config)) + cfg
    body = struct.pack(">i", 1) + topic + struct.pack(">ib", timeout_ms, 0)
    r = _kafka_call(host, port, 19, 2, body, timeout=timeout_ms / 1000 + 5)
    r.i32()  # throttle_time_ms
    n = r.i32()
    if n != 1:
        raise ServiceError(f"unexpected CreateTopics response ({n} topics)")
    r.string()
    return r.i16(), r.string()


# ----------------------------------------------------------------------------- Kafka


class KafkaBroker:
    """A single-node KRaft Kafka broker+controller (``kafka.Kafka``) on loopback ports.

    Layout of ``workdir``: server.properties, log4j2.properties, state.json (ports and
    cluster id, so a later object on the same workdir reuses them), data/ (log.dirs and
    the KRaft metadata log), logs/ (server.log, stdout.log).
    """

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
        self.workdir = Path(workdir).resolve()
        self.jars_dir = Path(jars_dir or DEFAULT_KAFKA_JARS).resolve()
        self.num_partitions = num_partitions
        self.auto_create_topics = auto_create_topics
        self.heap = heap
        self.extra_config = dict(extra_config or {})
        self.detach = detach
        self.data_dir = self.workdir / "data"
        self.logs_dir = self.workdir / "logs"
        self.state_file = self.workdir / "state.json"
        state = _read_json(self.state_file)
        # Ports given explicitly are never changed; otherwise persisted/auto-picked ports
        # may be re-picked if they turn out to be taken at the first start of this object.
        self._ports_fixed = port is not None
        self.port: int = port or state.get("port") or find_free_port()
        self.controller_port: int = controller_port or state.get("controller_port") or find_free_port()
        while self.controller_port == self.port:
            self.controller_port = find_free_port()
        self.cluster_id: str | None = state.get("cluster_id")
        self._proc: subprocess.Popen | None = None
        self._started_once = False
        self._cds_pending: tuple[Path, Path] | None = None
        self.last_start_seconds: float | None = None

    # -- properties
    @property
    def bootstrap(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

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
            "num.network.threads": 2,
            "num.io.threads": 4,
            "num.recovery.threads.per.data.dir": 1,
            "log.retention.hours": 168,
        }
        props.update(self.extra_config)
        return props

    def _write_configs(self) -> Path:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(exist_ok=True)
        self.logs_dir.mkdir(exist_ok=True)
        server = self.workdir / "server.properties"
        lines = ["# generated by deploy/local/services.py; rewritten at every start"]
        lines += [f"{k}={v}" for k, v in self._server_properties().items()]
        server.write_text("\n".join(lines) + "\n")
        (self.workdir / "log4j2.properties").write_text(
            "\n".join(
                [
                    "# generated by deploy/local/services.py",
                    "status = warn",
                    "name = streamdedup-local-kafka",
                    "appender.server.type = RollingFile",
                    "appender.server.name = server",
                    f"appender.server.fileName = {self.logs_dir}/server.log",
                    f"appender.server.filePattern = {self.logs_dir}/server.log.%i",
                    "appender.server.layout.type = PatternLayout",
                    "appender.server.layout.pattern = [%d] %p %m (%c)%n",
                    "appender.server.policies.type = Policies",
                    "appender.server.policies.size.type = SizeBasedTriggeringPolicy",
                    "appender.server.policies.size.size = 50MB",
                    "appender.server.strategy.type = DefaultRolloverStrategy",
                    "appender.server.strategy.max = 3",
                    "rootLogger.level = INFO",
                    "rootLogger.appenderRef.server.ref = server",
                    "logger.statechange.name = state.change.logger",
                    "logger.statechange.level = WARN",
                    "logger.request.name = kafka.request.logger",
                    "logger.request.level = WARN",
                    "",
                ]
            )
        )
        _write_json(
            self.state_file,
            {"port": self.port, "controller_port": self.controller_port, "cluster_id": self.cluster_id},
        )
        return server

    def _jvm_args(self, heap: str) -> list[str]:
        return [
            _java(),
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

    def _cds_archive(self) -> Path | None:
        """Path of the AppCDS archive for this JVM + jar set (class-data sharing cuts the
        broker's start-up by ~1 s, ~35%). The first clean stop() writes it; a stale or
        foreign archive only makes the JVM print a warning and start without it.
        Disabled with STREAMDEDUP_KAFKA_CDS=0."""
        if os.environ.get("STREAMDEDUP_KAFKA_CDS", "1") == "0":
            return None
        java = Path(_java()).resolve()
        h = hashlib.sha256(str(java).encode())
        for lib in (java.parent.parent / "lib" / "server" / "libjvm.so", java):
            try:
                st = lib.stat()
                h.update(f"{lib}:{st.st_size}:{st.st_mtime_ns}".encode())
            except OSError:
                pass
        for jar in sorted(self.jars_dir.glob("*.jar")):
            h.update(f"{jar.name}:{jar.stat().st_size}".encode())
        return self.jars_dir.parent / "cds" / f"kafka-broker-{h.hexdigest()[:16]}.jsa"

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

    def _check_jars(self) -> None:
        if not any(self.jars_dir.glob("kafka_2.13-*.jar")):
            raise ServiceError(f"no Kafka jars in {self.jars_dir}: {BOOTSTRAP_HINT}")

    def _formatted(self) -> bool:
        return (self.data_dir / "meta.properties").exists()

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
        if res.returncode != 0 or not self._formatted():
            raise ServiceError(
                f"Kafka storage format failed (exit {res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
            )

    # -- lifecycle
    def start(self, timeout: float = 90, warm_up: bool = True) -> KafkaBroker:
        """Start (formatting storage on first start) and wait until the broker is ready:
        it serves metadata listing itself, and (``warm_up``) the group coordinator and
        the producer-id manager answer, so the first consumer group / idempotent
        producer of a test does not pay ~1-3 s of broker-side retries."""
        if self.is_running():
            return self
        self._check_jars()
        t0 = time.monotonic()
        attempts = 1 if (self._ports_fixed or self._started_once) else 3
        for attempt in range(attempts):
            try:
                self._start_once(t0 + timeout)
                break
            except _PortInUse:
                if attempt == attempts - 1:
                    raise ServiceError(
                        f"Kafka ports {self.port}/{self.controller_port} are in use; see {self.logs_dir}"
                    ) from None
                self.port, self.controller_port = find_free_port(), find_free_port()
        if warm_up:
            self._warm_up(t0 + timeout)
        self._started_once = True
        self.last_start_seconds = time.monotonic() - t0
        return self

    def _warm_up(self, deadline: float) -> None:
        pending = {"group": True, "pid": True}
        while pending["group"] or pending["pid"]:
            try:
                if pending["group"]:
                    pending["group"] = _kafka_find_group_coordinator(LOOPBACK, self.port, "streamdedup-warm-up") != 0
                if pending["pid"]:
                    pending["pid"] = _kafka_init_producer_id(LOOPBACK, self.port) != 0
            except (OSError, struct.error, ConnectionError):
                pass
            if not (pending["group"] or pending["pid"]):
                return
            if time.monotonic() >= deadline:
                raise ServiceError(f"Kafka broker up but not warmed up in time ({pending}); see {self.logs_dir}")
            if not self.is_running():
                raise ServiceError(f"Kafka broker died during warm-up; see {self.logs_dir}")
            time.sleep(0.1)

    def _start_once(self, deadline: float) -> None:
        server = self._write_configs()
        if not self._formatted():
            self._format(server)
        stdout_log = self.logs_dir / "stdout.log"
        server_log = self.logs_dir / "server.log"
        offsets = (_file_size(stdout_log), _file_size(server_log))
        jvm = self._jvm_args(self.heap)
        jvm[1:1] = self._cds_args()
        cmd = _pdeathsig_prefix(self.detach) + jvm + [self.MAIN_CLASS, str(server)]
        with open(stdout_log, "ab") as out:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,
                close_fds=True,
            )

        def failure_text() -> str:
            return _tail(stdout_log, offsets[0]) + "\n" + _tail(server_log, offsets[1])

        while True:
            code = self._proc.poll()
            if code is not None:
                text = failure_text()
                self._proc = None
                self._cds_finish(clean=False)
                if any(e in text for e in _BIND_ERRORS):
                    raise _PortInUse()
                raise ServiceError(f"Kafka broker exited with code {code} during start-up:\n{text[-4000:]}")
            if self._ready():
                return
            if time.monotonic() >= deadline:
                text = failure_text()
                self._kill_proc()
                if any(e in text for e in _BIND_ERRORS):
                    raise _PortInUse()
                raise ServiceError(f"Kafka broker not ready in time; last log lines:\n{text[-4000:]}")
            time.sleep(0.2)

    def _ready(self) -> bool:
        try:
            md = _kafka_metadata(LOOPBACK, self.port, [], timeout=2.0)
        except (OSError, struct.error, ConnectionError):
            return False
        return any(node == self.NODE_ID for node, _h, _p in md["brokers"])

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not self._ready():
            if not self.is_running():
                raise ServiceError("Kafka broker is not running")
            if time.monotonic() >= deadline:
                raise ServiceError("Kafka broker not ready in time")
            time.sleep(0.2)

    def _kill_proc(self) -> None:
        if self._proc is not None:
            _terminate(self._proc.pid, self._proc, 0, signal.SIGKILL)
            self._proc = None
        self._cds_finish(clean=False)

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM (controlled shutdown), then SIGKILL after ``timeout`` seconds."""
        if self._proc is not None:
            _terminate(self._proc.pid, self._proc, timeout)
            clean = self._proc.returncode in (0, 143, -signal.SIGTERM)
            self._proc = None
            self._cds_finish(clean)

    def kill(self) -> None:
        """SIGKILL: an unclean crash, for fault tests. start() afterwards recovers the logs."""
        self._kill_proc()

    def restart(self, timeout: float = 90, stop_timeout: float = 30, warm_up: bool = True) -> KafkaBroker:
        """stop() then start() on the same ports and data dirs."""
        self.stop(stop_timeout)
        self._started_once = True  # keep ports: clients hold this bootstrap address
        return self.start(timeout, warm_up=warm_up)

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

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

        Uses confluent_kafka's AdminClient when importable, else the stdlib CreateTopics
        request. An existing topic is fine unless ``exists_ok=False``.
        """
        config = {k: str(v) for k, v in (config or {}).items()}
        try:
            from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[import-not-found]
        except ImportError:
            AdminClient = None  # noqa: N806
        if AdminClient is not None:
            from confluent_kafka import KafkaError, KafkaException  # type: ignore[import-not-found]

            admin = AdminClient({"bootstrap.servers": self.bootstrap})
            fut = admin.create_topics(
                [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config)],
                request_timeout=timeout,
            )[name]
            try:
                fut.result(timeout=timeout)
            except KafkaException as e:
                err = e.args[0]
                if not (exists_ok and err.code() == KafkaError.TOPIC_ALREADY_EXISTS):
                    raise
        else:
            code, msg = _kafka_create_topic_raw(LOOPBACK, self.port, name, partitions, config, int(timeout * 1000))
            if code != 0 and not (exists_ok and code == 36):
                raise ServiceError(f"CreateTopics {name!r} failed: error {code} {msg or ''}")
        self.wait_topic(name, timeout=timeout)

    def wait_topic(self, name: str, timeout: float = 30) -> None:
        """Wait until the broker's metadata shows ``name`` with a leader for every partition."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                t = _kafka_metadata(LOOPBACK, self.port, [name])["topics"].get(name)
                if t and t["error"] == 0 and t["partitions"] and all(p["leader"] >= 0 for p in t["partitions"]):
                    return
            except (OSError, struct.error, ConnectionError):
                pass
            if time.monotonic() >= deadline:
                raise ServiceError(f"topic {name!r} has no leader after {timeout}s")
            time.sleep(0.1)

    def topics(self) -> dict[str, int]:
        """Existing topics (internal ones included) -> partition count."""
        md = _kafka_metadata(LOOPBACK, self.port, None)
        return {name: len(t["partitions"]) for name, t in md["topics"].items()}


class _PortInUse(Exception):
    pass


def _mb(size: str) -> int:
    s = size.strip().lower()
    mult = {"k": 1 / 1024, "m": 1, "g": 1024}.get(s[-1:], None)
    return int(float(s[:-1]) * mult) if mult else int(int(s) / (1024 * 1024))


def _random_cluster_id() -> str:
    """Like Kafka's Uuid.randomUuid().toString(): 22-char url-safe base64, not starting with '-'."""
    while True:
        raw = uuid.uuid4().bytes
        s = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        if not s.startswith("-"):
            return s


# ----------------------------------------------------------------------------- Redis


def _redis_bin() -> str:
    for cand in (shutil.which("redis-server"), "/usr/bin/redis-server", "/usr/sbin/redis-server"):
        if cand and os.access(cand, os.X_OK):
            return cand
    raise ServiceError(f"redis-server not found: {BOOTSTRAP_HINT}")


def _redis_ping(port: int, timeout: float = 1.0) -> bytes:
    with socket.create_connection((LOOPBACK, port), timeout=timeout) as s:
        s.sendall(b"*1\r\n$4\r\nPING\r\n")
        return s.recv(64)


class RedisServer:
    """redis-server on a loopback port; no persistence unless ``appendonly=True``.

    With ``appendonly=True`` data survives stop()/restart() and (with the default
    ``appendfsync="always"``) even kill().
    """

    def __init__(
        self,
        workdir: Path,
        port: int | None = None,
        *,
        appendonly: bool = False,
        appendfsync: str = "always",
        extra_args: list[str] | None = None,
        detach: bool = False,
    ) -> None:
        self.workdir = Path(workdir).resolve()
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        self.extra_args = list(extra_args or [])
        self.detach = detach
        self.state_file = self.workdir / "state.json"
        self._ports_fixed = port is not None
        self.port: int = port or _read_json(self.state_file).get("port") or find_free_port()
        self._proc: subprocess.Popen | None = None
        self._started_once = False
        self.last_start_seconds: float | None = None

    @property
    def url(self) -> str:
        return f"redis://{LOOPBACK}:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _cmd(self) -> list[str]:
        return [
            _redis_bin(),
            "--port", str(self.port),
            "--bind", LOOPBACK,
            "--dir", str(self.workdir),
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", self.appendfsync,
            "--daemonize", "no",
            "--logfile", str(self.workdir / "redis.log"),
            *self.extra_args,
        ]  # fmt: skip

    def start(self, timeout: float = 30) -> RedisServer:
        if self.is_running():
            return self
        t0 = time.monotonic()
        attempts = 1 if (self._ports_fixed or self._started_once) else 3
        for attempt in range(attempts):
            try:
                self._start_once(t0 + timeout)
                break
            except _PortInUse:
                if attempt == attempts - 1:
                    raise ServiceError(f"redis port {self.port} is in use") from None
                self.port = find_free_port()
        self._started_once = True
        self.last_start_seconds = time.monotonic() - t0
        return self

    def _start_once(self, deadline: float) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        _write_json(self.state_file, {"port": self.port})
        log = self.workdir / "redis.log"
        offset = _file_size(log)
        with open(self.workdir / "stdout.log", "ab") as out:
            self._proc = subprocess.Popen(
                _pdeathsig_prefix(self.detach) + self._cmd(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,
                close_fds=True,
            )
        while True:
            code = self._proc.poll()
            if code is not None:
                self._proc = None
                text = _tail(log, offset) + _tail(self.workdir / "stdout.log")
                if any(e in text for e in _BIND_ERRORS):
                    raise _PortInUse()
                raise ServiceError(f"redis-server exited with code {code}:\n{text[-3000:]}")
            try:
                if _redis_ping(self.port).startswith(b"+PONG"):
                    return
            except OSError:
                pass
            if time.monotonic() >= deadline:
                self.kill()
                raise ServiceError(f"redis-server not ready in time:\n{_tail(log, offset)[-3000:]}")
            time.sleep(0.05)

    def stop(self, timeout: float = 15) -> None:
        if self._proc is not None:
            _terminate(self._proc.pid, self._proc, timeout)
            self._proc = None

    def kill(self) -> None:
        if self._proc is not None:
            _terminate(self._proc.pid, self._proc, 0, signal.SIGKILL)
            self._proc = None

    def restart(self, timeout: float = 30) -> RedisServer:
        self.stop()
        self._started_once = True
        return self.start(timeout)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ----------------------------------------------------------------------------- CLI


def _read_env(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        for line in path.read_text().splitlines():
            if "=" in line and not line.lstrip().startswith("#"):
                k, v = line.split("=", 1)
                out[k.strip()] = v.strip()
    except OSError:
        pass
    return out


def _env_alive(env: dict[str, str], root: Path) -> tuple[bool, bool]:
    """Are the pids in services.env still our processes (guards against pid reuse)?"""

    def ok(key: str, marker: str) -> bool:
        pid = env.get(key)
        return bool(pid and pid.isdigit() and _pid_alive(int(pid)) and marker in _pid_cmdline(int(pid)))

    redis_addr = env.get("DEDUP_TEST_REDIS", "").removeprefix("redis://").split("/", 1)[0]
    # redis-server sets its title to "redis-server 127.0.0.1:PORT"
    return (
        ok("DEDUP_TEST_KAFKA_PID", str(root / "kafka")),
        bool(redis_addr) and ok("DEDUP_TEST_REDIS_PID", redis_addr),
    )


def _stop_from_env(env: dict[str, str], root: Path, timeout: float = 30) -> None:
    kafka_alive, redis_alive = _env_alive(env, root)
    if kafka_alive:
        _terminate(int(env["DEDUP_TEST_KAFKA_PID"]), None, timeout)
    if redis_alive:
        _terminate(int(env["DEDUP_TEST_REDIS_PID"]), None, timeout)


def _cmd_up(args: argparse.Namespace) -> int:
    root = Path(args.dir).resolve()
    env_file = root / "services.env"
    env = _read_env(env_file)
    if env and all(_env_alive(env, root)):
        print(env_file.read_text(), end="")
        return 0
    _stop_from_env(env, root)  # half-alive leftovers
    root.mkdir(parents=True, exist_ok=True)
    broker = KafkaBroker(
        root / "kafka",
        Path(args.jars_dir) if args.jars_dir else None,
        args.kafka_port,
        num_partitions=args.partitions,
        detach=True,
    )
    broker._check_jars()
    redis = RedisServer(root / "redis", args.redis_port, detach=True).start()
    try:
        broker.start(timeout=args.timeout)
    except BaseException:
        redis.stop()
        raise
    text = (
        f"DEDUP_TEST_KAFKA={broker.bootstrap}\n"
        f"DEDUP_TEST_REDIS={redis.url}\n"
        f"DEDUP_TEST_KAFKA_PID={broker.pid}\n"
        f"DEDUP_TEST_REDIS_PID={redis.pid}\n"
    )
    tmp = env_file.with_suffix(".env.tmp")
    tmp.write_text(text)
    tmp.replace(env_file)
    print(text, end="")
    print(f"# kafka started in {broker.last_start_seconds:.1f}s; logs in {broker.logs_dir}", file=sys.stderr)
    return 0


def _cmd_down(args: argparse.Namespace) -> int:
    root = Path(args.dir).resolve()
    env_file = root / "services.env"
    _stop_from_env(_read_env(env_file), root, timeout=args.timeout)
    env_file.unlink(missing_ok=True)
    if args.purge and root.exists():
        shutil.rmtree(root)
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    root = Path(args.dir).resolve()
    env = _read_env(root / "services.env")
    kafka_alive, redis_alive = _env_alive(env, root)
    print(f"kafka: {'up ' + env['DEDUP_TEST_KAFKA'] if kafka_alive else 'down'}")
    print(f"redis: {'up ' + env['DEDUP_TEST_REDIS'] if redis_alive else 'down'}")
    return 0 if (kafka_alive and redis_alive) else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Local Kafka (KRaft) + redis-server for tests.")
    sub = p.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start both services detached; write DIR/services.env")
    up.add_argument("--kafka-port", type=int, default=None)
    up.add_argument("--redis-port", type=int, default=None)
    up.add_argument("--partitions", type=int, default=1, help="num.partitions (default 1)")
    up.add_argument("--jars-dir", default=None, help=f"default {DEFAULT_KAFKA_JARS}")
    up.add_argument("--timeout", type=float, default=120)
    down = sub.add_parser("down", help="stop services started by 'up'")
    down.add_argument("--purge", action="store_true", help="also delete DIR (all data)")
    down.add_argument("--timeout", type=float, default=30)
    st = sub.add_parser("status", help="exit 0 if both are up")
    for sp in (up, down, st):
        sp.add_argument("--dir", default=str(DEFAULT_SERVICES_DIR))
    args = p.parse_args(argv)
    try:
        return {"up": _cmd_up, "down": _cmd_down, "status": _cmd_status}[args.cmd](args)
    except ServiceError as e:
        print(f"services.py: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
