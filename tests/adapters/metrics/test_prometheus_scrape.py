"""A real Prometheus scrapes a running engine, the kafka engine and the Spark engine in local
mode: the dashboard's queries and the alerts work on what it stores, and its counts are the stream's.

The engine (``dedup run --engine kafka|spark --metrics-port P``) reads a generated stream whose
accounting is known by construction (``app._generator``), keyed over 3 partitions; the Spark
engine reads it in micro-batches of at most ``SPARK_BATCH`` records. Prometheus
(``deploy/local/services``) scrapes it every second and loads deploy/prometheus/alerts.yml.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from adapters.kafka import parse_kafka_uri, produce
from adapters.metrics import CATALOG
from app import StreamSpec, generate
from deploy.local.services.process import wait_until
from tests.adapters.spark.processes import spark_env
from tests.app.test_secrets_never_shown import free_port
from tests.deploy.checkers import dashboard_exprs
from tests.support.kafka_io import create_topics, unique
from tests.support.partitioned import keyed_topic

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parents[3]
SPEC = StreamSpec(uniques=2000)
COUNTS = ("out", "duplicates", "dead_lettered", "late", "invalid", "passed_through")
RATE_INTERVAL = "1m"  # Grafana's $__rate_interval: the whole run fits in it
# the Spark engine's gauges: exported, at 0, by the other engines
SPARK_ONLY = tuple(m.exported for m in CATALOG.values() if m.help.endswith("(spark engine)"))
# ... and at 0 on a healthy Spark engine that started on a new checkpoint (no state to restore)
ZERO_ON_A_NEW_CHECKPOINT = ("dedup_failed_batches_total", "dedup_state_load_seconds")
SPARK_BATCH = 1000  # records per micro-batch: the stream takes several


def start_engine(engine: str, bootstrap: str, topics: dict[str, str], port: int, workdir: Path) -> subprocess.Popen:
    """``dedup run --engine ENGINE`` (kafka, or spark in local mode); its log goes to
    ``workdir/engine.log``, its accounting at exit to ``workdir/summary.json``."""
    uri = {role: f"kafka://{bootstrap}/{topic}" for role, topic in topics.items()}
    args = [
        sys.executable,
        "-m",
        "app",
        "run",
        "--engine",
        engine,
        "--source",
        f"{uri['in']}?group=g",
        "--sink",
        uri["out"],
        "--dlq",
        uri["dlq"],
        "--metrics-port",
        str(port),
        "--summary-json",
        str(workdir / "summary.json"),
    ]
    if engine == "spark":
        env = spark_env(
            workdir / "checkpoint",
            bounded=False,
            DEDUP_SPARK__LOG_FILE=str(workdir / "spark.log"),
            DEDUP_SPARK__MAX_OFFSETS_PER_TRIGGER=str(SPARK_BATCH),
        )
    else:
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    with open(workdir / "engine.log", "wb") as log:
        return subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=log)


def value(prometheus, expr: str) -> float:
    """The single value of ``expr`` (a sum, a ratio…)."""
    [series] = prometheus.query(expr)
    return float(series["value"][1])


def by_label(prometheus, expr: str, label: str) -> dict[str, float]:
    return {s["metric"][label]: float(s["value"][1]) for s in prometheus.query(expr)}


def wait_for(prometheus, expr: str, expected: float, timeout: float = 60) -> None:
    deadline, seen = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        seen = prometheus.query(expr)
        if seen and float(seen[0]["value"][1]) == expected:
            return
        time.sleep(0.5)
    raise AssertionError(f"{expr} never reached {expected}; last: {seen}")


class ScrapedEngine:
    """An engine (``kind``: kafka or spark) reading ``topics["in"]``, scraped by ``prometheus``,
    which evaluates the alerts."""

    def __init__(self, engine: subprocess.Popen, prometheus, topics: dict[str, str], workdir: Path, kind: str):
        self.engine, self.prometheus, self.topics, self.workdir = engine, prometheus, topics, workdir
        self.kind = kind

    def stop(self) -> dict[str, int]:
        """SIGTERM; the engine's own accounting (``--summary-json``) once it exited cleanly."""
        if self.engine.poll() is None:
            self.engine.send_signal(signal.SIGTERM)
        self.engine.wait(timeout=60)
        assert self.engine.returncode == 0, (self.workdir / "engine.log").read_text()[-3000:]
        return json.loads((self.workdir / "summary.json").read_text())


@pytest.fixture(params=["kafka", pytest.param("spark", marks=pytest.mark.spark)])
def scraped_engine(request, kafka_bootstrap, prometheus, tmp_path):
    topics = {role: unique(f"prom-{role}") for role in ("in", "out", "dlq")}
    create_topics(kafka_bootstrap, topics["in"], partitions=3)
    create_topics(kafka_bootstrap, topics["out"], topics["dlq"])
    port = free_port()
    engine = start_engine(request.param, kafka_bootstrap, topics, port, tmp_path)
    try:
        server = prometheus({"streamdedup": [f"127.0.0.1:{port}"]}, rule_files=(ROOT / "deploy/prometheus/alerts.yml",))
        wait_for(server, 'up{job="streamdedup"}', 1, timeout=120)  # scraped before the first record
        yield ScrapedEngine(engine, server, topics, tmp_path, request.param)
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait(timeout=30)


