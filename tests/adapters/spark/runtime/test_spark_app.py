"""The Spark engine as the application runs it: ``dedup run --engine spark`` and spark-submit.

Settings reach the engine through the container (spark.*, kafka.config), the CLI's
contract holds (the accounting summary, one-line setting errors), and Kafka → Spark → Kafka
runs end to end on the real broker with Spark's own Kafka connector.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from adapters.spark.runtime import classpath_jars, connector_jars, operator_jar, spark_kafka_options
from app import StreamSpec, generate_parts, load_settings, main, run_engine, write_parts
from domain import InvalidEvent, parse_event
from domain import dead_letters as dead_letter_codec
from tests.support.kafka_io import create_topics, produce, read_topic, unique
from tests.support.spark_jvm import with_test_jvm
from tests.support.streams import reference

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[4]
COUNTS = ("in", "out", "duplicates", "dead_lettered", "late", "invalid", "passed_through", "skipped")


@pytest.fixture
def cli(spark, monkeypatch):
    """``dedup`` in this process (sharing the test session's SparkSession); signal handlers restored."""
    for name in [k for k in os.environ if k.startswith("DEDUP_")]:
        monkeypatch.delenv(name)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield lambda *args, **env: _run(monkeypatch, args, env)
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


def _run(monkeypatch, args, env) -> int:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return main(["run", "--engine", "spark", *args])


def test_kafka_config_becomes_the_connector_options():
    settings = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "svc",
        "sasl.password": 'p"w',
        "ssl.ca.location": "/etc/ca.pem",
        "consumer.fetch.max.bytes": "1048576",
        "producer.linger.ms": "20",
    }
    consumer = spark_kafka_options(settings, "consumer")
    assert consumer == {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="svc" password="p\\"w";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/etc/ca.pem",
        "kafka.fetch.max.bytes": "1048576",
    }
    assert spark_kafka_options(settings, "producer")["kafka.linger.ms"] == "20"
    assert "kafka.linger.ms" not in consumer


def test_a_bad_spark_setting_stops_with_one_line_naming_it(cli, capsys, tmp_path):
    assert cli("--source", "-", "--sink", f"file:{tmp_path}/out") == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        (
            "dedup: invalid setting source: the spark engine reads and writes file:DIRECTORY or "
            "kafka://HOST:PORT/TOPIC, got '-'"
        )
    ]
    config = json.dumps({"sasl.username": "only-the-user"})
    assert cli("--source", f"file:{tmp_path}/in", "--sink", f"file:{tmp_path}/out", DEDUP_KAFKA__CONFIG=config) == 2
    assert "invalid setting kafka.config" in capsys.readouterr().err


def test_dedup_run_reports_the_accounting_and_applies_spark_conf(cli, spark, tmp_path):
    parts, expected = generate_parts(StreamSpec(uniques=400, seed=4), 2)
    write_parts(tmp_path / "in", parts)
    conf = {"spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB": "300"}
    before = spark.conf.get("spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB")
    try:
        code = cli(
            "--source",
            f"file:{tmp_path}/in?maxFilesPerTrigger=1",
            "--sink",
            f"file:{tmp_path}/out",
            "--dlq",
            f"file:{tmp_path}/dlq",
            "--summary-json",
            str(tmp_path / "summary.json"),
            DEDUP_SPARK__CHECKPOINT=str(tmp_path / "checkpoint"),
            DEDUP_SPARK__CONF=with_test_jvm(conf),
        )
        assert spark.conf.get("spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB") == "300"
    finally:
        spark.conf.set("spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB", before)
    assert code == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert {k: summary[k] for k in COUNTS} == {k: expected.as_accounting()[k] for k in COUNTS}


class ProgressRecorder:
    """Stands in for the CLI's progress line: what it was shown, batch after batch."""

    def __init__(self):
        self.shown: list[int] = []
        self.closed = False

    def __call__(self, totals) -> None:
        self.shown.append(totals.records_in)

    def close(self) -> None:
        self.closed = True


def test_the_progress_line_follows_every_micro_batch(cli, tmp_path):  # cli: clean env, signals restored
    parts, expected = generate_parts(StreamSpec(uniques=300, seed=6), 3)
    write_parts(tmp_path / "in", parts)
    settings = load_settings(
        engine="spark",
        source=f"file:{tmp_path}/in?maxFilesPerTrigger=1",
        sink=f"file:{tmp_path}/out",
        dlq=f"file:{tmp_path}/dlq",
        spark={"checkpoint": str(tmp_path / "checkpoint")},
    )
    progress = ProgressRecorder()
    totals = run_engine(settings, progress)
    assert progress.closed and progress.shown == sorted(progress.shown)
    assert progress.shown[-1] == totals.records_in == expected.records
    assert len(set(progress.shown)) == len(parts)  # one step per file (micro-batch)


