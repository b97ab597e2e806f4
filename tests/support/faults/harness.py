"""Fault runs of the Spark engine, in the style of Kafka Streams' EOS system tests.

A generator writes events with known duplicates and bad records to the input topic, keyed
by ``uniqueValue`` over ``partitions`` partitions as producers write them. The Spark engine
runs as ``dedup run --engine spark`` in a process group of its own, in local mode or on a
standalone cluster (``FaultPlan.master``); while it works, the faults of the plan strike at
random points: the driver (the Python process and its JVM) killed with SIGKILL and started
again from its checkpoint, the Kafka broker restarted, Redis restarted and, on a cluster, an
executor or a whole worker killed with SIGKILL in the middle of a micro-batch (the worker is
started again a few seconds later). Progress is the input offsets of the last micro-batch
the checkpoint committed.

The verifier reads the outputs as a ``read_committed`` consumer and checks every expected
unique event present and no other event, every bad record in the dead-letter topic exactly
once, and with exactly-once delivery no unique event twice and ``in = out + duplicates +
dead_lettered (+ skipped)`` from the committed markers' counts (the accounting of what was
really committed); with at-least-once, copies are counted and the last run's
``--summary-json`` must balance. ``Report.lines()`` prints the counts it checked.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from adapters.spark.checkpoint import IDENTITY
from adapters.spark.output import control_topic_for, partition_id
from app import StreamSpec, generate
from deploy.local.services.process import pid_cmdline
from deploy.local.services.spark_cluster import EXECUTOR_CLASS
from domain import dead_letters as dead_letter_codec
from tests.support.faults.injection import kill_9, outage
from tests.support.kafka_io import create_topics, read_topic
from tests.support.partitioned import produce_keyed, spread
from tests.support.streams import reference

ROOT = Path(__file__).resolve().parents[3]
ACCOUNTED = ("in", "out", "duplicates", "dead_lettered", "skipped")


@dataclass
class FaultPlan:
    uniques: int = 20_000
    per_batch: int = 2_000
    kills: int = 3
    restart_broker: bool = True
    restart_redis: bool = False
    seed: int = 11
    timeout: float = 240.0  # seconds without reaching the next step
    partitions: int = 1  # of the input topic, keyed by uniqueValue
    delivery: str = "exactly-once"
    master: str = "local[2]"
    executor_kills: int = 0  # on a standalone cluster (FaultRun's cluster)
    worker_kills: int = 0

    @property
    def exactly_once(self) -> bool:
        return self.delivery == "exactly-once"


@dataclass
class EngineProcess:
    """``dedup run --engine spark`` in its own process group (driver = Python + its JVM)."""

    args: list[str]
    env: dict[str, str]
    log: Path
    proc: subprocess.Popen | None = None

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [str(ROOT / ".venv" / "bin" / "dedup"), "run", *self.args],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=ROOT,
            )

    def kill9(self) -> None:
        """kill -9 of the whole driver: the Python process and the JVM it launched."""
        kill_9(self.proc, group=True)

    def stop(self, timeout: float = 120) -> int:
        """SIGTERM: the running micro-batch finishes, the query stops, the summary is written."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            return -9

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class Topics:
    bootstrap: str
    input: str = "events"
    output: str = "unique"
    dead_letters: str = "dead"

    @property
    def commits(self) -> str:
        return control_topic_for(self.output)

    def uri(self, topic: str) -> str:
        return f"kafka://{self.bootstrap}/{topic}"


def committed_counts(topics: Topics, transactional_id: str) -> Counter:
    """The summed counts of every committed micro-batch (from its partitions' commit markers)."""
    totals = Counter()
    for message in read_topic(topics.bootstrap, topics.commits, timeout=20):
        if message.key.startswith(partition_id(transactional_id, "").encode()):
            totals.update(json.loads(message.value)["counts"])
    return totals


