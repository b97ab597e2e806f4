"""Upgrading a running Spark job: the checkpoint's manifest, migration with the old state as fallback.

Each scenario runs real streaming queries over JSONL files (one file per micro-batch) and
checks verdicts and counts stated independently of the engine. docs/design/spark.md
("State evolution") states the design.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from adapters.spark.checkpoint import STATE_FORMAT, inspect_checkpoint, migrate, plan_migration, read_manifest
from domain import DedupRule, IncompatibleState, RuleSet, UnknownTypePolicy
from tests.adapters.spark.conftest import FileRun, mounted

pytestmark = pytest.mark.spark

T = 1_700_000_000
V1 = RuleSet({"APP": DedupRule("APP", 30), "WEB": DedupRule("WEB", 600)})
# v2: the WEB key becomes uniqueValue + type (the state is keyed differently)
V2 = RuleSet({"APP": DedupRule("APP", 30), "WEB": DedupRule("WEB", 600, ("uniqueValue", "type"))})


def event(id_, key, type_, t):
    return json.dumps({"id": id_, "uniqueValue": key, "type": type_, "timestamp": T + t})


class Stream(FileRun):
    """A directory of JSONL files, one per micro-batch, run by successive job versions."""

    def checkpoint(self, name: str) -> str:
        return str(self.dir / name)

    def run_version(
        self, rules: RuleSet, checkpoint: str, output: str, provider: str = "rocksdb"
    ) -> tuple[dict, list[str]]:
        """Runs ``rules`` on ``checkpoint`` (its outputs, as any job's, stay the same across runs);
        returns the counts and the ids this run emitted."""
        written = set((self.dir / output).glob("batch=*"))
        engine = self.engine(
            rules, sink=output, dead_letters=f"{output}-dlq", checkpoint=checkpoint, state_provider=provider
        )
        counts = engine.run(available_now=True).as_dict()
        ids = [
            json.loads(line)["id"]
            for batch in sorted(set((self.dir / output).glob("batch=*")) - written)
            for path in sorted(batch.glob("part-*"))
            for line in path.read_text().splitlines()
            if line
        ]
        return counts, sorted(ids)


@pytest.fixture
def stream(spark, tmp_path):
    return Stream(spark, tmp_path)


def tree_digest(root: Path) -> str:
    """Names and bytes of every file under ``root``: equal digests mean an untouched directory."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def test_v2_keeps_v1_dedup_memory_then_retires_the_old_state(stream, spark, caplog):
    # v1 (WEB keyed by uniqueValue) emits a, w, x
    stream.add(event("a1", "a", "APP", 0), event("w1", "w", "WEB", 0), event("x1", "x", "WEB", 10))
    counts, ids = stream.run_version(V1, "v1", "out-v1")
    assert (counts["in"], ids) == (3, ["a1", "w1", "x1"])

    # offline step: v2's checkpoint gets v1's position and its live state as a read-only fallback
    plan = plan_migration(spark, stream.checkpoint("v1"), stream.checkpoint("v2"), V2)
    assert plan.keys_per_rule == {"APP": 1, "WEB": 2}
    assert plan.retire_at == T + 10 + 1200  # x1's expiry: t + window + lateness
    migrate(spark, plan)

    # v2 starts after v1's input: v1's file is not read again; repeats of v1's emissions are dropped
    stream.add(
        event("a2", "a", "APP", 20),  # dup of a1 (APP key unchanged, found in the old state)
        event("w2", "w", "WEB", 300),  # dup of w1 under the old key layout
        event("n1", "n", "WEB", 300),  # new key: emitted, written in the new layout
        event("n2", "n", "WEB", 310),  # dup of n1 (new state)
        event("b1", "b", "APP", 25),  # new key: emitted
        event("l1", "l", "APP", -25),
    )  # late by v1's watermark (T + 10 - 30), though v2's starts afresh
    stream.add(
        event("x2", "x", "WEB", 600),  # 590 s after x1: still a dup (old state live)
        event("z1", "z", "WEB", 5000),
    )  # moves the watermark past the old state's last expiry
    with caplog.at_level(logging.WARNING, logger="adapters.spark.checkpoint._migration"):
        counts, ids = stream.run_version(V2, "v2", "out-v2")
    assert (counts["in"], counts["out"], counts["duplicates"], counts["late"]) == (8, 3, 4, 1)
    assert ids == ["b1", "n1", "z1"]

    new_state = inspect_checkpoint(spark, stream.checkpoint("v2"))
    assert dict(new_state.keys_per_rule) == {"APP": 1, "WEB": 2}
    assert sorted(new_state.samples["WEB"]) == ["n | WEB", "z | WEB"]
    # the batch that moved the watermark past the old state's last expiry retired it, and said so
    assert any("retired: the watermark 1700005000" in r.getMessage() for r in caplog.records)
    assert new_state.details["migration"].startswith(f"old state retired at watermark {T + 5000}")

    # the next start leaves the old state out: its fallback and the old checkpoint can be gone
    shutil.rmtree(Path(stream.checkpoint("v2")) / "streamdedup" / "fallback")
    shutil.rmtree(stream.checkpoint("v1"))
    stream.add(event("w3", "w", "WEB", 5001), event("z2", "z", "WEB", 5002))
    counts, ids = stream.run_version(V2, "v2", "out-v2")
    assert (counts["in"], counts["out"], counts["duplicates"]) == (2, 1, 1)
    assert "w3" in ids
    migration = read_manifest(Path(stream.checkpoint("v2")) / "streamdedup").migration
    assert migration["retired"] is True and migration["retired_at_watermark"] == T + 5000


def test_an_incompatible_change_is_refused_and_the_checkpoint_left_untouched(stream):
    stream.add(event("w1", "w", "WEB", 0))
    stream.run_version(V1, "ckpt", "out")
    before = tree_digest(Path(stream.checkpoint("ckpt")))

    stream.add(event("w2", "w", "WEB", 300))
    with pytest.raises(IncompatibleState) as refused:
        stream.run_version(V2, "ckpt", "out")

    message = str(refused.value)
    assert "\n" not in message
    assert "rules.WEB.key_fields changed from uniqueValue to uniqueValue,type" in message
    checkpoint = stream.checkpoint("ckpt")
    assert f"dedup state migrate --from spark:{checkpoint} --to spark:{checkpoint}-migrated" in message
    assert tree_digest(Path(stream.checkpoint("ckpt"))) == before

    # the untouched checkpoint still runs with v1 and still remembers w1
    counts, ids = stream.run_version(V1, "ckpt", "out")
    assert (counts["in"], counts["duplicates"], ids) == (1, 1, [])


def test_a_checkpoint_on_another_file_system_is_checked_the_same_way(stream, spark, tmp_path):
    # a viewfs:// checkpoint (Hadoop's ViewFileSystem, mounted on a local directory): not a file: URI
    location, mount = mounted(spark, tmp_path / "mount"), tmp_path / "mount"
    stream.add(event("w1", "w", "WEB", 0))
    stream.run_version(V1, location, "out")
    assert read_manifest(mount / "streamdedup").key_fields("WEB") == ("uniqueValue",)
    before = tree_digest(mount)

    stream.add(event("w2", "w", "WEB", 300))
    with pytest.raises(IncompatibleState, match=r"rules\.WEB\.key_fields changed from uniqueValue to uniqueValue,type"):
        stream.run_version(V2, location, "out")
    assert tree_digest(mount) == before


def test_stateless_changes_keep_the_checkpoint_and_its_memory(stream):
    stream.add(event("a1", "a", "APP", 0))
    stream.run_version(V1, "ckpt", "out")
    # a longer window and unknown types dead-lettered: stateless steps and rule parameters change
    changed = RuleSet({"APP": DedupRule("APP", 40), "WEB": DedupRule("WEB", 600)}, UnknownTypePolicy.DEAD_LETTER)
    stream.add(event("a2", "a", "APP", 35), event("o1", "o", "OTHER", 35))
    counts, ids = stream.run_version(changed, "ckpt", "out")
    assert (counts["in"], counts["duplicates"], counts["dead_lettered"], ids) == (2, 1, 1, [])
    manifest = read_manifest(Path(stream.checkpoint("ckpt")) / "streamdedup")
    assert manifest.rules["APP"]["window"] == 40


def test_inspect_reports_what_the_job_wrote(stream, spark):
    stream.add(
        *[event(f"a{i}", f"a{i}", "APP", i) for i in range(4)],
        *[event(f"w{i}", f"w{i}", "WEB", i) for i in range(3)],
        event("a0-again", "a0", "APP", 5),
    )
    stream.run_version(V1, "ckpt", "out")
    report = inspect_checkpoint(spark, stream.checkpoint("ckpt"), sample_size=2).as_dict()
    assert report["keys"] == 7 and report["keys_per_rule"] == {"APP": 4, "WEB": 3}
    assert report["oldest_expiry"] == T + 0 + 60
    assert report["newest_expiry"] == T + 2 + 1200
    assert report["format_versions"] == {f"window-dedup/{STATE_FORMAT}": 7}
    assert report["size_bytes"] > 0
    assert all(len(s) == 2 for s in report["samples"].values())
    assert report["details"]["last_committed_batch"] == 0


def test_the_cli_inspects_migrates_with_a_dry_run_and_refuses_an_incompatible_run(
    stream, tmp_path, capsys, monkeypatch
):
    from app import main

    stream.add(event("w1", "w", "WEB", 0), event("a1", "a", "APP", 0), event("a2", "a", "APP", 1))
    stream.run_version(V1, "v1", "out-v1")
    v1, v2 = Path(stream.checkpoint("v1")), Path(stream.checkpoint("v2"))
    config = tmp_path / "v2.yaml"
    config.write_text("rules:\n  WEB: {window: 10m, key_fields: [uniqueValue, type]}\n")

    assert main(["state", "inspect", "--state", f"spark:{v1}", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["keys_per_rule"] == {"APP": 1, "WEB": 1} and report["format_versions"] == {
        f"window-dedup/{STATE_FORMAT}": 2
    }

    # the job's own run refuses v2's settings on v1's checkpoint: exit 2, one line, nothing written
    before = tree_digest(v1)
    monkeypatch.setenv("DEDUP_SPARK__CHECKPOINT", str(v1))
    code = main(
        [
            "run",
            "--engine",
            "spark",
            "--config",
            str(config),
            "--source",
            f"file:{stream.input}",
            "--sink",
            f"file:{tmp_path / 'out-v1'}",
            "--dlq",
            f"file:{tmp_path / 'out-v1-dlq'}",
            "--no-progress",
        ]
    )
    refusal = [line for line in capsys.readouterr().err.splitlines() if line.startswith("dedup:")]
    assert len(refusal) == 1 and "rules.WEB.key_fields changed from uniqueValue to uniqueValue,type" in refusal[0]
    assert code == 2
    assert tree_digest(v1) == before

    migrate = ["state", "migrate", "--from", f"spark:{v1}", "--to", f"spark:{v2}", "--config", str(config)]
    assert main([*migrate, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would translate rule WEB's key uniqueValue -> uniqueValue,type: 1 live old keys" in out
    assert "nothing was written" in out
    assert not v2.exists() and tree_digest(v1) == before

    assert main(migrate) == 0
    assert read_manifest(v2 / "streamdedup").migration["fallback_keys"] == 2
    stream.add(event("w2", "w", "WEB", 100), event("a3", "a", "APP", 10))
    counts, ids = stream.run_version(V2, "v2", "out-v2")
    assert (counts["in"], counts["duplicates"], ids) == (2, 2, [])


FORMAT_2 = Path(__file__).parent / "fixtures" / "format2"
FORMAT_2_ROOT = "/tmp/streamdedup-fixture-format2"  # where the fixture was written; its text files name it
SPARK_4_0_1 = Path(__file__).parent / "fixtures" / "spark-4.0.1"
SPARK_4_0_1_ROOT = "/tmp/streamdedup-fixture-spark-4.0.1"
FORMAT_3_HDFS = Path(__file__).parent / "fixtures" / "format3-hdfs"
FORMAT_3_HDFS_ROOT = "/tmp/streamdedup-fixture-format3"
FORMAT_4 = Path(__file__).parent / "fixtures" / "format4"
FORMAT_4_ROOT = "/tmp/streamdedup-fixture-format4"
FORMAT_5 = Path(__file__).parent / "fixtures" / "format5"
FORMAT_5_ROOT = "/tmp/streamdedup-fixture-format5"
FORMAT_6 = Path(__file__).parent / "fixtures" / "format6"
FORMAT_6_ROOT = "/tmp/streamdedup-fixture-format6"


def restore(fixture: Path, written_at: str, root: Path) -> None:
    """Copies ``fixture`` (a checkpoint and its input, written under ``written_at``) to ``root``,
    its text files naming ``root`` instead (the state's own files, binary, as they are; a
    ``transformWithState`` operator's metadata, ``state/0/_metadata/v2/N``, is text and names its
    schema file by its full path)."""
    for path in fixture.rglob("*"):
        if path.is_file():
            target = root / path.relative_to(fixture)
            target.parent.mkdir(parents=True, exist_ok=True)
            data = path.read_bytes()
            parts = path.relative_to(fixture).parts
            operator_metadata = parts[-3:-1] == ("_metadata", "v2")
            text = operator_metadata or (path.parent.name in ("0", "streamdedup") and "state" not in parts)
            target.write_bytes(data.replace(written_at.encode(), str(root).encode()) if text and b"{" in data else data)


def refused_then_migrated(stream, tmp_path: Path, old: Path, new: Path, capsys, monkeypatch) -> None:
    """``dedup run`` on the old checkpoint ``old`` is refused in one line naming ``dedup state
    migrate`` (exit 2), and ``dedup state migrate`` prepares ``new`` from it."""
    from app import main

    monkeypatch.setenv("DEDUP_SPARK__CHECKPOINT", str(old))
    code = main(
        [
            "run",
            "--engine",
            "spark",
            "--source",
            f"file:{stream.input}",
            "--sink",
            f"file:{tmp_path / 'out'}",
            "--dlq",
            f"file:{tmp_path / 'dlq'}",
            "--no-progress",
        ]
    )
    refusal = [line for line in capsys.readouterr().err.splitlines() if line.startswith("dedup:")]
    assert code == 2 and len(refusal) == 1 and "dedup state migrate" in refusal[0], refusal
    assert main(["state", "migrate", "--from", f"spark:{old}", "--to", f"spark:{new}"]) == 0


def continued_past_the_fixture(stream, tmp_path: Path, written_at: str, checkpoint: str) -> dict:
    """The fixtures' job continued on ``tmp_path / checkpoint``: a3 (a repeat of a1), c1, w2 (of w1) and
    b2 (b1 expired) come to 2 out and 2 duplicates whose reports name a1 and w1 in the fixture's input,
    as the state names it: where the fixture was written (``written_at``; its copy is in ``tmp_path``).
    Returns the reports by the repeat's id."""
    stream.files = 1
    stream.add(
        event("a3", "a", "APP", 10),
        event("c1", "c", "APP", 11),
        event("w2", "w", "WEB", 100),
        event("b2", "b", "APP", 40),
    )
    engine = stream.engine(V1, sink="out", dead_letters="dlq", checkpoint=checkpoint, duplicates=str(tmp_path / "dups"))
    counts = engine.run(available_now=True).as_dict()
    assert (counts["in"], counts["out"], counts["duplicates"]) == (4, 2, 2)
    reports = {json.loads(d.record.value)["id"]: d for d in stream.run_reports("dups")}
    firsts = {
        id_: json.loads(stream.line_of(d.first.source.replace(written_at, str(tmp_path)), d.first.offset))["id"]
        for id_, d in reports.items()
    }
    assert firsts == {"a3": "a1", "w2": "w1"}
    assert {d.first.source for d in reports.values()} == {f"file:{written_at}/in/0000.jsonl"}
    return reports


@pytest.mark.parametrize(
    "fixture, written_at, store_file",
    [
        (SPARK_4_0_1, SPARK_4_0_1_ROOT, ".changelog"),
        (FORMAT_3_HDFS, FORMAT_3_HDFS_ROOT, ".delta"),
    ],
    ids=["spark-4.0.1-rocksdb", "spark-4.2.0-hdfs-backed"],
)
def test_a_state_format_3_checkpoint_is_refused_then_migrated_with_its_dedup_memory_and_positions(
    stream, tmp_path, capsys, monkeypatch, fixture, written_at, store_file
):
    """State format 3: ``flatMapGroupsWithState`` with processing-time timeouts, the operator
    before this version's ``transformWithState`` (format 4). ``fixtures/spark-4.0.1``: written by
    Spark 4.0.1 (the release this project pinned before) in RocksDB; ``fixtures/format3-hdfs``:
    by Spark 4.2.0 at commit f9644a0 in the HDFS-backed store (which format 4 no longer offers).
    Both over ``in/0000.jsonl`` (a1 a@0, w1 w@0, b1 b@2, a2 a@5: a duplicate), by
    ``[DEDUP_SPARK__STATE_PROVIDER=hdfs-backed] DEDUP_SPARK__CHECKPOINT=<root>/checkpoint dedup run
    --engine spark --source file:<root>/in --sink file:<root>/out --dlq file:<root>/dlq`` with <root>
    ``written_at``. A start on it is refused in one line naming ``dedup state migrate``; migrated,
    the new job drops the repeats of the old emissions and their reports name the records in its input."""
    restore(fixture, written_at, tmp_path)
    old, new = tmp_path / "checkpoint", tmp_path / "v4"
    assert read_manifest(old / "streamdedup").operators["window-dedup"]["state_format"] == 3
    assert any(p.suffix == store_file for p in (old / "state").rglob("*"))
    refused_then_migrated(stream, tmp_path, old, new, capsys, monkeypatch)
    reports = continued_past_the_fixture(stream, tmp_path, written_at, "v4")
    assert (reports["a3"].first_time, reports["w2"].first_time) == (T, T)
    assert read_manifest(new / "streamdedup").operators["window-dedup"]["state_format"] == STATE_FORMAT == 7
    assert any(p.suffix == ".changelog" for p in (new / "state").rglob("*"))


def test_a_checkpoint_written_before_the_java_packages_moved_is_resumed_with_its_dedup_memory(stream, spark, tmp_path):
    """``fixtures/format4``: state format 4 (this version's ``transformWithState``) in RocksDB, written
    at commit cd4f931, when the engine's JVM classes were in ``streamdedup.spark`` (issue 55 moved them to
    packages named after the Python ones: ``streamdedup.stream.WindowDedup``, …), over ``in/0000.jsonl``
    (a1 a@0, w1 w@0, b1 b@2, a2 a@5: a duplicate) by ``DEDUP_SPARK__CHECKPOINT=<root>/checkpoint dedup run
    --engine spark --source file:<root>/in --sink file:<root>/out --dlq file:<root>/dlq`` with <root>
    ``written_at``. A checkpoint names no Java class (its operator metadata names Spark's operator and the
    state variables, its schemas are Spark types, the manifest names ``window-dedup``): this version reads
    its state and resumes the job on it, no migration, its emissions and their positions intact. State
    formats 5 to 7 keep format 4's keys as they are (their expiry queues are a state variable Spark
    adds on restart), so the checkpoint is resumed in place and recorded as format 7."""
    restore(FORMAT_4, FORMAT_4_ROOT, tmp_path)
    checkpoint = tmp_path / "checkpoint"
    assert read_manifest(checkpoint / "streamdedup").operators["window-dedup"]["state_format"] == 4
    assert dict(inspect_checkpoint(spark, str(checkpoint)).keys_per_rule) == {"APP": 2, "WEB": 1}
    continued_past_the_fixture(stream, tmp_path, FORMAT_4_ROOT, "checkpoint")
    assert read_manifest(checkpoint / "streamdedup").migration is None
    assert read_manifest(checkpoint / "streamdedup").operators["window-dedup"]["state_format"] == STATE_FORMAT == 7
    assert dict(inspect_checkpoint(spark, str(checkpoint)).keys_per_rule) == {"APP": 3, "WEB": 1}


def test_a_checkpoint_of_the_previous_state_format_is_migrated_and_its_emissions_report_no_position(
    stream, spark, tmp_path, capsys, monkeypatch
):
    """``fixtures/format2``: the checkpoint the previous version (state format 2, emission times
    without their positions; Spark 4.0.1) wrote over ``in/0000.jsonl`` (a1 a@0, w1 w@0, b1 b@2, a2 a@5:
    a duplicate), by ``dedup run --engine spark`` with two state partitions."""
    from app import main

    restore(FORMAT_2, FORMAT_2_ROOT, tmp_path)
    old, new = tmp_path / "checkpoint", tmp_path / "v3"
    assert read_manifest(old / "streamdedup").operators["window-dedup"]["state_format"] == 2

    refused_then_migrated(stream, tmp_path, old, new, capsys, monkeypatch)
    stream.files = 1
    stream.add(
        event("a3", "a", "APP", 10),
        event("c1", "c", "APP", 11),
        event("c2", "c", "APP", 12),
        event("w2", "w", "WEB", 100),
        event("b2", "b", "APP", 40),
    )
    engine = stream.engine(V1, sink="out", dead_letters="dlq", checkpoint="v3", duplicates=str(tmp_path / "dups"))
    counts = engine.run(available_now=True).as_dict()
    assert (counts["in"], counts["out"], counts["duplicates"]) == (5, 2, 3)
    reports = {json.loads(d.record.value)["id"]: d for d in stream.run_reports("dups")}
    assert sorted(reports) == ["a3", "c2", "w2"]
    # the old emissions: their times, not where they came from; the new one: both
    assert (reports["a3"].first, reports["a3"].first_time, reports["w2"].first, reports["w2"].first_time) == (
        None,
        T,
        None,
        T,
    )
    c2 = reports["c2"]
    assert (c2.first_time, json.loads(stream.line_of(c2.first.source, c2.first.offset))["id"]) == (T + 11, "c1")
    assert read_manifest(new / "streamdedup").operators["window-dedup"]["state_format"] == STATE_FORMAT
    # what the state remembers: the old job's emission of a (consulted read-only), c1's with its position
    capsys.readouterr()
    assert (
        main(["state", "explain", "--state", f"spark:{new}", "--rule", "APP", "--key", "uniqueValue=a", "--json"]) == 0
    )
    explained = {"a": json.loads(capsys.readouterr().out)}
    # as a user runs it: a process of its own, which starts its SparkSession before reading the checkpoint
    command = subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "state",
            "explain",
            "--state",
            f"spark:{new}",
            "--rule",
            "APP",
            "--key",
            "uniqueValue=c",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[4] / "src")},
    )
    assert command.returncode == 0, command.stderr[-2000:]
    explained["c"] = json.loads(command.stdout)
    assert [(e["time"], e["position"]) for e in explained["a"]["emissions"]] == [(T, None)]
    [c] = explained["c"]["emissions"]
    assert (c["time"], c["expires_at"], c["position"]["offset"]) == (T + 11, T + 71, c2.first.offset)
    assert c["position"]["topic"].endswith("0001.jsonl") and explained["c"]["at_source"].startswith("rule APP's")


@pytest.mark.parametrize(
    ("fixture", "written_at", "old_format"),
    [(FORMAT_5, FORMAT_5_ROOT, 5), (FORMAT_6, FORMAT_6_ROOT, 6)],
    ids=["format 5", "format 6"],
)
def test_a_format_5_or_6_checkpoint_is_resumed_in_place_and_its_queues_are_read(
    stream, spark, tmp_path, fixture, written_at, old_format
):
    """``fixtures/format5``: state format 5 (expiry queues whose entries say only which key joined),
    written at commit dc78ce6 by ``DEDUP_SPARK__CHECKPOINT=<root>/checkpoint dedup run --engine spark
    --source file:<root>/in?maxFilesPerTrigger=1 --sink file:<root>/out --dlq file:<root>/dlq`` over
    ``in/0000.jsonl`` (w1 w@0 WEB, a1 a@0 APP) then ``in/0001.jsonl`` (w2 w@601: a new emission, which
    sets w to wake at its own expiry, 1,801 s, and leaves w1's entry in the queue of 1,200 s; b1 b@602 APP).
    ``fixtures/format6``: state format 6 (each queue a log of the keys that join and leave it, under the
    moment's own key), written the same way at commit dbd9ab4 (w's leaving the queue of 1,200 s logged).

    Format 7 cuts each moment's log in lists by key and reads the moment's own key first; format 5's
    entries are checked against their keys. When the queues up to 1,200 s come due, the APP keys go
    (a job reading only the lists would keep them for good), and w stays (its wake moved on): w3
    (w@1000) is a duplicate of w2."""
    restore(fixture, written_at, tmp_path)
    checkpoint = tmp_path / "checkpoint"
    assert read_manifest(checkpoint / "streamdedup").operators["window-dedup"]["state_format"] == old_format
    assert dict(inspect_checkpoint(spark, str(checkpoint)).keys_per_rule) == {"APP": 2, "WEB": 1}
    stream.files = 2
    # Spark's watermark and both rules' pass 1,200 s in the next batch
    stream.add(event("x1", "x", "WEB", 1300), event("c1", "c", "APP", 1300))
    stream.add(event("y1", "y", "WEB", 1310))  # the queues up to 1,200 s come due after this batch's rows
    stream.add(event("w3", "w", "WEB", 1000))
    engine = stream.engine(
        V1, sink="out", dead_letters="dlq", checkpoint="checkpoint", duplicates=str(tmp_path / "dups")
    )
    counts = engine.run(available_now=True).as_dict()
    assert (counts["in"], counts["out"], counts["duplicates"], counts["late"]) == (4, 3, 1, 0)
    (w3,) = stream.run_reports("dups")
    assert (json.loads(w3.record.value)["id"], w3.first_time) == ("w3", T + 601)
    assert read_manifest(checkpoint / "streamdedup").operators["window-dedup"]["state_format"] == STATE_FORMAT == 7
    assert dict(inspect_checkpoint(spark, str(checkpoint)).keys_per_rule) == {"APP": 1, "WEB": 3}
