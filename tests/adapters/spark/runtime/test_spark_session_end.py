"""A run that started Spark stops it, its state stores closed first (``runtime.stop_session``).

Spark's own stop leaves the state stores loaded: their RocksDB instances and maintenance threads
ran into the JVM's exit, which crashed the JVM (SIGSEGV in a RocksDB thread) after most runs
holding 10 M keys or more. The engine runs here in a process of its own, as ``dedup run`` does,
so that the session is its own to stop; the shared test session is never stopped (every other
Spark test runs engines on it after their runs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[4]

CHILD = """
import json, sys
from pathlib import Path
from pyspark import SparkContext
from adapters.spark import build_spark_engine
from domain import DedupRule, Policies, RuleSet

work = Path(sys.argv[1])
engine = build_spark_engine(
    RuleSet({"WEB": DedupRule("WEB", 600)}), Policies(), source=f"jsonl:{work / 'in'}",
    sink=str(work / "out"), dead_letters=str(work / "dlq"), checkpoint=str(work / "checkpoint"),
    master="local[2]", state_provider="rocksdb", shuffle_partitions=2,
)
counts = engine.run().as_dict()
state_store = SparkContext._gateway.jvm.org.apache.spark.sql.execution.streaming.state.StateStore
print(json.dumps({
    "counts": counts,
    "spark_running": SparkContext._active_spark_context is not None,
    "state_maintenance_running": state_store.isMaintenanceRunning(),
}))
"""


def test_a_run_that_started_spark_closes_its_state_stores_and_stops_it(tmp_path):
    (tmp_path / "in").mkdir()
    events = [
        {"id": str(i), "uniqueValue": f"k{i % 30}", "type": "WEB", "timestamp": 1_700_000_000 + i} for i in range(50)
    ]
    (tmp_path / "in" / "part-0.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # where a crashing JVM would leave its hs_err_pid*.log
        env={**{k: v for k, v in os.environ.items() if not k.startswith("DEDUP_")}, "PYTHONPATH": str(ROOT / "src")},
        timeout=300,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    report = json.loads(child.stdout.strip().splitlines()[-1])
    assert report["counts"]["in"] == 50 and report["counts"]["out"] == 30
    assert report == {**report, "spark_running": False, "state_maintenance_running": False}
    assert not list(tmp_path.glob("hs_err_pid*.log"))