@pytest.mark.kafka
def test_kafka_to_spark_to_kafka_through_dedup_run(cli, kafka_bootstrap, tmp_path):
    if not connector_jars():
        pytest.skip("Spark's Kafka connector jars are not in .cache/jars/spark-kafka (scripts/bootstrap --services)")
    topics = {role: unique(f"spark-{role}") for role in ("in", "out", "dlq")}
    create_topics(kafka_bootstrap, *topics.values())
    uri = {role: f"kafka://{kafka_bootstrap}/{topic}" for role, topic in topics.items()}
    parts, expected = generate_parts(StreamSpec(uniques=1200, seed=8), 2)
    env = {
        "DEDUP_SPARK__CHECKPOINT": str(tmp_path / "checkpoint"),
        "DEDUP_SPARK__AVAILABLE_NOW": "true",
        "DEDUP_KAFKA__CONFIG": json.dumps({"client.id": "streamdedup-spark-test"}),
    }
    summaries = []
    # the late records are produced after the rest was processed (lateness is judged against
    # earlier micro-batches); the second run continues from the checkpoint
    for run, batch in enumerate((parts[:-1], parts[-1:])):
        produce(kafka_bootstrap, topics["in"], [r for part in batch for r in part])
        summary = tmp_path / f"summary-{run}.json"
        assert (
            cli("--source", uri["in"], "--sink", uri["out"], "--dlq", uri["dlq"], "--summary-json", str(summary), **env)
            == 0
        )
        summaries.append(json.loads(summary.read_text()))
    assert_exact_output(kafka_bootstrap, topics, [r for part in parts for r in part], expected.late)
    assert {k: sum(s[k] for s in summaries) for k in COUNTS} == {k: expected.as_accounting()[k] for k in COUNTS}
    assert summaries[1]["in"] == len(parts[-1])


def assert_exact_output(bootstrap: str, topics: dict[str, str], records: list[bytes], late: int) -> None:
    """Read committed: each unique event of ``records`` once in ``topics["out"]``, each invalid or late
    record (``late`` of them late) once in ``topics["dlq"]`` with its reason and where it was read."""
    want = reference(records)
    assert Counter(m.value for m in read_topic(bootstrap, topics["out"])) == Counter(want.emitted)
    dead = [dead_letter_codec.from_headers(m.value, m.key, m.raw_headers) for m in read_topic(bootstrap, topics["dlq"])]
    assert Counter(d.record.value for d in dead) == Counter(want.dead_letters)
    assert Counter(d.reason for d in dead) == expected_reasons(want.dead_letters, late)
    assert {(d.record.position.source, d.error_class, d.attempts) for d in dead} == {(topics["in"], "invalid", 1)}


def expected_reasons(dead_letters: list[bytes], late: int) -> Counter:
    """Each dead letter's reason by the domain's own parser; ``late`` of them valid but late."""
    reasons = Counter()
    for value in dead_letters:
        try:
            parse_event(value)
            reasons["late"] += 1
        except InvalidEvent as exc:
            reasons[exc.reason] += 1
    assert reasons["late"] == late
    return reasons


@pytest.mark.slow
def test_under_spark_submit_its_master_conf_and_jars_are_kept(tmp_path):
    """spark-submit's --master and --conf win; the jars it was given are not added again."""
    script = tmp_path / "show_session.py"
    script.write_text(
        "import json, sys\n"
        f"sys.path.insert(0, {str(ROOT / 'src')!r})\n"
        "from adapters.spark.runtime import build_session\n"
        "spark = build_session('local[2]', conf={'spark.sql.shuffle.partitions': '5'})\n"
        "conf = spark.sparkContext.getConf()\n"
        "print('SESSION ' + json.dumps({'master': spark.sparkContext.master, 'jars': conf.get('spark.jars'),\n"
        "      'timezone': spark.conf.get('spark.sql.session.timeZone'),\n"
        "      'partitions': spark.conf.get('spark.sql.shuffle.partitions')}))\n"
    )
    jars = ",".join(str(j) for j in [operator_jar(), *connector_jars()])
    import pyspark

    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(
        [
            str(submit),
            "--master",
            "local[1]",
            "--jars",
            jars,
            "--conf",
            "spark.sql.session.timeZone=Europe/Paris",
            str(script),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        stdin=subprocess.DEVNULL,
    )
    [line] = [line for line in done.stdout.splitlines() if line.startswith("SESSION ")] or [done.stderr[-3000:]]
    session = json.loads(line.removeprefix("SESSION "))
    assert session["master"] == "local[1]"
    assert sorted(Path(j).name for j in session["jars"].split(",")) == sorted(Path(j).name for j in jars.split(","))
    assert session["timezone"] == "Europe/Paris"  # spark-submit's --conf over the engine's default (UTC)
    assert session["partitions"] == "5"  # the configured spark.conf over the engine's default (2)


def test_the_connector_is_added_only_when_not_configured_already():
    packages = {"spark.jars.packages": "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"}
    assert classpath_jars(packages) == [str(operator_jar())]
    given = {"spark.jars": "/opt/jars/spark-sql-kafka-0-10_2.13-4.2.0.jar"}
    assert classpath_jars(given) == ["/opt/jars/spark-sql-kafka-0-10_2.13-4.2.0.jar", str(operator_jar())]
    assert classpath_jars({}) == [str(operator_jar()), *map(str, connector_jars())]
