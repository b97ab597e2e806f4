"""Error policies and INVALIDATE notifications on the Spark engine, over JSONL directories.

The invalidation scenario tables (tests/support/scenarios.py) are the ones the in-memory engine
passes (tests/domain/test_invalidation_scenarios.py); here every scenario runs at once, keys
prefixed per scenario, one micro-batch per table batch: its notifications, then its events.
"""

from __future__ import annotations

import io
import json
import os
from contextlib import redirect_stdout
from dataclasses import replace
from pathlib import Path

import pytest

from adapters.spark import SparkEngine, build_spark_engine
from app import main
from domain import Policies, RestartsExhausted, RuleSet, parse_restart
from tests.support.scenarios import INVALID_RECORDS, INVALIDATION_SCENARIOS, InvalidationScenario
from tests.support.scenarios import T as SCENARIO_T

pytestmark = pytest.mark.spark

T = 1_700_000_000


class Batches:
    """One file per micro-batch in each of ``in/`` and ``notes/`` (read in lock-step)."""

    def __init__(self, root: Path):
        self.root = root
        self.input, self.notes = root / "in", root / "notes"
        self.input.mkdir()
        self.notes.mkdir()
        self.count = 0

    def add(self, events: list[bytes], notes: list[bytes] = ()) -> None:
        for directory, lines in ((self.input, events), (self.notes, notes)):
            path = directory / f"{self.count:04d}.jsonl"
            path.write_bytes(b"".join(line + b"\n" for line in lines))
            os.utime(path, (1_000_000 + self.count, 1_000_000 + self.count))
        self.count += 1

    def engine(
        self,
        spark,
        policies: Policies | None = None,
        notifications: bool = True,
        restart: str = "exponential-delay(attempts=5,delay=1)",
        rules: RuleSet | None = None,
    ) -> SparkEngine:
        return build_spark_engine(
            rules or RuleSet(),
            policies or Policies(),
            source=f"jsonl:{self.input}?maxFilesPerTrigger=1",
            sink=str(self.root / "out"),
            dead_letters=str(self.root / "dlq"),
            checkpoint=str(self.root / "checkpoint"),
            master="local[2]",
            spark=spark,
            restart=parse_restart(restart),
            notifications=f"jsonl:{self.notes}?maxFilesPerTrigger=1" if notifications else None,
        )

    def read(self, name: str) -> list[dict]:
        return [
            json.loads(line)
            for path in sorted((self.root / name).glob("batch=*/part-*"))
            for line in path.read_text().splitlines()
            if line
        ]


def scoped(record: bytes, prefix: str, field: str = "uniqueValue") -> bytes:
    obj = json.loads(record)
    target = obj.get("event", obj)
    target[field] = f"{prefix}-{target[field]}"
    if "event" not in obj:
        obj["id"] = f"{prefix}-{obj['id']}"
    return json.dumps(obj).encode()


HOSTILE_NOTES = [  # none stops the stream or forgets a key; each is counted as rejected
    b'{"notification":"INVALIDATE","exception":"x","event":' + b'{"a":' * 2000 + b"1" + b"}" * 2000 + b"}",
    b'{"notification":"INVALIDATE","exception":"x","event":' + b"[" * 5000 + b"]" * 5000 + b"}",
    b"not json",
    b'{"notification":"OTHER","event":{}}',
    b'{"notification":"INVALIDATE","event":{"id":1}}',
    b'{"notification":"INVALIDATE","event":{"id":"1","uniqueValue":"k","type":"APP","timestamp":1,"x":NaN}}',
]


def test_invalidation_scenarios_through_spark(spark, tmp_path):
    batches = Batches(tmp_path)
    expected_out, rounds = set(), max(len(s.batches) for s in INVALIDATION_SCENARIOS)
    for r in range(rounds):
        events, notes = [], []
        for n, scenario in enumerate(INVALIDATION_SCENARIOS):
            if r >= len(scenario.batches):
                continue
            records = [scoped(v, f"s{n}") for v in scenario.records()[r]]
            events += records
            notes += [scoped(scenario.notification(note), f"s{n}") for note in scenario.batches[r].notes]
            expected_out |= {
                json.loads(v)["id"] for v, verdict in zip(records, scenario.expected()[r]) if verdict == "emit"
            }
        batches.add(events, notes + (HOSTILE_NOTES if r == rounds - 1 else []))
    # the scenarios share one stream and one clock: a lateness wider than their spread keeps
    # one scenario's later times from making another's events late
    wide = RuleSet({r.event_type: replace(r, allowed_lateness=1000) for r in RuleSet().rules.values()})
    counts = batches.engine(spark, rules=wide).run(available_now=True).as_dict()
    assert {e["id"] for e in batches.read("out")} == expected_out
    events = sum(len(s.batches[r].steps) for s in INVALIDATION_SCENARIOS for r in range(len(s.batches)))
    assert (counts["in"], counts["out"], counts["dead_lettered"]) == (events, len(expected_out), 0)
    assert counts["in"] == counts["out"] + counts["duplicates"]
    notes = [n for sc in INVALIDATION_SCENARIOS for batch in sc.batches for n in batch.notes]
    assert counts["invalidations"] == len(notes)  # one of a type without a rule too: nothing to forget
    assert counts["rejected_notifications"] == len(HOSTILE_NOTES)
    # what the checkpoint remembers of an invalidated key: only the emission made after its invalidation,
    # live at the rule's watermark; expired once a watermark passes its window and lateness
    assert [(e["time"], e["live"]) for e in explained(batches.root, "s2-a")["emissions"]] == [(SCENARIO_T + 31, True)]
    expiry = SCENARIO_T + 6 + wide.rules["APP"].retention
    later = explained(batches.root, "s0-a", "--at", str(expiry))
    assert [(e["time"], e["expires_at"], e["live"]) for e in later["emissions"]] == [(SCENARIO_T + 6, expiry, False)]


