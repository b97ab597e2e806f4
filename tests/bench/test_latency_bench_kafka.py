"""``bench/latency_bench.py`` against the kafka engine, as a user runs it: a few seconds at a
low rate, every unique event out once, nothing else out, the dead letters as expected, and
latencies that make sense."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(120)
def test_the_kafka_engine_at_100_events_a_second_loses_doubles_and_lets_through_nothing(kafka_bootstrap, tmp_path):
    figures = tmp_path / "latency.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "latency_bench.py"),
            "--engine",
            "kafka",
            "--rate",
            "100",
            "--duration",
            "5",
            "--warmup",
            "1",
            "--drain",
            "20",
            "--bootstrap",
            kafka_bootstrap,
            "--json",
            str(figures),
            "--logs",
            str(tmp_path / "logs"),
        ],
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "kafka at-least-once memory 100/s" in done.stdout

    [result] = json.loads(figures.read_text())["results"]
    assert (result["missing"], result["doubled"], result["unexpected"]) == (0, 0, 0), result["examples"]
    assert result["dead_letters"]["match"] and result["exact"]
    assert result["reached_rate"] >= 97
    assert result["engine_exit_code"] == 0  # stopped by SIGTERM, cleanly
    ms = result["latency_ms"]
    assert ms["count"] == result["measured_expected"] > 300  # ~500 sent, ~18 % repeats, ~1 % dead letters
    assert 0 < ms["p50"] <= ms["p90"] <= ms["p99"] <= ms["p99.9"] <= ms["max"] < 5000
