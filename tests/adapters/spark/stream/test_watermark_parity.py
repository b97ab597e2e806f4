"""The Spark engine's watermarks in JVM code (``streamdedup.stream.Watermarks``, kept by the
driver's ``BatchWatermarkFiles``) held to the domain's (``domain._watermarks.Watermarks``): the
same table after every step of the same sequences (tables of the cases the rules name, and
random ones with repeated wall times, rebalances, idle partitions and restarts through the
document), and the same files a micro-batch leaves in its checkpoint."""

from __future__ import annotations

import json
import random

import pytest

from adapters.spark.checkpoint import Checkpoint, HadoopPath, restored
from adapters.spark.stream import BatchWatermarks
from domain import Watermarks
from tests.adapters.spark.conftest import mounted, spellings

pytestmark = pytest.mark.spark

IDLE = 60.0

# (operation, arguments): expect(partitions, now), observe(rule, partition, t, now), of(rule, now),
# restart (through the document) — each case ends with the table at its last wall time
CASES = {
    "an expected partition not heard from holds the watermark back until idle": [
        ("expect", ["t:0", "t:1"], 0),
        ("observe", "APP", "t:0", 1000, 50),
        ("of", "APP", 50),
        ("of", "APP", 60),
    ],
    "the minimum over partitions, never going back": [
        ("expect", ["t:0", "t:1"], 0),
        ("observe", "APP", "t:0", 1000, 0),
        ("observe", "APP", "t:1", 900, 0),
        ("of", "APP", 1),
        ("observe", "APP", "t:1", 1100, 2),
        ("of", "APP", 2),
        ("observe", "APP", "t:0", 900, 3),
        ("of", "APP", 3),
    ],
    "a partition gained holds it back and may take it back": [
        ("expect", ["t:0", "t:1"], 0),
        ("observe", "APP", "t:0", 5000, 0),
        ("observe", "APP", "t:1", 5100, 0),
        ("of", "APP", 1),
        ("expect", ["t:0", "t:1", "t:2"], 2),
        ("of", "APP", 2),
        ("observe", "APP", "t:2", 3000, 3),
        ("of", "APP", 3),
    ],
    "a partition revoked and given back starts afresh": [
        ("expect", ["t:0", "t:1"], 0),
        ("observe", "APP", "t:0", 5000, 0),
        ("observe", "APP", "t:1", 2000, 0),
        ("expect", ["t:0"], 1),
        ("observe", "APP", "t:0", 6000, 200),
        ("expect", ["t:0", "t:1"], 200),
        ("of", "APP", 201),
        ("observe", "APP", "t:0", 6100, 261),
        ("of", "APP", 261),
    ],
    "every partition idle keeps the watermark where it was": [
        ("observe", "WEB", "files", 100, 0),
        ("of", "WEB", 0),
        ("of", "WEB", 500),
        ("observe", "WEB", "files", 50, 501.5),
        ("restart",),
        ("of", "WEB", 502),
    ],
    "rules have their own watermarks, a restart keeps them": [
        ("expect", ["t:0", "t:1"], 0),
        ("observe", "APP", "t:0", 10, 0),
        ("observe", "APP", "t:1", 20, 0),
        ("observe", "WEB", "t:1", 7, 0.25),
        ("of", "APP", 1),
        ("restart",),
        ("observe", "WEB", "t:0", 9, 2),
        ("of", "WEB", 2),
    ],
}


class Both:
    """The same watermarks in the domain and in the JVM, stepped together."""

    def __init__(self, jvm):
        self.jvm = jvm
        self.domain, self.java = Watermarks(IDLE), jvm.streamdedup.stream.Watermarks(IDLE)
        self.now = 0.0

    def step(self, operation: str, *args) -> None:
        if operation == "expect":
            self.domain.expect(args[0], args[1])
            self.java.expect(list(args[0]), float(args[1]))
        elif operation == "observe":
            rule, partition, t, now = args
            self.domain.observe(rule, partition, t, now)
            self.java.observe(rule, partition, t, float(now))
        elif operation == "judge":  # the per-record path: the domain's memo of its last answer
            rule, partition, t, now = args
            self.domain.judge(rule, partition, t, now)
            self.java.observe(rule, partition, t, float(now))
            self.java.of(rule, float(now))
        elif operation == "of":
            rule, now = args
            assert self.domain.of(rule, now) == self.java.of(rule, float(now)), (operation, args)
        elif operation == "restart":  # each restored from the other's document
            domain_document = json.dumps(self.domain.to_document())
            java_document = self.java.toDocument()
            assert json.loads(java_document) == json.loads(domain_document)
            self.domain = Watermarks.from_document(json.loads(java_document), IDLE)
            self.java = self.jvm.streamdedup.stream.Watermarks.fromDocument(domain_document, IDLE)
        self.now = max(self.now, float(args[-1])) if operation != "restart" else self.now

    def assert_same_table(self) -> None:
        watermarks, newest = self.domain.table(self.now)
        lines = self.java.table(self.now).splitlines()
        assert {tuple(line.split("\t")) for line in lines} == (
            {(rule, str(mark)) for rule, mark in watermarks.items()}
            | {(rule, lane, str(t)) for (rule, lane), t in newest.items()}
        )
        assert json.loads(self.java.toDocument()) == json.loads(json.dumps(self.domain.to_document()))