@dataclass
class Report:
    records: int
    expected_unique: int
    expected_dead: int
    read_unique: int = 0
    lost: int = 0
    duplicated: int = 0
    unexpected: int = 0
    read_dead: int = 0
    dead_lost: int = 0
    dead_duplicated: int = 0
    committed: dict[str, int] = field(default_factory=dict)
    last_run: dict[str, int] = field(default_factory=dict)
    faults: list[str] = field(default_factory=list)
    seconds: float = 0.0

    exactly_once: bool = True

    @property
    def balanced(self) -> bool:
        """Exactly-once: the committed markers account for every record; at-least-once: the last
        run's summary balances."""
        if not self.exactly_once:
            run = self.last_run
            return bool(run) and run.get("in") == sum(run.get(k, 0) for k in ACCOUNTED[1:])
        c = self.committed
        return c.get("in") == self.records == sum(c.get(k, 0) for k in ACCOUNTED[1:])

    @property
    def ok(self) -> bool:
        copies_ok = not (self.duplicated or self.dead_duplicated) or not self.exactly_once
        committed_ok = not self.exactly_once or self.committed.get("out") == self.expected_unique
        return self.balanced and copies_ok and committed_ok and not (self.lost or self.unexpected or self.dead_lost)

    def lines(self) -> list[str]:
        c = self.committed
        return [
            f"faults: {', '.join(self.faults)}",
            f"records in the input topic: {self.records:,}",
            (
                f"unique events expected {self.expected_unique:,}, read (read_committed) {self.read_unique:,}: "
                f"lost {self.lost}, duplicated {self.duplicated}, unexpected {self.unexpected}"
            ),
            (
                f"dead letters expected {self.expected_dead:,}, read {self.read_dead:,}: "
                f"lost {self.dead_lost}, duplicated {self.dead_duplicated}"
            ),
            (
                "committed accounting: " + ", ".join(f"{k}={c.get(k, 0):,}" for k in ACCOUNTED)
                if self.exactly_once
                else "at-least-once: copies of unique events are allowed; the last run's summary must balance"
            )
            + f" -> {'balanced' if self.balanced else 'UNBALANCED'}",
            "last run's summary: " + ", ".join(f"{k}={v:,}" for k, v in self.last_run.items()),
            f"verdict: {'OK' if self.ok else 'FAILED'} in {self.seconds:.0f}s",
        ]


def verify(topics: Topics, records: list[bytes], transactional_id: str | None) -> Report:
    want = reference(records)
    unique = Counter(m.value for m in read_topic(topics.bootstrap, topics.output, timeout=120))
    dead = Counter(
        dead_letter_codec.from_headers(m.value, m.key, m.raw_headers).record.value
        for m in read_topic(topics.bootstrap, topics.dead_letters, timeout=60)
    )
    expected, expected_dead = Counter(want.emitted), Counter(want.dead_letters)
    return Report(
        len(records),
        sum(expected.values()),
        sum(expected_dead.values()),
        read_unique=sum(unique.values()),
        lost=sum((expected - unique).values()),
        duplicated=sum(n - 1 for v, n in unique.items() if v in expected and n > expected[v]),
        unexpected=sum(n for v, n in unique.items() if v not in expected),
        read_dead=sum(dead.values()),
        dead_lost=sum((expected_dead - dead).values()),
        dead_duplicated=sum((dead - expected_dead).values()),
        committed=dict(committed_counts(topics, transactional_id)) if transactional_id else {},
        exactly_once=transactional_id is not None,
    )


