"""Faults placed at each phase of one micro-batch of the Spark engine on a standalone cluster (issue 29).

Whatever part of a micro-batch Spark computes again after a process dies must give the verdicts of
the first computation. A fault that strikes at a random moment may miss the moment that matters,
so each run here places one kill at one phase of one batch:

* ``before-operator``: the write task of a partition starts; the operator has judged none of its rows;
* ``mid-write``: the operator judged the partition and committed its state, its records are sent in an
  open transaction;
* ``after-write``: the partition's transaction committed, Spark not yet told;
* ``between-batches``: the batch committed to the checkpoint, the next not yet run.

and one target: an ``executor`` JVM (halted by the writer's own test fault at that exact point, or
killed -9 between batches), a whole ``worker`` with its executors (the task stalls at the point and
the worker is killed -9, then started again), or the ``driver`` (killed -9 at the stalled point or
between batches, then started again from its checkpoint).

The stream is in event-time order, about one event per second of event time, APP and WEB keys
repeating inside and outside their windows, ~0.2% invalid records, keyed by ``uniqueValue`` over
four partitions; exactly-once output. Each run's ``read_committed`` output and dead letters must
equal the reference (the domain's core over the records in order) exactly: nothing lost, nothing
doubled, no duplicate let through, no honest event dead-lettered ``late``.

Many runs, each on a fresh cluster or all on one warm cluster, from the repository root:

    .venv/bin/python -m tests.faults.phases --runs 20 --fresh
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from adapters.spark.output.executor_writer import FAULT_SETTING
from app.generator import StreamSpec, generate
from domain.dead_letters import from_headers
from tests.faults.harness import EngineProcess, Topics, all_pids, engine_process, in_directory
from tests.integration.kafka_io import create_topics, read_topic, unique
from tests.integration.partitioned import produce_keyed, spread
from tests.integration.streams import reference

PHASES = ("before-operator", "mid-write", "after-write", "between-batches")
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

    def writer_fault(self) -> str | None:
        """The writer's test fault that halts (executor) or stalls (worker, driver) the task at the phase."""
        if self.phase == "between-batches":
            return None
        kind = "halt" if self.target == "executor" else "stall"
        return f"{kind}-{WRITER_POINT[self.phase]}:{self.batch}:{self.partition}"

    def __str__(self) -> str:
        return f"{self.target} at {self.phase} of batch {self.batch}"


@dataclass
class Outcome:
    kill: Kill
    cluster: str  # fresh or warm
    lost: int
    doubled: int
    extra: int  # events the reference drops as duplicates, let through
    wrongly_late: int
    dead_lost: int
    dead_doubled: int
    exit: int
    seconds: float
    struck: bool = True  # the fault struck where it was placed (the executor's own log says so)

    @property
    def ok(self) -> bool:
        return self.struck and self.exit == 0 and not any((self.lost, self.doubled, self.extra, self.wrongly_late, self.dead_lost,
                                           self.dead_doubled))

    HEADER = ("| target | phase | batch | cluster | struck | lost | doubled | extra | wrongly late | dead lost | "
              "dead doubled | exit | s |")

    def row(self) -> str:
        return (f"| {self.kill.target} | {self.kill.phase} | {self.kill.batch} | {self.cluster} | "
                f"{'yes' if self.struck else 'NO'} | {self.lost} | {self.doubled} | "
                f"{self.extra} | {self.wrongly_late} | {self.dead_lost} | {self.dead_doubled} | {self.exit} | "
                f"{self.seconds:.0f} |")


def stream(uniques: int = 4_000, seed: int = 29) -> list[bytes]:
    """Events in event-time order (0-2 s apart), repeats inside and outside the windows, invalid records."""
    records, _ = generate(StreamSpec(uniques=uniques, seed=seed, late=0))
    return records