def test_prometheus_holds_the_streams_counts_and_answers_every_dashboard_query(kafka_bootstrap, scraped_engine):
    prometheus, keyed, expected = scraped_engine.prometheus, keyed_topic(3, SPEC), generate(SPEC)[1]
    assert len(keyed.records) == expected.records
    produce(parse_kafka_uri(f"kafka://{kafka_bootstrap}/{scraped_engine.topics['in']}", "preload"), keyed.records)

    # 1. every record read and judged, as Prometheus stored it
    wait_for(prometheus, "sum(dedup_records_in_total)", expected.records, timeout=180)  # Spark: its JVM starts
    wait_for(
        prometheus,
        "sum(dedup_out_total) + sum(dedup_duplicates_total) + sum(dedup_dead_lettered_total)",
        expected.records,
    )
    counts = {name: value(prometheus, f"sum(dedup_{name}_total)") for name in COUNTS}
    assert counts == {name: getattr(expected, name) for name in COUNTS}
    assert value(prometheus, 'up{job="streamdedup"}') == 1

    # 2. the labelled series add up: per rule, per reason
    duplicates = by_label(prometheus, "dedup_duplicates_total", "rule")
    assert duplicates["APP"] > 0 and duplicates["WEB"] > 0 and duplicates["none"] == 0
    assert duplicates["APP"] + duplicates["WEB"] == expected.duplicates
    out = by_label(prometheus, "dedup_out_total", "rule")
    assert out["none"] == expected.passed_through and sum(out.values()) == expected.out
    reasons = by_label(prometheus, "dedup_dead_lettered_total", "reason")
    assert reasons["late"] == expected.late and sum(reasons.values()) == expected.dead_lettered
    print(f"\ncounts {counts}\nduplicates per rule {duplicates}\nout per rule {out}\nper reason {reasons}")

    # 3. every query of the dashboard answers, plausibly
    answers = dashboard_answers(prometheus)
    print("\n" + "\n".join(f"{where}: {expr} = {shown}" for where, (expr, shown) in answers.items()))
    assert [
        f"{where}: {expr} = {shown}"
        for where, (expr, shown) in answers.items()
        if not shown or not plausible(expr, shown, scraped_engine.kind)
    ] == []
    if scraped_engine.kind == "spark":
        # a key per unique event of a rule, but for those the watermark has retired already
        assert 0 < value(prometheus, "sum(dedup_state_rows)") <= expected.out - expected.passed_through
        assert value(prometheus, "sum(dedup_batch_duration_seconds_count)") >= math.ceil(expected.records / SPARK_BATCH)
        assert value(prometheus, "sum(dedup_checkpoint_bytes_written_total)") > 0

    # 4. every alert evaluates; the stream's shares of late records and of dead letters put the
    # alerts whose threshold they cross in pending (their "for" is longer than the test)
    assert [(r["name"], r["lastError"]) for r in prometheus.rules() if r["health"] != "ok"] == []
    crossed = {
        "DedupLateRecordsRising": expected.late / expected.records > 0.001,
        "DedupDeadLettersRising": expected.dead_lettered / expected.records > 0.01,
    }
    pending = {name: "pending" for name, over in crossed.items() if over}
    # the Spark engine's first micro-batches (the JVM warming up) may be slower than the trigger, or
    # not; a backlog produced while the engine joins its group is caught up seconds after its
    # records' timestamps, so its latency may be above the objective, or not
    ignored = {"DedupLatencyAboveObjective"} | (
        {"DedupBatchSlowerThanTrigger"} if scraped_engine.kind == "spark" else set()
    )

    def states() -> dict[str, str]:
        return {name: state for name, state in alert_states(prometheus).items() if name not in ignored}

    wait_until(lambda: states() == pending, 15)
    print(
        f"alerts: {alert_states(prometheus)}; late {expected.late / expected.records:.4f}, "
        f"dead letters {expected.dead_lettered / expected.records:.4f} of the input"
    )
    assert states() == pending

    # 5. the engine's own accounting says what Prometheus says
    own = scraped_engine.stop()
    assert {name: own[name] for name in ("in", *COUNTS)} == {"in": expected.records, **counts}


def alert_states(prometheus) -> dict[str, str]:
    return {s["metric"]["alertname"]: s["metric"]["alertstate"] for s in prometheus.query("ALERTS")}


def dashboard_answers(prometheus) -> dict[str, tuple[str, dict[str, float]]]:
    """Each dashboard query (Grafana's interval as Grafana fills it in) -> (expr, {series: value})."""
    answers = {}
    for where, expr in dashboard_exprs(dashboard()).items():
        expr = expr.replace("$__rate_interval", RATE_INTERVAL)
        answers[where] = (
            expr,
            {
                ",".join(f"{k}={v}" for k, v in s["metric"].items()) or "": float(s["value"][1])
                for s in prometheus.query(expr)
            },
        )
    return answers


def dashboard() -> dict:
    return json.loads((ROOT / "deploy/grafana/dashboards/streamdedup.json").read_text())


def plausible(expr: str, shown: dict[str, float], engine: str = "kafka") -> bool:
    """Finite and not negative; the Spark engine's own figures at 0 on the kafka engine, and above
    0 on the Spark engine but for failures and the restore time (``ZERO_ON_A_NEW_CHECKPOINT``); a
    rate (or a quantile of rates) above 0: every kind of record is in the stream, none skipped."""
    values = list(shown.values())
    if not all(math.isfinite(v) and v >= 0 for v in values):
        return False
    if any(name in expr for name in SPARK_ONLY):
        if engine != "spark" or any(name in expr for name in ZERO_ON_A_NEW_CHECKPOINT):
            return values == [0.0] * len(values)
        return sum(values) > 0
    if "rate(" in expr and "dedup_skipped_total" not in expr:
        return sum(values) > 0
    return True