class FaultRun:
    """One run of the plan against a broker (and Redis) this run may restart."""

    def __init__(
        self, plan: FaultPlan, broker, workdir: Path, redis=None, say: Callable[[str], None] = print, cluster=None
    ):
        self.plan, self.broker, self.redis, self.workdir, self.say = plan, broker, redis, workdir, say
        self.cluster = cluster
        self.topics = Topics(broker.bootstrap)
        self.checkpoint = workdir / "checkpoint"  # engine_process puts it there
        self.rng = random.Random(plan.seed)
        self.faults: list[str] = []

    def run(self) -> Report:
        started = time.monotonic()
        records = self.preload()
        engine = self.engine()
        engine.start()
        reached = 0
        for fault, at in self.schedule(len(records)):
            self.wait_for(
                lambda at=at, reached=reached: self.progress() >= min(max(at, reached + 1), len(records)), engine
            )
            reached = self.progress()
            time.sleep(self.rng.uniform(0, 2))
            fault(engine)
        self.wait_for(lambda: self.progress() >= len(records), engine)
        code = engine.stop()
        report = verify(self.topics, records, self.tid() if self.plan.exactly_once else None)
        report.last_run = self.summary() | {"exit": code}
        report.faults, report.seconds = self.faults, time.monotonic() - started
        return report

    def preload(self) -> list[bytes]:
        # no late events: whether one is late depends on micro-batch boundaries (docs/design/spark.md,
        # deviation 1), which the verifier's reference does not model; the bad records are the invalid ones
        records, _ = generate(StreamSpec(uniques=self.plan.uniques, seed=self.plan.seed, late=0))
        create_topics(
            self.topics.bootstrap, self.topics.output, self.topics.dead_letters, partitions=self.plan.partitions
        )
        produce_keyed(self.topics.bootstrap, self.topics.input, spread(records, self.plan.partitions))
        self.say(
            f"preloaded {len(records):,} records ({self.plan.uniques:,} unique events) "
            f"over {self.plan.partitions} partition(s)"
        )
        return records

    def schedule(self, total: int) -> list[tuple[Callable, int]]:
        """Faults at random points of the run, in order of progress (records committed)."""
        faults = [self.kill] * self.plan.kills
        faults += [self.restart_broker] * self.plan.restart_broker + [self.restart_redis] * self.plan.restart_redis
        faults += [self.kill_executor] * self.plan.executor_kills + [self.kill_worker] * self.plan.worker_kills
        self.rng.shuffle(faults)
        slots = len(faults) + 1
        points = [int(total * self.rng.uniform((i + 0.3) / slots, (i + 0.9) / slots)) for i in range(len(faults))]
        return list(zip(faults, points))

    def kill(self, engine: EngineProcess) -> None:
        engine.kill9()
        self.faults.append(f"kill -9 at {self.progress_text()}")
        self.say(f"kill -9 of the driver at {self.progress_text()}; restarting it from the checkpoint")
        engine.start()

    def kill_executor(self, engine: EngineProcess) -> None:
        """kill -9 of one executor JVM while it runs tasks: Spark runs them again on another
        executor (the worker starts a new one)."""
        pid = self.busy(self.cluster.executor_pids)
        os.kill(pid, signal.SIGKILL)
        self.faults.append(f"executor kill -9 at {self.progress_text()}")
        self.say(f"kill -9 of executor {pid} at {self.progress_text()}")

    def kill_worker(self, engine: EngineProcess) -> None:
        """kill -9 of a worker JVM with its executors; the worker is started again 5 s later."""
        worker = self.cluster.workers[self.rng.randrange(len(self.cluster.workers))]
        self.busy(worker.executor_pids)
        worker.kill()
        for pid in worker.executor_pids() + self._orphans(worker):
            os.kill(pid, signal.SIGKILL)
        self.faults.append(f"worker kill -9 at {self.progress_text()}")
        self.say(f"kill -9 of {worker.workdir.name} at {self.progress_text()}; starting it again in 5 s")
        time.sleep(5)
        worker.start()

    def _orphans(self, worker) -> list[int]:
        """Executors the killed worker left (their parent gone): they die once they notice, or here."""
        return [pid for pid in all_pids() if EXECUTOR_CLASS in pid_cmdline(pid) and in_directory(pid, worker.workdir)]

    def busy(self, executors: Callable[[], list[int]]) -> int:
        """An executor pid once there is one (waiting up to the plan's timeout), picked at random."""
        started = time.monotonic()
        while not (pids := executors()):
            if time.monotonic() - started > self.plan.timeout:
                raise TimeoutError("no executor to kill")
            time.sleep(0.5)
        return self.rng.choice(pids)

    def restart_broker(self, engine: EngineProcess) -> None:
        self.say(f"restarting the Kafka broker at {self.progress_text()}")
        outage(self.broker, crash=True)
        self.faults.append(f"broker kill -9 + restart at {self.progress_text()}")

    def restart_redis(self, engine: EngineProcess) -> None:
        self.say(f"restarting Redis at {self.progress_text()}")
        outage(self.redis)
        self.faults.append(f"redis restart at {self.progress_text()}")

    def progress(self) -> int:
        """Records read by the micro-batches the checkpoint committed (0 before the first)."""
        return checkpoint_progress(self.checkpoint, self.topics.input)

    def tid(self) -> str:
        """The engine's transactional id, from the identity it keeps in its checkpoint (after its first start)."""
        return json.loads((self.checkpoint / "streamdedup" / IDENTITY).read_text())["transactional_id"]

    def progress_text(self) -> str:
        return f"{max(self.progress(), 0):,} records committed"

    def wait_for(self, condition: Callable[[], bool], engine: EngineProcess) -> None:
        started = time.monotonic()
        while not condition():
            if time.monotonic() - started > self.plan.timeout:
                raise TimeoutError(
                    f"no progress to the next step in {self.plan.timeout:.0f}s "
                    f"({self.progress_text()}); engine log: {self.workdir / 'engine.log'}"
                )
            if not engine.alive():
                raise RuntimeError(
                    f"the engine exited with {engine.proc.returncode}; log: {self.workdir / 'engine.log'}"
                )
            time.sleep(1)

    def engine(self) -> EngineProcess:
        return engine_process(
            self.topics,
            self.workdir,
            self.plan.per_batch,
            self.plan.delivery,
            self.redis.url if self.redis is not None else None,
            master=self.plan.master,
        )

    def summary(self) -> dict[str, int]:
        path = self.workdir / "summary.json"
        return json.loads(path.read_text()) if path.exists() else {}