class PhaseRun:
    """Runs of the engine on ``cluster`` over one stream, each with one kill (see the module docstring)."""

    def __init__(self, cluster, bootstrap: str, workdir: Path, records: list[bytes], per_batch: int = 1_000,
                 say: Callable[[str], None] = print, timeout: float = 300):
        self.cluster, self.bootstrap, self.workdir, self.records = cluster, bootstrap, workdir, records
        self.per_batch, self.say, self.timeout = per_batch, say, timeout
        self.want = reference(records)

    def run(self, kill: Kill, cluster_state: str) -> Outcome:
        started = time.monotonic()
        workdir = Path(tempfile.mkdtemp(prefix="phase-", dir=self.workdir))
        topics = Topics(self.bootstrap, *(unique(f"phases-{role}") for role in ("in", "out", "dlq")))
        produce_keyed(self.bootstrap, topics.input, spread(self.records, PARTITIONS))
        create_topics(self.bootstrap, topics.output, topics.dead_letters)
        self.earlier = set(self.executor_logs())  # of the applications before this run
        engine = self.engine(topics, workdir, kill.writer_fault())
        engine.start()
        if kill.phase == "between-batches":
            self.wait(lambda: (workdir / "checkpoint" / "commits" / str(kill.batch)).exists(), engine, "the commit")
        elif kill.target != "executor":
            self.wait(self.stalled_executor, engine, "the stalled task")
        engine = self.strike(kill, engine, topics, workdir)
        code = engine.proc.wait(self.timeout)
        outcome = self.verify(kill, cluster_state, topics, code, time.monotonic() - started)
        outcome.struck = self.struck(kill)
        self.say(f"{kill} on a {cluster_state} cluster: {'ok' if outcome.ok else 'WRONG'} {outcome.row()}"
                 f" (engine log {workdir / 'engine.log'})")
        return outcome

    def strike(self, kill: Kill, engine: EngineProcess, topics: Topics, workdir: Path) -> EngineProcess:
        """Kill the target now (an executor at a writer phase halts by itself); the engine that finishes the run."""
        if kill.target == "executor" and kill.phase == "between-batches":
            os.kill(self.cluster.executor_pids()[0], signal.SIGKILL)
        elif kill.target == "worker":
            self.kill_worker(self.stalled_executor() if kill.phase != "between-batches" else None)
        elif kill.target == "driver":
            engine.kill9()
            engine.proc.wait(30)
            engine = self.engine(topics, workdir, None)
            engine.start()
        return engine

    def engine(self, topics: Topics, workdir: Path, fault: str | None) -> EngineProcess:
        engine = engine_process(topics, workdir, self.per_batch, "exactly-once", bounded=True, master=self.cluster.url)
        conf = {"spark.sql.shuffle.partitions": "2", **({FAULT_SETTING: fault} if fault else {})}
        engine.env.update(DEDUP_SPARK__CONF=json.dumps(conf))
        return engine

    def struck(self, kill: Kill) -> bool:
        """Whether this run's executors logged the writer fault at its point (a kill between batches: done here)."""
        if kill.phase == "between-batches":
            return True
        said = f"streamdedup test fault: {'halting the JVM' if kill.target == 'executor' else 'task stalls'} " \
               f"{WRITER_POINT[kill.phase]}"
        return any(said in path.read_text(errors="replace") for path in self.executor_logs() if path not in self.earlier)

    def executor_logs(self) -> list[Path]:
        """Every executor's stderr on the cluster's workers (``work/APP/N/stderr``)."""
        return [path for worker in self.cluster.workers for path in (worker.workdir / "work").glob("*/*/stderr")]

    def stalled_executor(self) -> Path | None:
        """The stderr of this run's executor whose task stalls at the fault, once it does."""
        return next((path for path in self.executor_logs() if path not in self.earlier
                     and "streamdedup test fault: task stalls" in path.read_text(errors="replace")), None)

    def kill_worker(self, stderr: Path | None) -> None:
        """kill -9 of the worker running the stalled task (or the first) with its executors; started again."""
        worker = next((w for w in self.cluster.workers if stderr is not None and stderr.is_relative_to(w.workdir)),
                      self.cluster.workers[0])
        worker.kill()
        orphans = [pid for pid in all_pids() if "CoarseGrainedExecutorBackend" in _cmdline(pid)
                   and in_directory(pid, worker.workdir)]
        for pid in set(worker.executor_pids() + orphans):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(3)
        worker.start()

    def wait(self, condition: Callable[[], object], engine: EngineProcess, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not condition():
            if time.monotonic() > deadline or not engine.alive():
                raise AssertionError(f"{what} did not come (engine {'alive' if engine.alive() else 'exited'}; "
                                     f"log {engine.log})")
            time.sleep(0.5)

    def verify(self, kill: Kill, cluster_state: str, topics: Topics, code: int, seconds: float) -> Outcome:
        out = Counter(m.value for m in read_topic(self.bootstrap, topics.output))
        letters = [from_headers(m.value, m.key, m.raw_headers) for m in read_topic(self.bootstrap, topics.dead_letters)]
        want, want_dead = Counter(self.want.emitted), Counter(self.want.dead_letters)
        dead = Counter(d.record.value for d in letters)
        return Outcome(kill, cluster_state, lost=sum((want - out).values()),
                       doubled=sum(n - 1 for value, n in out.items() if value in want and n > 1),
                       extra=sum(n for value, n in out.items() if value not in want),
                       wrongly_late=sum(1 for d in letters if d.reason == "late" and d.record.value not in want_dead),
                       dead_lost=sum((want_dead - dead).values()), dead_doubled=sum((dead - want_dead).values()),
                       exit=code, seconds=seconds)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def plan(runs: int) -> list[Kill]:
    """``runs`` kills cycling through every (target, phase), batches 1 to 3, partitions 0 and 1."""
    pairs = list(itertools.product(TARGETS, PHASES))
    return [Kill(target, phase, batch=1 + i % 3, partition=i % 2)
            for i, (target, phase) in zip(range(runs), itertools.cycle(pairs))]


def main(argv: list[str] | None = None) -> int:
    from deploy.local.services import KafkaBroker
    from deploy.local.services.spark_cluster import SparkCluster

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=len(TARGETS) * len(PHASES))
    parser.add_argument("--fresh", action="store_true", help="a newly started cluster for every run")
    parser.add_argument("--uniques", type=int, default=4_000)
    parser.add_argument("--per-batch", type=int, default=1_000)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="phases-"))
    broker = KafkaBroker(work / "kafka").start()
    records, outcomes, cluster = stream(args.uniques), [], None
    try:
        for n, kill in enumerate(plan(args.runs)):
            if cluster is None or args.fresh:
                if cluster is not None:
                    cluster.stop()
                cluster, state = SparkCluster(work / f"cluster-{n}", workers=2, cores=1).start(), "fresh"
            else:
                cluster.wait_idle()
                state = "warm"
            outcomes.append(PhaseRun(cluster, broker.bootstrap, work, records, args.per_batch).run(kill, state))
    finally:
        if cluster is not None:
            cluster.stop()
        broker.stop()
    print(f"\n{len(records):,} records a run\n\n{Outcome.HEADER}\n|{'---|' * 13}")
    print("\n".join(o.row() for o in outcomes))
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