def test_a_key_invalidated_then_emitted_again_outlives_the_expiry_it_was_first_listed_at(spark, tmp_path):
    """An invalidated key is removed from the state and leaves the expiry queue it was listed in
    (APP: window 30 s, lateness 30 s, so a@0 is listed to wake at 60 s). Emitted again (a@20, to
    wake at 80 s), it is still there when the queue of 60 s comes due (y, z move the watermarks
    past it), so a@45 repeats a@20."""

    def records(*steps: tuple[str, int]) -> list[bytes]:
        return [
            json.dumps({"id": f"{key}{t}", "uniqueValue": key, "type": "APP", "timestamp": SCENARIO_T + t}).encode()
            for key, t in steps
        ]

    batches = Batches(tmp_path)
    batches.add(records(("a", 0)))
    batches.add(records(("x", 10)), [InvalidationScenario("", ()).notification(("APP", "a", SCENARIO_T))])
    batches.add(records(("a", 20)))
    batches.add(records(("y", 61)))
    batches.add(records(("z", 62)))  # the queue of 60 s comes due after this batch's rows
    batches.add(records(("a", 45)))
    rules = RuleSet({"APP": replace(RuleSet().rules["APP"], allowed_lateness=30)})
    counts = batches.engine(spark, rules=rules).run(available_now=True).as_dict()
    assert sorted(e["id"] for e in batches.read("out")) == ["a0", "a20", "x10", "y61", "z62"]
    assert (counts["in"], counts["duplicates"], counts["late"], counts["invalidations"]) == (6, 1, 0, 1)


def explained(root: Path, unique_value: str, *options: str) -> dict:
    """``dedup state explain --json`` of APP key ``unique_value`` in the checkpoint under ``root``."""
    out = io.StringIO()
    with redirect_stdout(out):
        assert (
            main(
                [
                    "state",
                    "explain",
                    "--state",
                    f"spark:{root / 'checkpoint'}",
                    "--rule",
                    "APP",
                    "--key",
                    f"uniqueValue={unique_value}",
                    "--json",
                    *options,
                ]
            )
            == 0
        )
    return json.loads(out.getvalue())


def test_invalid_records_are_skipped_when_the_policy_says_skip(spark, tmp_path):
    batches = Batches(tmp_path)
    valid = [
        json.dumps({"id": f"v{i}", "uniqueValue": "k", "type": "APP", "timestamp": T + 40 * i}).encode()
        for i in range(3)
    ]
    batches.add([valid[0], *[raw for raw, _ in INVALID_RECORDS], valid[1], valid[2]])
    counts = (
        batches.engine(spark, Policies.from_strings({"invalid": "skip"}), notifications=False)
        .run(available_now=True)
        .as_dict()
    )
    assert [e["id"] for e in batches.read("out")] == ["v0", "v1", "v2"]
    assert batches.read("dlq") == []
    invalid = len(INVALID_RECORDS)
    assert (counts["in"], counts["out"], counts["skipped"], counts["dead_lettered"]) == (3 + invalid, 3, invalid, 0)
    assert counts["invalid"] == invalid


def test_invalid_fail_policy_stops_the_query_and_the_restart_strategy_gives_up(spark, tmp_path):
    batches = Batches(tmp_path)
    batches.add([b"not json"])
    engine = batches.engine(
        spark,
        Policies.from_strings({"invalid": "fail"}),
        notifications=False,
        restart="fixed-delay(attempts=1,delay=0)",
    )
    with pytest.raises(RestartsExhausted) as error:
        engine.run()
    assert "failed 2 time(s)" in str(error.value) and "policy invalid=fail" in str(error.value)
    assert "\n" not in str(error.value)
    assert batches.read("out") == [] and batches.read("dlq") == []


def test_dedup_run_stops_with_one_line_and_exit_3_when_restarts_run_out(spark, tmp_path, monkeypatch, capsys):
    from app import main

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "0.jsonl").write_bytes(
        json.dumps({"id": "1", "uniqueValue": "u", "type": "APP", "timestamp": T}).encode() + b"\n"
    )
    (tmp_path / "blocker").write_text("a file where the sink's directory should be")
    monkeypatch.setenv("DEDUP_SPARK__CHECKPOINT", str(tmp_path / "checkpoint"))
    monkeypatch.setenv("DEDUP_SPARK__RESTART", "fixed-delay(attempts=1,delay=0)")
    monkeypatch.setenv("DEDUP_POLICIES__TRANSIENT", "retry(attempts=2,backoff=fixed,delay=0.1)>fail")
    code = main(
        [
            "run",
            "--engine",
            "spark",
            "--source",
            f"file:{tmp_path / 'in'}",
            "--sink",
            f"file:{tmp_path / 'blocker' / 'out'}",
            "--dlq",
            f"file:{tmp_path / 'dlq'}",
            "--no-progress",
        ]
    )
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("dedup:")]
    assert code == 3
    assert lines[-1].startswith(
        "dedup: the streaming query failed 2 time(s) and the restart strategy "
        "fixed-delay(attempts=1,delay=0) gave up; last error: "
    )
    assert "(after 3 attempts)" in lines[-1]
