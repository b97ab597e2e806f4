"""kill -9 the kafka engine mid-stream, start it again: nothing is lost; with exactly-once and
Redis state nothing is duplicated either (as a ``read_committed`` reader sees the output).

The engine runs as a separate process (``engine_runner``). Each test kills it either at a
random point (after a few batches) or at the worst moment: a batch's outputs flushed, its
input not acknowledged (under exactly-once: its transaction open).
"""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from app import StreamSpec, generate
from tests.support.faults.injection import kill_9
from tests.support.kafka_io import create_topics, produce, read_topic, unique
from tests.support.streams import reference

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
# no late events: a restarted engine's watermark starts afresh, so lateness is the one
# verdict a restart may legitimately change (an event late before the crash, on time after)
SPEC = StreamSpec(uniques=12_000, late=0, seed=5)


@pytest.fixture(scope="module")
def stream():
    records, _expected = generate(SPEC)
    return records, reference(records)


@pytest.fixture
def job(kafka_bootstrap, stream, tmp_path):
    records, _ = stream
    topics = {role: unique(f"crash-{role}") for role in ("input", "output", "dlq")}
    create_topics(kafka_bootstrap, *topics.values())
    produce(kafka_bootstrap, topics["input"], records)
    return Job(kafka_bootstrap, topics, unique("crash-group"), tmp_path)


class Job:
    """Runs and kills ``engine_runner`` processes over one set of topics and one group."""

    def __init__(self, bootstrap: str, topics: dict, group: str, logs: Path):
        self.bootstrap, self.topics, self.group, self.logs = bootstrap, topics, group, logs
        self.runs = 0

    def command(self, *options: str) -> list[str]:
        args = [f"--{role}={name}" for role, name in self.topics.items()]
        return [
            sys.executable,
            "-m",
            "tests.support.engine_runner",
            f"--bootstrap={self.bootstrap}",
            f"--group={self.group}",
            "--batch-size=300",
            *args,
            *options,
        ]

    def start(self, *options: str) -> Running:
        self.runs += 1
        stderr = open(self.logs / f"run-{self.runs}.log", "w")
        proc = subprocess.Popen(self.command(*options), cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr, text=True)
        return Running(proc, stderr)

    def complete(self, *options: str) -> dict:
        running = self.start(*options)
        line = running.wait_for("DONE", timeout=120)
        assert running.proc.wait(timeout=30) == 0
        return json.loads(line.split(" ", 1)[1])

    def output(self, committed: bool = True) -> list[bytes]:
        return [m.value for m in read_topic(self.bootstrap, self.topics["output"], committed)]

    def dead_letters(self) -> list[bytes]:
        return [m.value for m in read_topic(self.bootstrap, self.topics["dlq"])]


class Running:
    def __init__(self, proc: subprocess.Popen, stderr):
        self.proc, self.stderr = proc, stderr
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put("EXIT")

    def wait_for(self, prefix: str, count: int = 1, timeout: float = 90) -> str:
        seen = 0
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no {prefix!r} line within {timeout}s; see {self.stderr.name}") from None
            assert line != "EXIT", f"the runner exited early; see {self.stderr.name}"
            seen += line.startswith(prefix)
            if seen == count:
                return line

    def kill_9(self) -> None:
        assert kill_9(self.proc) == -signal.SIGKILL
        self.stderr.close()


def redis_state(redis_url: str) -> tuple[str, str]:
    return f"--state={redis_url}", f"--state-prefix={unique('crash')}:"


@pytest.mark.redis
def test_exactly_once_killed_with_a_transaction_open_neither_loses_nor_duplicates(job, stream, redis_url):
    _, expected = stream
    state = redis_state(redis_url)
    # 1. the 8th batch's events are written into its transaction, then the engine dies
    running = job.start("--exactly-once", "--hang-before-commit=8", *state)
    running.wait_for("HANGING")
    assert len(job.output(committed=False)) > len(job.output()), "the open transaction holds events"
    running.kill_9()
    # 2. a new engine fences the dead one's transaction and carries on from the committed offsets
    job.complete("--exactly-once", *state)
    # 3. a read_committed reader sees every event once, in stream order, and every dead letter once
    assert job.output() == expected.emitted
    assert job.dead_letters() == expected.dead_letters


@pytest.mark.redis
def test_exactly_once_killed_at_a_random_point_neither_loses_nor_duplicates(job, stream, redis_url):
    _, expected = stream
    state = redis_state(redis_url)
    running = job.start("--exactly-once", *state)
    running.wait_for("BATCH", count=5)
    running.kill_9()
    job.complete("--exactly-once", *state)
    assert job.output() == expected.emitted
    assert job.dead_letters() == expected.dead_letters


@pytest.mark.redis
def test_at_least_once_replays_the_unacknowledged_batch_with_the_same_verdicts(job, stream, redis_url):
    records, expected = stream
    state = redis_state(redis_url)
    running = job.start("--hang-before-commit=8", *state)
    first, last = map(int, running.wait_for("HANGING").split()[1:])
    running.kill_9()
    job.complete(*state)

    output = Counter(job.output())
    # nothing lost, nothing else let through ...
    assert set(output) == set(expected.emitted)
    # ... and the replayed batch was judged as the first time: the events it emitted come
    # twice (written before the crash and again after), its duplicates never
    emitted_by_batch = set(records[first : last + 1]) & set(expected.emitted)
    assert emitted_by_batch
    assert {value for value, n in output.items() if n > 1} == emitted_by_batch
    assert max(output.values()) == 2


def test_at_least_once_with_memory_state_loses_nothing(job, stream):
    records, expected = stream
    running = job.start()
    running.wait_for("BATCH", count=5)
    running.kill_9()
    totals = job.complete()

    output = job.output()
    assert set(expected.emitted) <= set(output) <= set(records)
    assert set(expected.dead_letters) <= set(job.dead_letters())
    assert totals["in"] < len(records), "the restart resumed from the committed offsets"
