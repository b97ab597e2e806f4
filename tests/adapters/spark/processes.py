"""``dedup run --engine spark`` as a separate process, on a JSONL directory fed file by file.

``FileFeed`` writes a generated stream (``app._generator.generate_parts``) into the input
directory one part at a time; ``DedupProcess`` starts the CLI on it with its own
checkpoint, outputs and metrics port, and reads back what the sinks committed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from deploy.local.services import find_free_port
from tests.support.faults.injection import child_pids, wait_gone  # noqa: F401 - wait_gone: for the tests that kill a driver
from tests.support.spark_jvm import with_test_jvm

ROOT = Path(__file__).resolve().parents[3]


@dataclass
class FileFeed:
    """Writes parts into ``directory`` atomically (written aside, then renamed in), in order."""

    directory: Path
    parts: list[list[bytes]]
    written: int = 0

    def __post_init__(self):
        self.directory.mkdir(parents=True, exist_ok=True)

    def add(self, count: int = 1) -> None:
        for _ in range(count):
            part = self.parts[self.written]
            staging = self.directory.parent / f".part-{self.written:04d}.jsonl"
            staging.write_bytes(b"".join(r + b"\n" for r in part))
            staging.rename(self.directory / f"part-{self.written:04d}.jsonl")
            self.written += 1
            time.sleep(0.05)  # distinct modification times: the file source reads in that order

    def rest(self) -> None:
        self.add(len(self.parts) - self.written)

    def records_written(self) -> int:
        return sum(len(p) for p in self.parts[: self.written])


def spark_env(
    checkpoint: Path, bounded: bool, lease_timeout: str = "10s", idle_event_ms: int = 1000, **settings: str
) -> dict[str, str]:
    """The environment of a ``dedup run --engine spark`` process in a test: this process's without
    its ``DEDUP_*`` variables, then ``local[2]``, a 1 s trigger, an idle event every
    ``idle_event_ms``, ``checkpoint``, and ``settings`` (more ``DEDUP_…`` variables) over them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEDUP_")}
    env.update(
        PYTHONPATH=str(ROOT / "src"),
        DEDUP_SPARK__CHECKPOINT=str(checkpoint),
        DEDUP_SPARK__AVAILABLE_NOW=str(bounded).lower(),
        DEDUP_SPARK__TRIGGER="1 second",
        DEDUP_SPARK__MASTER="local[2]",
        DEDUP_SPARK__LEASE_TIMEOUT=lease_timeout,
        DEDUP_SPARK__CONF=with_test_jvm({"spark.sql.streaming.noDataProgressEventInterval": str(idle_event_ms)}),
    )
    env.update(settings)
    return env


@dataclass
class DedupProcess:
    """One ``dedup run --engine spark`` process over ``root/in``; outputs under ``root``. Several
    instances on one ``root`` (one checkpoint) need each their own ``name`` (logs, summaries).
    ``uris``: other endpoints by role (``source``, ``sink``, ``dlq``), e.g. Kafka topics; ``env``:
    more settings (``DEDUP_…`` variables)."""

    root: Path
    port: int = field(default_factory=find_free_port)
    process: subprocess.Popen | None = None
    runs: int = 0
    name: str = "run"
    lease_timeout: str = "10s"  # spark.lease_timeout: a killed driver's restart waits up to this long
    uris: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)

    def start(self, bounded: bool, idle_event_ms: int = 1000) -> DedupProcess:
        self.runs += 1
        env = spark_env(self.root / "checkpoint", bounded, self.lease_timeout, idle_event_ms, **self.env)
        uris = {
            "source": f"file:{self.root / 'in'}?maxFilesPerTrigger=1",
            "sink": f"file:{self.root / 'out'}",
            "dlq": f"file:{self.root / 'dlq'}",
            **self.uris,
        }
        command = [
            sys.executable,
            "-m",
            "app",
            "run",
            "--engine",
            "spark",
            *(arg for role, uri in uris.items() for arg in (f"--{role}", uri)),
            "--metrics-port",
            str(self.port),
            "--summary-json",
            str(self.summary_path()),
        ]
        self.log = open(self.root / f"{self.name}-{self.runs}.log", "wb")
        # its own process group, as a job started from a shell: Ctrl-C reaches the whole group
        self.process = subprocess.Popen(
            command,
            env=env,
            cwd=self.root,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        return self

    def summary_path(self, run: int | None = None) -> Path:
        return self.root / f"{self.name}-summary-{run or self.runs}.json"

    def summary(self, run: int | None = None) -> dict[str, int]:
        return json.loads(self.summary_path(run).read_text())

    def output(self, run: int | None = None) -> str:
        return (self.root / f"{self.name}-{run or self.runs}.log").read_text(errors="replace")

    def wait(self, timeout: float = 400) -> int:
        try:
            return self.process.wait(timeout)
        finally:
            self.log.close()

    def signal(self, sig: int) -> list[int]:
        """Send ``sig`` to the driver process; returns its children (the Spark JVM) at that moment."""
        children = child_pids(self.process.pid)
        self.process.send_signal(sig)
        return children

    def interrupt(self, sig: int | None = None) -> None:
        """``sig`` to every process of the driver's group: SIGINT is Ctrl-C on a terminal, SIGTERM
        a service manager's stop (systemd, ``kill -- -PGID``)."""
        os.killpg(self.process.pid, sig or signal.SIGINT)

    def counter(self, name: str) -> int:
        """A counter from the process's /metrics (0 until the endpoint answers)."""
        try:
            text = self._get("/metrics")[1]
        except OSError:
            return 0
        for line in text.splitlines():
            if line.startswith(f"dedup_{name}_total "):
                return int(float(line.split()[1]))
        return 0

    def health(self) -> tuple[int, dict]:
        code, body = self._get("/health")
        return code, json.loads(body)

    def _get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def wait_for_counter(self, name: str, at_least: int, timeout: float = 400) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.counter(name)
            if value >= at_least:
                return value
            if self.process.poll() is not None:
                raise AssertionError(f"dedup exited with {self.process.returncode}:\n{self.output()[-3000:]}")
            time.sleep(0.5)
        raise AssertionError(f"{name} stayed below {at_least} for {timeout} s:\n{self.output()[-3000:]}")

    def committed(self, kind: str = "out") -> list[bytes]:
        """Every line in the sink's committed part files (``out`` or ``dlq``), all batches."""
        return [
            line
            for path in sorted((self.root / kind).glob("batch=*/part-*"))
            for line in path.read_bytes().splitlines()
            if line
        ]
