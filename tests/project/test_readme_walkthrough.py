"""The README's path from nothing to a running Kafka job, run as it is written.

The ``sh`` block after ``<!-- walkthrough`` in README.md runs in ``bash -euo pipefail`` from
the repository root, its ``mktemp -d`` under this test's directory (``TMPDIR``) and without
the caller's ``DEDUP_*`` variables. It starts a broker and a Redis of its own (not the test
session's), puts a generated stream on a topic, runs the kafka engine and the Spark engine
on it and stops the services. Both engines must report the generator's expected counts,
and the topics must hold them. Needs what ``scripts/bootstrap --services`` installs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from deploy.local.services.cli import main as services_cli
from deploy.local.services.prerequisites import REPO_ROOT
from domain import duplicates

pytestmark = [pytest.mark.kafka, pytest.mark.redis, pytest.mark.spark, pytest.mark.slow]

BLOCK = re.compile(r"<!-- walkthrough[^>]*-->\n```sh\n(.*?)\n```", re.S)
DROPPED_BLOCK = re.compile(r"<!-- dropped-walkthrough[^>]*-->\n```sh\n(.*?)\n```", re.S)
QUICKSTART_BLOCK = re.compile(r"<!-- quickstart[^>]*-->\n```sh\n(.*?)\n```", re.S)
SUMMARY = re.compile(r"^dedup: in=(\d+), out=(\d+), duplicates=(\d+), dead_lettered=(\d+), skipped=0 ", re.M)
LISTING = re.compile(r"^(\S+) +\d+ partitions +(\d+) messages$", re.M)


def walkthrough(block: re.Pattern = BLOCK) -> str:
    """The marked block of README.md; the test fails when there is none."""
    match = block.search((REPO_ROOT / "README.md").read_text())
    assert match, f"README.md has no ```sh block right after the comment {block.pattern[:30]!r}"
    return match.group(1)


def run_in_bash(script: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """``script`` as a newcomer's shell runs it; services it left running are stopped afterwards."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEDUP_")} | {"TMPDIR": str(tmp_path)}
    try:
        return subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=480,
        )
    finally:
        for leftover in tmp_path.glob("*/services/services.env"):
            services_cli(["down", "--dir", str(leftover.parent)])


def test_the_walkthrough_runs_as_written_and_both_engines_report_the_generated_counts(tmp_path):
    run = run_in_bash(walkthrough(), tmp_path)
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stdout[-3000:]}\n{run.stderr[-6000:]}"

    # the addresses came from the services it started, exported for the commands
    assert re.search(r"^export KAFKA=127\.0\.0\.1:\d+$", run.stdout, re.M)
    [expected_json] = tmp_path.glob("*/expected.json")
    work, expected = expected_json.parent, json.loads(expected_json.read_text())

    # each engine's summary, printed and written, is the expectation
    wanted = (expected["in"], expected["out"], expected["duplicates"], expected["dead_lettered"])
    assert [tuple(map(int, counts)) for counts in SUMMARY.findall(run.stderr)] == [wanted, wanted]
    for engine in ("kafka", "spark"):
        summary = json.loads((work / f"{engine}.json").read_text())
        assert {k: summary[k] for k in expected} == expected, engine

    # the last listing counts what each topic holds; the services are down and purged
    held = {topic: int(messages) for topic, messages in LISTING.findall(run.stdout)}
    out, dead = expected["out"], expected["dead_lettered"]
    assert held == {"events": expected["in"], "unique": out, "dead": dead, "spark-unique": out, "spark-dead": dead}
    assert not (work / "services").exists()


def test_why_was_my_event_dropped_runs_as_written_and_names_the_first_copy(tmp_path):
    """The semantics section's walk-through: the report names line 1, the explanation shows its emission."""
    run = run_in_bash(walkthrough(DROPPED_BLOCK), tmp_path)
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    report_line, *explanation = run.stdout.splitlines()
    report = duplicates.from_document(json.loads(report_line))
    assert json.loads(report.record.value)["id"] == "e2"
    assert (report.first.offset, report.first_time, report.apart) == (1, 1_700_000_000, 12)
    assert report.first.source.endswith("/in.jsonl")
    assert (
        explanation[-1]
        .strip()
        .startswith(
            "emitted at 1700000000 = 2023-11-14T22:13:20Z, expires at 1700000060 = "
            "2023-11-14T22:14:20Z (live: a repeat less "
            "than the window away is a duplicate), made by "
        )
    )
    assert explanation[-1].rstrip().endswith("/in.jsonl partition 0 offset 1")


def test_the_quickstart_runs_as_written_and_shows_what_it_says(tmp_path):
    """The quickstart's stdin → stdout run: ids 1 and 3 out, the line that is not JSON dead-lettered."""
    run = run_in_bash(walkthrough(QUICKSTART_BLOCK), tmp_path)
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    unique, dead = run.stdout.splitlines()[:2], run.stdout.splitlines()[2:]
    assert [json.loads(line)["id"] for line in unique] == ["1", "3"]
    assert [json.loads(line)["reason"] for line in dead] == ["not_json"]
    assert "dedup: in=4, out=2, duplicates=1, dead_lettered=1, skipped=0" in run.stderr