def checkpoint_progress(checkpoint: Path, topic: str) -> int:
    """The input offsets (summed over partitions) up to which the checkpoint's last committed
    micro-batch read: the records the engine has finished with."""
    commits = [int(p.name) for p in (checkpoint / "commits").glob("[0-9]*") if p.name.isdigit()]
    if not commits:
        return 0
    try:
        offsets = json.loads((checkpoint / "offsets" / str(max(commits))).read_text().splitlines()[2])
    except (OSError, IndexError, ValueError):
        return -1
    return sum(offsets.get(topic, {}).values())


def all_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def in_directory(pid: int, directory: Path) -> bool:
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd")).is_relative_to(directory)
    except OSError:
        return False


def engine_process(
    topics: Topics,
    workdir: Path,
    per_batch: int,
    delivery: str,
    state: str | None = None,
    bounded: bool = False,
    master: str = "local[2]",
) -> EngineProcess:
    """The engine over ``topics`` with its checkpoint, log and summary under ``workdir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    args = [
        "--engine",
        "spark",
        "--source",
        topics.uri(topics.input),
        "--sink",
        topics.uri(topics.output),
        "--dlq",
        topics.uri(topics.dead_letters),
        "--no-progress",
        "--summary-json",
        str(workdir / "summary.json"),
    ]
    if state is not None:
        args += ["--state", state]
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "PYSPARK_PYTHON": sys.executable,
        "DEDUP_KAFKA__DELIVERY": delivery,
        "DEDUP_SPARK__CHECKPOINT": str(workdir / "checkpoint"),
        "DEDUP_SPARK__MASTER": master,
        "DEDUP_SPARK__MAX_OFFSETS_PER_TRIGGER": str(per_batch),
        "DEDUP_SPARK__TRIGGER": "0 seconds",
        "DEDUP_SPARK__AVAILABLE_NOW": str(bounded).lower(),
        "DEDUP_SPARK__RESTART": "fixed-delay(attempts=30,delay=2)",
        "DEDUP_SPARK__LEASE_TIMEOUT": "10s",  # a killed driver's restart waits for its lease to expire
        "DEDUP_POLICIES__TRANSIENT": "retry(attempts=8,backoff=exponential,delay=0.5,max_delay=8)>fail",
    }
    return EngineProcess(args, env, workdir / "engine.log")


def timed_run(topics: Topics, workdir: Path, per_batch: int, delivery: str) -> dict:
    """A bounded run over the whole input topic: wall seconds (JVM start included) and its summary."""
    create_topics(topics.bootstrap, topics.output, topics.dead_letters)
    engine = engine_process(topics, workdir, per_batch, delivery, bounded=True)
    started = time.monotonic()
    engine.start()
    code = engine.proc.wait()
    seconds = time.monotonic() - started
    summary = json.loads((workdir / "summary.json").read_text()) if code == 0 else {}
    return {
        "delivery": delivery,
        "exit": code,
        "seconds": round(seconds, 1),
        "summary": summary,
        "events_per_second": round(summary.get("in", 0) / seconds),
    }
