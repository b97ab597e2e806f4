"""What the Spark engine's writers (``output._writers.writer_for``) put where a consumer reads it.

Each case writes one judged micro-batch (a static DataFrame with the judged batch's columns:
two unique events, a duplicate, a dead letter) through the writer the delivery and outputs give,
then reads the outputs back as a consumer would: ``read_committed`` for Kafka topics, the part
files for a directory. Writing the same batch id again is what a replay after a crash between
the write and Spark's commit does: at-least-once writes copies, exactly-once does not.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from pyspark.sql import functions as F

from adapters.spark.output import writer_for
from adapters.spark.shared import SparkSetupError
from domain import dead_letters
from tests.adapters.spark.eos_output import committed, dead_letter_values
from tests.support.kafka_io import create_topics, unique

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

EMITTED = [
    b'{"id":"1","uniqueValue":"u1","type":"APP","timestamp":1700000000}',
    b'{"id":"2","uniqueValue":"u2","type":"APP","timestamp":1700000001}',
]
DUPLICATE = b'{"id":"3","uniqueValue":"u1","type":"APP","timestamp":1700000002}'
DEAD = b'{"id":"4","type":"APP"}'
COLUMNS = (
    "verdict string, value binary, kafka_key binary, source string, partition int, offset long, "
    "reason string, detail string, rule string, passed boolean"
)


def judged_batch(spark):
    rows = [
        ("emit", value, value[8:10], "in", 0, offset, None, None, "APP", False) for offset, value in enumerate(EMITTED)
    ]
    rows += [
        ("duplicate", DUPLICATE, b"u1", "in", 0, 2, None, None, "APP", False),
        ("dead-letter", DEAD, None, "in", 0, 3, "missing_field", "uniqueValue is missing", None, False),
    ]
    return spark.createDataFrame(rows, COLUMNS).repartition(2)


def write(spark, writer, batch_id: int = 0, times: int = 1) -> None:
    writer.open(spark)
    try:
        for _ in range(times):
            writer.write(judged_batch(spark), batch_id)
    finally:
        writer.close()


@pytest.fixture
def topics(kafka_bootstrap):
    """Role -> topic name, and ``uri`` -> role -> its kafka:// URI."""
    names = {role: unique(f"writers-{role}") for role in ("out", "dlq")}
    create_topics(kafka_bootstrap, *names.values())
    return {**names, "uri": {role: f"kafka://{kafka_bootstrap}/{name}" for role, name in names.items()}}


def jsonl_lines(directory) -> list[bytes]:
    return [line.encode() for part in sorted(directory.rglob("part-*")) for line in part.read_text().splitlines()]


@pytest.mark.parametrize("delivery, copies", [("at-least-once", 2), ("exactly-once", 1)])
def test_a_replayed_batch_is_written_again_only_without_transactions(
    kafka_spark, kafka_bootstrap, topics, tmp_path, delivery, copies
):
    writer = writer_for(topics["uri"]["out"], topics["uri"]["dlq"], delivery, str(tmp_path / "checkpoint"))
    write(kafka_spark, writer, times=2)  # the batch, then its replay under the same batch id
    assert committed(kafka_bootstrap, topics["out"]) == Counter(dict.fromkeys(EMITTED, copies))
    assert dead_letter_values(kafka_bootstrap, topics["dlq"]) == Counter({DEAD: copies})


def test_the_sink_uris_client_options_reach_the_producer_that_writes_the_topic(kafka_spark, topics, tmp_path):
    sink = topics["uri"]["out"] + "?kafka.acks=sometimes"
    writer = writer_for(sink, topics["uri"]["dlq"], "at-least-once", str(tmp_path / "c"))
    with pytest.raises(Exception, match="acks"):
        write(kafka_spark, writer)


@pytest.mark.parametrize("delivery", ["at-least-once", "exactly-once"])
def test_dead_letters_to_a_directory_are_documents_there_beside_the_events_topic(
    kafka_spark, kafka_bootstrap, topics, tmp_path, delivery
):
    writer = writer_for(topics["uri"]["out"], f"file:{tmp_path / 'dead'}", delivery, str(tmp_path / "checkpoint"))
    write(kafka_spark, writer, times=2)  # a directory's batch is replaced by its replay
    assert set(committed(kafka_bootstrap, topics["out"])) == set(EMITTED)
    letters = [dead_letters.from_document(json.loads(line)) for line in jsonl_lines(tmp_path / "dead")]
    assert [(letter.reason, letter.record.value) for letter in letters] == [("missing_field", DEAD)]


def test_dead_letters_on_another_cluster_are_written_there_at_least_once(
    kafka_spark, kafka_bootstrap, topics, tmp_path
):
    port = kafka_bootstrap.rsplit(":", 1)[1]
    elsewhere = f"kafka://localhost:{port}/{topics['dlq']}"  # another name: another cluster, as far as the job knows
    write(kafka_spark, writer_for(topics["uri"]["out"], elsewhere, "at-least-once", str(tmp_path / "checkpoint")))
    assert committed(kafka_bootstrap, topics["out"]) == Counter(EMITTED)
    assert dead_letter_values(kafka_bootstrap, topics["dlq"]) == Counter({DEAD: 1})


def test_a_directory_sink_holds_each_batch_once_however_often_it_is_replayed(kafka_spark, tmp_path):
    writer = writer_for(f"file:{tmp_path / 'out'}", f"file:{tmp_path / 'dead'}", "at-least-once", str(tmp_path / "c"))
    write(kafka_spark, writer, times=2)
    assert Counter(jsonl_lines(tmp_path / "out")) == Counter(EMITTED)
    assert len(jsonl_lines(tmp_path / "dead")) == 1


def test_exactly_once_refuses_outputs_one_transaction_cannot_span(topics, kafka_bootstrap):
    port = kafka_bootstrap.rsplit(":", 1)[1]
    other = f"kafka://localhost:{port}/{topics['dlq']}"
    sink, letters = topics["uri"]["out"], topics["uri"]["dlq"]
    for outputs, named in [
        (("/tmp/out", letters), "needs a kafka:// sink"),
        ((sink, other), f"dead-letter topic on the sink's cluster ({kafka_bootstrap})"),
    ]:
        with pytest.raises(SparkSetupError, match="exactly-once") as refused:
            writer_for(*outputs, "exactly-once", "/c")
        assert named in str(refused.value) and "\n" not in str(refused.value)


def test_a_replayed_batch_judged_otherwise_than_its_committed_output_fails_the_write(
    kafka_spark, kafka_bootstrap, topics, tmp_path
):
    writer = writer_for(topics["uri"]["out"], topics["uri"]["dlq"], "exactly-once", str(tmp_path / "checkpoint"))
    writer.open(kafka_spark)
    try:
        writer.write(judged_batch(kafka_spark).coalesce(1), 0)
        otherwise = judged_batch(kafka_spark).coalesce(1).withColumn("verdict", F.lit("duplicate"))
        with pytest.raises(Exception, match="does not match the output committed to Kafka"):
            writer.write(otherwise, 0)  # batch 0 again, every row now a duplicate
        writer.write(judged_batch(kafka_spark).coalesce(1), 0)  # judged as before: skipped, nothing written twice
    finally:
        writer.close()
    assert committed(kafka_bootstrap, topics["out"]) == Counter(EMITTED)