@pytest.mark.parametrize("steps", CASES.values(), ids=CASES.keys())
def test_the_jvm_watermarks_answer_as_the_domains_in_each_case(spark, steps):
    both = Both(spark._jvm)
    for step in steps:
        both.step(*step)
        both.assert_same_table()


def random_steps(seed: int, count: int) -> list[tuple]:
    """Steps over 2 rules and 4 partitions: wall times that repeat, jump past the idle timeout or
    step back a little; assignments that grow, shrink and move; times that go back."""
    rng = random.Random(seed)
    now, steps = 0.0, []
    for _ in range(count):
        now += rng.choice([0, 0, 0, 0.5, 1, 7, 30, IDLE + 1])
        kind = rng.random()
        if kind < 0.08:
            steps.append(("expect", sorted(rng.sample([f"t:{p}" for p in range(4)], rng.randint(1, 4))), now))
        elif kind < 0.1:
            steps.append(("restart",))
        elif kind < 0.3:
            steps.append(("of", rng.choice(["APP", "WEB"]), now))
        else:
            operation = "judge" if kind < 0.6 else "observe"
            t = 1_000 + int(now) + rng.randint(-300, 60)
            steps.append((operation, rng.choice(["APP", "WEB"]), f"t:{rng.randrange(4)}", t, now))
    return steps


@pytest.mark.parametrize("seed", range(4))
def test_the_jvm_watermarks_answer_as_the_domains_over_random_sequences(spark, seed):
    both = Both(spark._jvm)
    for i, step in enumerate(random_steps(seed, 250)):
        both.step(*step)
        if i % 5 == 0 or step[0] in ("expect", "restart"):
            both.assert_same_table()
    both.assert_same_table()


def offsets_entry(root, batch: int, timestamp_ms: int, partitions: dict[int, int]) -> None:
    path = root / "offsets" / str(batch)
    path.parent.mkdir(parents=True, exist_ok=True)
    metadata = {"batchWatermarkMs": 0, "batchTimestampMs": timestamp_ms, "conf": {}}
    path.write_text(
        "\n".join(["v1", json.dumps(metadata), json.dumps({"in": {str(p): o for p, o in partitions.items()}})])
    )


@pytest.mark.parametrize("where", ["viewfs", "relative"])
def test_a_batchs_watermark_files_are_the_domains_and_a_replay_or_a_restart_reads_them(spark, tmp_path, where):
    """Batches prepared and advanced by the driver's JVM bookkeeping leave the files the Python
    side reads (``checkpoint.restored``), a replay is judged against its own table and a restart
    resumes; on a file system that is not ``file`` and at a relative location."""
    root = tmp_path / "ckpt"
    location = mounted(spark, root) if where == "viewfs" else spellings(spark, root)[1]
    offsets_entry(root, 0, 1_700_000_000_000, {0: 5, 1: 7})
    marks = BatchWatermarks.open(spark, location, IDLE, "in")
    marks.prepare(0)
    assert marks.used == {"watermarks": {}, "newest": {}, "now": 1_700_000_000.0}  # t:1 shows nothing yet
    marks.advance(0, [("APP", "in:0", 1_000), ("APP", "in:1", 900), ("WEB", "in:1", 50)])
    checkpoint = Checkpoint.at(location)
    saved = json.loads((checkpoint.ours / "watermarks" / "0.json").read_text())
    assert saved["use"] == {"watermarks": {}, "newest": []}
    assert set(saved["after"]["newest"]) == {"APP", "WEB"} and set(saved["after"]["since"]) == {"in:0", "in:1"}
    assert restored(checkpoint, IDLE).newest("APP", "in:1") == 900

    offsets_entry(root, 1, 1_700_000_001_000, {0: 9, 1: 9})
    marks.prepare(1)
    assert marks.used["watermarks"] == {"APP": 900} and marks.used["newest"][("APP", "in:0")] == 1_000
    assert marks.used["newest"][("WEB", "in:1")] == 50  # WEB has no watermark: in:0 holds it back
    # a replay of batch 1, after a restart, is judged against the table batch 1 was first given
    again = BatchWatermarks.open(spark, location, IDLE, "in")
    again.prepare(1)
    assert again.used == marks.used
    again.advance(1, [("APP", "in:1", 1_100)])
    assert again.highest() == 1_000
    assert json.loads((checkpoint.ours / "watermarks" / "1.json").read_text())["use"]["watermarks"] == {"APP": 900}
    assert not any("partial" in p.name for p in HadoopPath.at(str(checkpoint.ours / "watermarks")).iterdir())
