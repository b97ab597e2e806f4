"""Faults placed at each phase of one micro-batch of the Spark engine on a standalone cluster (issue 29).

Whatever part of a micro-batch Spark computes again after a process dies must give the verdicts of
the first computation. A fault that strikes at a random moment may miss the moment that matters,
so each run here places its kills, each at one phase of one batch:

* ``before-operator``: the write task of a partition starts; the operator has judged none of its rows;
* ``mid-write``: the operator judged the partition and committed its state, its records are sent in an
  open transaction (at-least-once: sent and flushed, the task not finished);
* ``after-write``: the partition's transaction committed, Spark not yet told;
* ``between-batches``: the batch committed to the checkpoint, the next not yet run;
* ``source-stage`` and ``shuffle``: unplaced, at a random moment while the batch's source stage (its
  Kafka read, parse and map output) or its operator stage (reading the shuffle, judging, writing) runs,
  as the driver's own status API reports them: an executor is killed -9 there, wherever its tasks are.
  A stage of a thousand records lasts a fraction of a second, less than the status API takes to
  show it; so the stage's first-attempt tasks are slowed by the engine's test slow-down
  (``SLOW_SETTING``, ``SlowTasks.java``) to about ``SLOW_TASK_SECONDS`` each, spread over their
  records: the kill lands somewhere in the stage's work, not at a chosen point of it.

and one target: an ``executor`` JVM (halted by the writer's own test fault at that exact point, or
killed -9 between batches), a whole ``worker`` with its executors (the task stalls at the point and
the worker is killed -9, then started again), or the ``driver`` (killed -9 at the stalled point or
between batches, then started again from its checkpoint).

The stream is in event-time order, about one event per second of event time, APP and WEB keys
repeating inside and outside their windows, ~0.2% invalid records, keyed by ``uniqueValue`` over
four partitions (``stream``; ``backlog_stream`` is the shape of the executor-loss report: 80,000
records read 4,000 a micro-batch, hostile records among them). Each run's ``read_committed`` output
and dead letters must equal the reference (the domain's core over the records in order) exactly:
nothing lost, no duplicate let through, no honest event dead-lettered ``late``, and with
exactly-once nothing doubled (at-least-once may write a replayed partition again: counted, not
wrong). The reference holds only while each partition of the input topic holds its records in the
order they were produced: the topic is read back and compared before the engine starts
(``require_produced_order``), since a producer that retries without idempotence reorders a
partition, and its engine then rightly judges the displaced records against what it already read.

Many runs, each on a fresh cluster or all on one warm cluster, from the repository root:

    .venv/bin/python -m tests.support.faults.phases --runs 42 --fresh
    .venv/bin/python -m tests.support.faults.phases --runs 42 --fresh --shape backlog --delivery at-least-once
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import signal
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from adapters.spark.output import FAULT_SETTING
from app import StreamSpec, generate
from domain import dead_letters
from tests.support.faults.harness import EngineProcess, Topics, all_pids, engine_process, in_directory
from tests.support.kafka_io import create_topics, read_topic, unique
from tests.support.partitioned import produce_keyed, spread
from tests.support.spark_jvm import with_test_jvm
from tests.support.streams import reference

PHASES = ("before-operator", "mid-write", "after-write", "between-batches", "source-stage", "shuffle")
UNPLACED = {"source-stage": "source", "shuffle": "operator"}  # phase -> the stage a random kill strikes
SLOW_SETTING = "spark.streamdedup.test.slowTasks"  # SlowTasks.java: STAGE:BATCH:MICROS a record
SLOW_TASK_SECONDS = 3.0  # an unplaced kill's stage: each first-attempt task slowed to about this long
SHUFFLE_PARTITIONS = 2
CORES = 2  # the cluster's: 2 workers of 1 core
TARGETS = ("executor", "worker", "driver")
WRITER_POINT = {"before-operator": "at-start", "mid-write": "before-commit", "after-write": "after-commit"}
PARTITIONS = 4


@dataclass(frozen=True)
class Kill:
    """One kill of ``target`` at ``phase`` of micro-batch ``batch``, at the task of state partition ``partition``."""

    target: str
    phase: str
    batch: int = 2
    partition: int = 1

    def slow_tasks(self, per_batch: int) -> str | None:
        """The test slow-down of the stage an unplaced kill strikes (``SLOW_SETTING``), or None."""
        if self.phase not in UNPLACED:
            return None
        tasks = PARTITIONS if UNPLACED[self.phase] == "source" else SHUFFLE_PARTITIONS
        micros = int(SLOW_TASK_SECONDS * 1e6 * tasks / per_batch)
        return f"{UNPLACED[self.phase]}:{self.batch}:{micros}"

    def stage_seconds(self) -> float:
        """About how long the slowed stage runs: its tasks in waves over the cluster's cores."""
        tasks = PARTITIONS if UNPLACED.get(self.phase) == "source" else SHUFFLE_PARTITIONS
        return SLOW_TASK_SECONDS * -(-tasks // CORES)

    def writer_fault(self) -> str | None:
        """The writer's test fault that halts (executor) or stalls (worker, driver) the task at the phase."""
        if self.phase not in WRITER_POINT:
            return None
        kind = "halt" if self.target == "executor" else "stall"
        return f"{kind}-{WRITER_POINT[self.phase]}:{self.batch}:{self.partition}"

    def __str__(self) -> str:
        return f"{self.target} at {self.phase} of batch {self.batch}"


@dataclass
class Outcome:
    kills: tuple[Kill, ...]  # in the order they struck
    cluster: str  # fresh or warm
    lost: int
    doubled: int
    extra: int  # events the reference drops as duplicates, let through
    wrongly_late: int
    dead_lost: int
    dead_doubled: int
    exit: int
    seconds: float
    struck: bool = True  # every fault struck where it was placed (the executor's own log says so)

    delivery: str = "exactly-once"

    @property
    def ok(self) -> bool:
        replays = (self.doubled, self.dead_doubled) if self.delivery == "exactly-once" else ()
        return (
            self.struck
            and self.exit == 0
            and not any((self.lost, self.extra, self.wrongly_late, self.dead_lost, *replays))
        )

    HEADER = (
        "| target | phase | batch | cluster | struck | lost | doubled | extra | wrongly late | dead lost | "
        "dead doubled | exit | s |"
    )

    def row(self) -> str:
        return (
            f"| {' / '.join(k.target for k in self.kills)} | {' / '.join(k.phase for k in self.kills)} | "
            f"{' / '.join(str(k.batch) for k in self.kills)} | {self.cluster} | "
            f"{'yes' if self.struck else 'NO'} | {self.lost} | {self.doubled} | "
            f"{self.extra} | {self.wrongly_late} | {self.dead_lost} | {self.dead_doubled} | {self.exit} | "
            f"{self.seconds:.0f} |"
        )


def stream(uniques: int = 4_000, seed: int = 29) -> list[bytes]:
    """Events in event-time order (0-2 s apart), repeats inside and outside the windows, invalid records."""
    records, _ = generate(StreamSpec(uniques=uniques, seed=seed, late=0))
    return records


HOSTILE = (
    '{"id": "b%d", "uniqueValue": "x", "type": "APP"}',
    "not json %d",
    '{"id": "b%d", "uniqueValue": 7, "type": "WEB", "timestamp": 1752000000}',
    '{"id": "b%d", "uniqueValue": "y", "type": "APP", "timestamp": 253402300799}',
    "[%d]",
    '\ufeff{"id": "b%d", "uniqueValue": "z", "type": "APP", "timestamp": "soon"}',
)


def backlog_stream(records: int = 80_000, seed: int = 20261126) -> list[bytes]:
    """The executor-loss report's stream: event-time order, ~1.1 s of event time per record, 30% repeats
    of one of the last 400 keys (inside and outside their windows), 0.2% hostile records (not JSON,
    missing fields, wrong types, a year-9999 time, a byte-order mark)."""
    rnd, t, live, out = random.Random(seed), 1_752_000_000, [], []
    for i in range(records):
        if rnd.random() < 0.002:
            out.append((rnd.choice(HOSTILE) % i).encode())
            continue
        t += rnd.choice((0, 0, 1, 1, 1, 2, 3))
        if live and rnd.random() < 0.3:
            kind, key, _ = rnd.choice(live)
        else:
            kind = "APP" if rnd.random() < 0.4 else "WEB"
            key = f"{rnd.getrandbits(48):012x}-{i}"
            live = [*live[-399:], (kind, key, t)]
        out.append(json.dumps({"id": f"p{i}", "uniqueValue": key, "type": kind, "timestamp": t}).encode())
    return out


def require_produced_order(bootstrap: str, topic: str, keyed) -> None:
    """Raises unless every partition of ``topic`` holds its records in the order they were produced."""
    read = [(m.partition, m.value) for m in read_topic(bootstrap, topic, committed=False)]
    produced = sorted(((p, i), value) for i, (p, _, value) in enumerate(keyed.records))
    if [value for _, value in read] != [value for _, value in produced]:
        moved = next(n for n, (a, b) in enumerate(zip(read, produced)) if a[1] != b[1])
        raise AssertionError(
            f"the input topic {topic} is not in the order it was produced (first difference at "
            f"record {moved} of partition {read[moved][0]}): the reference does not apply"
        )


class PhaseRun:
    """Runs of the engine on ``cluster`` over one stream, each with its kills (see the module docstring)."""

    def __init__(
        self,
        cluster,
        bootstrap: str,
        workdir: Path,
        records: list[bytes],
        per_batch: int = 1_000,
        say: Callable[[str], None] = print,
        timeout: float = 300,
        delivery: str = "exactly-once",
        seed: int | None = None,
    ):
        self.cluster, self.bootstrap, self.workdir, self.records = cluster, bootstrap, workdir, records
        self.per_batch, self.say, self.timeout, self.delivery = per_batch, say, timeout, delivery
        self.want = reference(records)
        self.random = random.Random(seed)
        self.ui_port = 0

    def run(self, kills: Kill | Sequence[Kill], cluster_state: str) -> Outcome:
        """One run of the engine over a topic of its own, struck by ``kills`` one after another in the
        order of their batches (each of another batch; at most one unplaced; a driver kill last, the
        engine started again holding no fault): one outcome for the whole run."""
        kills = tuple(sorted([kills] if isinstance(kills, Kill) else kills, key=lambda k: k.batch))
        slowed = [k.slow_tasks(self.per_batch) for k in kills if k.phase in UNPLACED]
        if len({k.batch for k in kills}) < len(kills) or len(slowed) > 1 or "driver" in [k.target for k in kills[:-1]]:
            raise ValueError(f"kills a run cannot place: {', '.join(map(str, kills))}")
        started = time.monotonic()
        workdir = Path(tempfile.mkdtemp(prefix="phase-", dir=self.workdir))
        topics = Topics(self.bootstrap, *(unique(f"phases-{role}") for role in ("in", "out", "dlq")))
        keyed = spread(self.records, PARTITIONS)
        produce_keyed(self.bootstrap, topics.input, keyed)
        require_produced_order(self.bootstrap, topics.input, keyed)
        create_topics(self.bootstrap, topics.output, topics.dead_letters)
        self.earlier = set(self.executor_logs())  # of the applications before this run
        self.stalls_struck: set[Path] = set()  # the logs of the executors whose stalled task a kill answered
        faults = ",".join(f for f in (k.writer_fault() for k in kills) if f) or None
        engine = self.engine(topics, workdir, faults, slowed[0] if slowed else None)
        engine.start()
        for kill in kills:
            engine = self.strike(kill, self.await_phase(kill, engine, workdir), topics, workdir)
        code = engine.proc.wait(self.timeout)
        outcome = self.verify(kills, cluster_state, topics, code, time.monotonic() - started)
        outcome.struck = all(self.struck(kill, workdir) for kill in kills)
        self.say(
            f"{', '.join(map(str, kills))} on a {cluster_state} cluster: {'ok' if outcome.ok else 'WRONG'} "
            f"{outcome.row()} (engine log {workdir / 'engine.log'})"
        )
        return outcome

    def await_phase(self, kill: Kill, engine: EngineProcess, workdir: Path) -> EngineProcess:
        """Returns ``engine`` once the run is at ``kill``'s phase (an executor halted by the writer's own
        fault: at once)."""
        if kill.phase == "between-batches":
            self.wait((workdir / "checkpoint" / "commits" / str(kill.batch)).exists, engine, "the commit")
        elif kill.phase in UNPLACED:
            self.wait(
                lambda: self.running_stage(kill),
                engine,
                f"the {UNPLACED[kill.phase]} stage of batch {kill.batch}",
                interval=0.1,
            )
            time.sleep(self.random.uniform(0, 0.8 * kill.stage_seconds()))  # somewhere in the stage, unplaced
        elif kill.target != "executor":
            self.wait(self.stalled_executor, engine, f"the stalled task of batch {kill.batch}")
        return engine

    def strike(self, kill: Kill, engine: EngineProcess, topics: Topics, workdir: Path) -> EngineProcess:
        """Kill the target now (an executor at a writer phase halts by itself); the engine that finishes the run."""
        if kill.target == "executor" and kill.phase not in WRITER_POINT:
            os.kill(self.random.choice(self.cluster.executor_pids()), signal.SIGKILL)
        elif kill.target == "worker":
            self.kill_worker(self.stalled_executor() if kill.phase in WRITER_POINT else None)
        elif kill.target == "driver":
            self.stalls_struck.add(self.stalled_executor())
            engine.kill9()
            engine.proc.wait(30)
            engine = self.engine(topics, workdir, None)
            engine.start()
        return engine

    def engine(self, topics: Topics, workdir: Path, fault: str | None, slow: str | None = None) -> EngineProcess:
        engine = engine_process(topics, workdir, self.per_batch, self.delivery, bounded=True, master=self.cluster.url)
        self.ui_port = free_port()
        (workdir / "events").mkdir(exist_ok=True)
        conf = {
            "spark.sql.shuffle.partitions": str(SHUFFLE_PARTITIONS),
            "spark.ui.enabled": "true",
            "spark.ui.port": str(self.ui_port),
            "spark.eventLog.enabled": "true",
            "spark.eventLog.compress": "false",
            "spark.eventLog.dir": (workdir / "events").as_uri(),
            **({FAULT_SETTING: fault} if fault else {}),
            **({SLOW_SETTING: slow} if slow else {}),
        }
        engine.env.update(DEDUP_SPARK__CONF=with_test_jvm(conf))
        return engine

    def running_stage(self, kill: Kill) -> bool:
        """Whether the stage ``kill`` strikes runs now (the source stage or the operator stage of its
        batch), as the driver's status API shows it."""
        try:
            apps = _get(f"http://127.0.0.1:{self.ui_port}/api/v1/applications")
            base = f"http://127.0.0.1:{self.ui_port}/api/v1/applications/{apps[0]['id']}"
            jobs = [
                j
                for j in _get(f"{base}/jobs?status=running")
                if f"batch = {kill.batch}" in (j.get("description") or "")
            ]
            if not jobs:
                return False
            stages = sorted(jobs[0]["stageIds"])
            wanted = stages[0] if UNPLACED[kill.phase] == "source" else stages[-1]
            return wanted in {s["stageId"] for s in _get(f"{base}/stages?status=active")}
        except (OSError, ValueError, KeyError, IndexError):
            return False

    def struck(self, kill: Kill, workdir: Path) -> bool:
        """Whether this run's executors logged the writer fault at its point (a kill between batches: done
        here); for an unplaced kill, whether Spark lost work of the batch to it (``lost_work``)."""
        if kill.phase in UNPLACED:
            return lost_work(workdir / "events", kill.batch)
        if kill.phase not in WRITER_POINT:
            return True
        said = (
            f"streamdedup test fault: {'halting the JVM' if kill.target == 'executor' else 'task stalls'} "
            f"{WRITER_POINT[kill.phase]}"
        )
        return any(
            said in path.read_text(errors="replace") for path in self.executor_logs() if path not in self.earlier
        )

    def executor_logs(self) -> list[Path]:
        """Every executor's stderr on the cluster's workers (``work/APP/N/stderr``)."""
        return [path for worker in self.cluster.workers for path in (worker.workdir / "work").glob("*/*/stderr")]

    def stalled_executor(self) -> Path | None:
        """The stderr of this run's executor whose task stalls at a fault no kill answered yet, once it does."""
        return next(
            (
                path
                for path in self.executor_logs()
                if path not in self.earlier
                and path not in self.stalls_struck
                and "streamdedup test fault: task stalls" in path.read_text(errors="replace")
            ),
            None,
        )

    def kill_worker(self, stderr: Path | None) -> None:
        """kill -9 of the worker running the stalled task (or the first) with its executors; started again."""
        worker = next(
            (w for w in self.cluster.workers if stderr is not None and stderr.is_relative_to(w.workdir)),
            self.cluster.workers[0],
        )
        self.stalls_struck.add(stderr)
        worker.kill()
        orphans = [
            pid
            for pid in all_pids()
            if "CoarseGrainedExecutorBackend" in _cmdline(pid) and in_directory(pid, worker.workdir)
        ]
        for pid in set(worker.executor_pids() + orphans):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(3)
        worker.start()

    def wait(self, condition: Callable[[], object], engine: EngineProcess, what: str, interval: float = 0.5) -> None:
        deadline = time.monotonic() + self.timeout
        while not condition():
            if time.monotonic() > deadline or not engine.alive():
                raise AssertionError(
                    f"{what} did not come (engine {'alive' if engine.alive() else 'exited'}; log {engine.log})"
                )
            time.sleep(interval)

    def verify(self, kills: tuple[Kill, ...], cluster_state: str, topics: Topics, code: int, seconds: float) -> Outcome:
        out = Counter(m.value for m in read_topic(self.bootstrap, topics.output))
        letters = [
            dead_letters.from_headers(m.value, m.key, m.raw_headers)
            for m in read_topic(self.bootstrap, topics.dead_letters)
        ]
        want, want_dead = Counter(self.want.emitted), Counter(self.want.dead_letters)
        dead = Counter(d.record.value for d in letters)
        return Outcome(
            kills,
            cluster_state,
            delivery=self.delivery,
            lost=sum((want - out).values()),
            doubled=sum(n - 1 for value, n in out.items() if value in want and n > 1),
            extra=sum(n for value, n in out.items() if value not in want),
            wrongly_late=sum(1 for d in letters if d.reason == "late" and d.record.value not in want_dead),
            dead_lost=sum((want_dead - dead).values()),
            dead_doubled=sum((dead - want_dead).values()),
            exit=code,
            seconds=seconds,
        )


def lost_work(events: Path, batch: int) -> bool:
    """Whether Spark's event logs under ``events`` show a task of ``batch``'s job failed, or one of its
    stages submitted again (an executor's work or its shuffle output lost)."""
    jobs, failed = {}, False
    for path in events.rglob("*"):
        if not path.is_file() or path.name.startswith("."):
            continue
        for line in path.read_text(errors="replace").splitlines():
            event = json.loads(line) if line.startswith("{") else {}
            kind = event.get("Event")
            if kind == "SparkListenerJobStart":
                description = event.get("Properties", {}).get("spark.job.description") or ""
                if f"batch = {batch}" in description:
                    jobs.update(dict.fromkeys(event["Stage IDs"]))
            elif kind == "SparkListenerTaskEnd" and event["Stage ID"] in jobs:
                failed |= event["Task End Reason"]["Reason"] != "Success" or event["Stage Attempt ID"] > 0
    return failed


def _get(url: str):
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.loads(answer.read())


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def plan(runs: int) -> list[Kill]:
    """``runs`` kills cycling through every (target, phase) (the unplaced phases with executors only),
    batches 0 to 2 (0: the first micro-batch of a new checkpoint), partitions 0 and 1."""
    pairs = [(t, p) for t, p in itertools.product(TARGETS, PHASES) if p not in UNPLACED or t == "executor"]
    return [
        Kill(target, phase, batch=i % 3, partition=i % 2)
        for i, (target, phase) in zip(range(runs), itertools.cycle(pairs))
    ]


def main(argv: list[str] | None = None) -> int:
    from deploy.local.services import KafkaBroker
    from deploy.local.services.spark_cluster import SparkCluster

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=len(TARGETS) * len(PHASES))
    parser.add_argument("--fresh", action="store_true", help="a newly started cluster for every run")
    parser.add_argument("--uniques", type=int, default=4_000, help="the generated stream's unique events")
    parser.add_argument(
        "--shape",
        choices=("generated", "backlog"),
        default="generated",
        help="backlog: the executor-loss report's stream (--records, 4,000 a micro-batch)",
    )
    parser.add_argument("--records", type=int, default=80_000, help="the backlog stream's records")
    parser.add_argument("--per-batch", type=int)
    parser.add_argument("--delivery", choices=("exactly-once", "at-least-once"), default="exactly-once")
    parser.add_argument(
        "--only",
        help="run only the kills whose description contains each of these, comma-separated (e.g. 'driver,of batch 0')",
    )
    parser.add_argument("--seed", type=int, default=20261126, help="the backlog stream's and the random kills' seed")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="phases-"))
    broker = KafkaBroker(work / "kafka").start()
    backlog = args.shape == "backlog"
    records = backlog_stream(args.records, args.seed) if backlog else stream(args.uniques)
    per_batch = args.per_batch or (4_000 if backlog else 1_000)
    kills = [k for k in plan(args.runs) if args.only is None or all(part in str(k) for part in args.only.split(","))]
    outcomes, cluster = [], None
    try:
        for n, kill in enumerate(kills):
            if cluster is None or args.fresh:
                if cluster is not None:
                    cluster.stop()
                cluster, state = SparkCluster(work / f"cluster-{n}", workers=2, cores=1).start(), "fresh"
            else:
                cluster.wait_idle()
                state = "warm"
            runs = PhaseRun(
                cluster,
                broker.bootstrap,
                work,
                records,
                per_batch,
                delivery=args.delivery,
                seed=args.seed + n,
                timeout=900 if backlog else 300,
            )
            outcomes.append(runs.run(kill, state))
    finally:
        if cluster is not None:
            cluster.stop()
        broker.stop()
    print(
        f"\n{len(records):,} records a run ({args.shape}, {per_batch:,} a micro-batch), {args.delivery}\n\n"
        f"{Outcome.HEADER}\n|{'---|' * 13}"
    )
    print("\n".join(o.row() for o in outcomes))
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
