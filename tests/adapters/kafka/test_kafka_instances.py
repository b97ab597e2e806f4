"""Several kafka-engine instances in one consumer group, on a real broker.

Three instances read an 8-partition topic keyed by ``uniqueValue`` with Redis state while the
stream is produced in chunks: two start, a third (without static membership) joins late,
one is killed -9 and restarted, one leaves, the broker restarts, Redis restarts. A
``read_committed`` reader then sees every expected unique event and dead letter: once each
under exactly-once, at least once and nothing unexpected under at-least-once. An instance
that exits on its own (a stuck producer after the broker's restart) is restarted, as a
supervisor would. With memory state, an instance given part of the topic refuses with one line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from adapters.kafka import KafkaSource, parse_kafka_uri, produce
from app import StreamSpec
from domain import BUCKETS
from tests.adapters.kafka.test_kafka_crash import Running
from tests.support.faults.injection import outage
from tests.support.kafka_io import committed_offsets, create_topics, read_topic, unique
from tests.support.partitioned import keyed_topic

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
PARTITIONS = 8
CHUNKS = 4
TRANSACTION_TIMEOUT = 20  # the instances' transaction.timeout.ms, in s (librdkafka's default: 60): how long
# a transaction a dead instance left open under an id nobody takes again hides what follows it
SPEC = StreamSpec(uniques=6_000, late=0, seed=11)  # no late events: a restart's watermarks start afresh


class Group:
    """``engine_runner`` instances (``--follow``) of one consumer group over one set of topics;
    an instance that exits on its own is started again (``supervise``)."""

    def __init__(self, bootstrap: str, topics: dict, options: list[str], logs: Path):
        self.bootstrap, self.topics, self.options, self.logs = bootstrap, topics, options, logs
        self.group = unique("instances")
        self.running: dict[str, Running] = {}
        self.finished: list[dict] = []  # the totals of each instance that stopped cleanly
        self.restarts = Counter()
        self.starts = 0

    def start(self, name: str, *extra: str) -> None:
        self.starts += 1
        args = [f"--{role}={topic}" for role, topic in self.topics.items()]
        command = [
            sys.executable,
            "-m",
            "tests.support.engine_runner",
            f"--bootstrap={self.bootstrap}",
            f"--group={self.group}",
            f"--instance={name}",
            "--follow",
            "--batch-size=300",
            *args,
            *self.options,
            *extra,
        ]
        stderr = open(self.logs / f"{name}-{self.starts}.log", "w")
        proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr, text=True)
        self.running[name] = Running(proc, stderr)
        self.running[name].extra = extra

    def kill(self, name: str) -> None:
        self.running.pop(name).kill_9()

    def leave(self, name: str) -> None:
        running = self.running.pop(name)
        running.wait_for("STARTED", timeout=60)  # its SIGTERM handler is in place (one just restarted may not be)
        running.proc.send_signal(signal.SIGTERM)
        try:
            code = running.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            running.proc.send_signal(signal.SIGUSR1)  # its threads' stacks, to its log
            time.sleep(2)
            running.proc.kill()
            raise AssertionError(
                f"{name} did not stop within 60s of SIGTERM; see {running.stderr.name} (its threads' stacks at the end)"
            ) from None
        assert code == 0, f"{name} did not stop cleanly; see {running.stderr.name}"
        self.finished.append(self._done(running))

    def supervise(self) -> None:
        for name, running in list(self.running.items()):
            if running.proc.poll() is not None:
                self.restarts[name] += 1
                assert self.restarts[name] <= 3, f"{name} keeps exiting; see {running.stderr.name}"
                self.start(name, *running.extra)

    def wait_consumed(self, input_ends: list[int], timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.supervise()
            if committed_offsets(self.bootstrap, self.group, self.topics["input"], PARTITIONS) == input_ends:
                return
            time.sleep(1)
        raise AssertionError(
            f"the group did not commit the whole input within {timeout}s; "
            f"committed {committed_offsets(self.bootstrap, self.group, self.topics['input'], PARTITIONS)}, "
            f"ends {input_ends}; logs in {self.logs}"
        )

    def stop_all(self) -> None:
        for name in list(self.running):
            self.leave(name)

    def _done(self, running: Running) -> dict:
        return json.loads(running.wait_for("DONE", timeout=30).split(" ", 1)[1])


def wait_progress(group: Group, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        group.supervise()
        time.sleep(0.5)


@pytest.mark.redis
@pytest.mark.parametrize("delivery", ["exactly-once", "at-least-once"])
def test_three_instances_through_kills_rebalances_and_restarts_lose_nothing(delivery, own_broker, own_redis, tmp_path):
    bootstrap = own_broker.bootstrap
    topics = {"input": unique("multi-in"), "output": unique("multi-out"), "dlq": unique("multi-dlq")}
    create_topics(bootstrap, topics["input"], partitions=PARTITIONS)
    create_topics(bootstrap, topics["output"], topics["dlq"], partitions=2)
    keyed = keyed_topic(PARTITIONS, SPEC)
    emitted, dead_letters = keyed.expected()
    size = len(keyed.records)
    chunks = [keyed.records[size * i // CHUNKS : size * (i + 1) // CHUNKS] for i in range(CHUNKS)]
    endpoint = parse_kafka_uri(f"kafka://{bootstrap}/{topics['input']}", "preload")
    options = [f"--state={own_redis.url}", f"--state-prefix={unique('multi')}:"]
    options += (
        ["--exactly-once", f"--transaction-timeout-ms={TRANSACTION_TIMEOUT * 1000}"]
        if delivery == "exactly-once"
        else []
    )
    group = Group(bootstrap, topics, options, tmp_path)
    try:
        produce(endpoint, chunks[0])
        group.start("a")
        group.start("b")
        wait_progress(group, 8)
        produce(endpoint, chunks[1])
        group.start("c", "--dynamic")  # joins late, without static membership: its own transactional id
        wait_progress(group, 8)
        group.kill("a")
        group.start("a")
        produce(endpoint, chunks[2])
        wait_progress(group, 6)
        group.leave("b")
        outage(own_broker, down_for=2, crash=True)
        produce(endpoint, chunks[3])
        wait_progress(group, 6)
        outage(own_redis, down_for=1)
        ends = [0] * PARTITIONS
        for partition, _, _ in keyed.records:
            ends[partition] += 1
        group.wait_consumed(ends)
        group.stop_all()
    finally:
        for running in group.running.values():
            running.proc.kill()
    out, dead, waited = settled_output(bootstrap, topics, emitted, dead_letters)
    assert sum(emitted.values()) > 5_000 and sum(dead_letters.values()) > 5
    if delivery == "exactly-once":
        assert out == emitted, _difference(out, emitted)
        assert dead == dead_letters, _difference(dead, dead_letters)
    else:
        assert set(out) == set(emitted), _difference(out, emitted)
        assert set(dead) == set(dead_letters), _difference(dead, dead_letters)
    assert group.finished and all(t["in"] == sum(t[b] for b in BUCKETS) for t in group.finished), group.finished
    print(
        f"{delivery}: {len(keyed.records)} records, {sum(out.values())} events read "
        f"({sum(emitted.values())} expected), {sum(dead.values())} dead letters; instance restarts after "
        f"exiting on their own: {dict(group.restarts)}; the output settled {waited:.0f}s after the input was consumed"
    )


def settled_output(
    bootstrap: str, topics: dict, emitted: Counter, dead_letters: Counter, timeout: float = TRANSACTION_TIMEOUT + 30
) -> tuple[Counter, Counter, float]:
    """The output and dead letters as a ``read_committed`` reader sees them, read again until
    they hold what is expected or ``timeout`` s pass: a transaction a killed instance left open
    under an id nobody takes again hides what follows it until the broker aborts it."""
    started = time.monotonic()
    while True:
        out = Counter(m.value for m in read_topic(bootstrap, topics["output"]))
        dead = Counter(m.value for m in read_topic(bootstrap, topics["dlq"]))
        waited = time.monotonic() - started
        if (set(out) >= set(emitted) and set(dead) >= set(dead_letters)) or waited > timeout:
            return out, dead, waited
        time.sleep(2)


def _difference(got: Counter, want: Counter) -> str:
    missing, extra = want - got, got - want
    return f"missing {sum(missing.values())}, doubled or unexpected {sum(extra.values())}"


def test_memory_state_refuses_a_share_of_the_topic(kafka_bootstrap, tmp_path):
    topics = {"input": unique("shared-in"), "output": unique("shared-out"), "dlq": unique("shared-dlq")}
    create_topics(kafka_bootstrap, topics["input"], partitions=4)
    create_topics(kafka_bootstrap, topics["output"], topics["dlq"])
    group = unique("shared")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}

    def start(name: str) -> subprocess.Popen:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "app",
                "run",
                "--engine",
                "kafka",
                "--state",
                "memory",
                "--source",
                f"kafka://{kafka_bootstrap}/{topics['input']}?group={group}",
                "--sink",
                f"kafka://{kafka_bootstrap}/{topics['output']}",
                "--dlq",
                f"kafka://{kafka_bootstrap}/{topics['dlq']}",
                "--no-progress",
            ],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    first = start("first")
    try:
        time.sleep(6)
        assert first.poll() is None, first.stderr.read()  # alone, it holds the whole topic
        second = start("second")
        for proc in (second, first):
            err = proc.communicate(timeout=90)[1].strip().splitlines()
            assert proc.returncode == 2, err
            assert err[-1].startswith(f"dedup: the consumer group {group} gave this instance 2 of the 4 partitions"), (
                err
            )
            assert "--state redis://" in err[-1] and "Traceback" not in "\n".join(err)
    finally:
        first.kill()


def two_partitions_of_ten(bootstrap: str, name: str):
    """A fresh topic of 2 partitions holding 10 records each, the source URI of a fresh group on it,
    and the values per partition."""
    topic, group = unique(name), unique(f"{name}-group")
    create_topics(bootstrap, topic, partitions=2)
    values = {p: [f'{{"p": {p}, "n": {n}}}'.encode() for n in range(10)] for p in (0, 1)}
    produce(
        parse_kafka_uri(f"kafka://{bootstrap}/{topic}", "preload"), [(p, None, v) for p in (0, 1) for v in values[p]]
    )
    return parse_kafka_uri(f"kafka://{bootstrap}/{topic}?group={group}", "source"), values


def test_records_of_a_partition_taken_away_mid_batch_are_dropped_and_read_again(kafka_bootstrap):
    endpoint, values = two_partitions_of_ten(kafka_bootstrap, "retain")
    first = KafkaSource(endpoint, partitions=2)
    second = None
    try:
        gathered = poll_until(first, lambda got: len(got) == 20)  # a batch gathered, not committed
        second = KafkaSource(endpoint, partitions=2)  # joins the group: the next polls rebalance it
        read_by_second = poll_until(second, lambda got: len(got) == 10, also=first, into=gathered)
        [taken] = {r.position.partition for r in read_by_second}
        kept = first.retain(gathered)
        assert taken not in {r.position.partition for r in kept}, "records of a partition taken away were kept"
        assert [r.value for r in read_by_second] == values[taken]  # from the start: nothing was committed
        mine = 1 - taken
        again = poll_until(first, lambda got: len(got) >= 10 - sum(r.position.partition == mine for r in kept))
        assert sorted(r.position.offset for r in kept + again if r.position.partition == mine) == list(range(10))
    finally:
        first.close()
        if second is not None:
            second.close()


def test_a_partition_taken_away_goes_with_what_was_acknowledged_of_it(kafka_bootstrap):
    endpoint, values = two_partitions_of_ten(kafka_bootstrap, "handover")
    first = KafkaSource(endpoint, partitions=2)
    second = None
    try:
        gathered = poll_until(first, lambda got: len(got) == 20)
        first.commit([r for r in gathered if r.position.offset < 6])  # acknowledged, then at once a rebalance
        second = KafkaSource(endpoint, partitions=2)
        read_by_second = poll_until(second, lambda got: len(got) == 4, also=first, into=[])
        [taken] = {r.position.partition for r in read_by_second}
        assert [r.value for r in read_by_second] == values[taken][6:]  # nothing acknowledged read again
        assert second.poll(10, 1.0) == []
    finally:
        first.close()
        if second is not None:
            second.close()


def poll_until(
    source: KafkaSource, done, also: KafkaSource | None = None, into: list | None = None, timeout: float = 60
) -> list:
    """Poll ``source`` (and ``also``, its records added to ``into``) until ``done(records)``."""
    got, deadline = [], time.monotonic() + timeout
    while not done(got):
        assert time.monotonic() < deadline, f"polled {len(got)} records"
        got += source.poll(100, 0.2)
        if also is not None:
            into += also.poll(100, 0.2)
    return got
