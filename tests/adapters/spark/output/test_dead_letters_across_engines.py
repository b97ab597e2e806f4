"""The same bad records through all three engines: a consumer reads the same dead letters, and
the same duplicate reports.

Each engine runs as ``dedup run`` does: the memory engine from a JSONL file to a JSONL
dead-letter file and duplicates file (its only medium), the kafka engine and the Spark engine
from a Kafka topic to a Kafka dead-letter topic and duplicates topic (on the real broker).
Every dead letter is decoded the way a consumer would (``domain._dead_letters``) and compared
across engines: original value and key, reason, error class, attempts, source position and
error text, but not the time; every duplicate report likewise (``domain._duplicates``): the
record, its rule, window and time, and the first copy it repeats: its position and time.

Where the engines legitimately differ, the test says so: the memory engine reads a file
(no key, position = file and line), and the Spark engine's parser words some errors its own
way (``SPARK_ERRORS``, docs/semantics.md "Dead letters").
"""

from __future__ import annotations

import json

import pytest

from adapters.spark.runtime import connector_jars
from domain import DeadLetter, Duplicate, dead_letters, duplicates
from tests.support.kafka_io import create_topics, produce, read_topic, unique

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

T = 1_700_000_000
WATERMARK_SETTER = json.dumps({"id": "e-0", "uniqueValue": "u-0", "type": "APP", "timestamp": T}).encode()
LATE = json.dumps({"id": "e-late", "uniqueValue": "u-late", "type": "APP", "timestamp": T - 100}).encode()
REPEAT = json.dumps({"id": "e-0-again", "uniqueValue": "u-0", "type": "APP", "timestamp": T + 5}).encode()

# (original bytes, reason): the valid event first (it moves the watermark), the late one last
RECORDS = [
    (WATERMARK_SETTER, None),
    (REPEAT, None),  # a duplicate of the first record
    (b"not json", "not_json"),
    (b"[1, 2]", "not_object"),
    (b'{"id":"e-1","uniqueValue":"u-1","type":"APP"}', "missing_field"),
    (b'{"id":"e-2","uniqueValue":"u-2","type":"APP","timestamp":"1"}', "wrong_type"),
    (b'{"id":"e-3","uniqueValue":"u-3","type":"APP","timestamp":253402300800}', "out_of_range"),
    (b"\x80\x81 not utf-8", "not_utf8"),
    (LATE, "late"),
]

# The Spark engine's error text where it is not the domain parser's (the others are the same).
SPARK_ERRORS = {
    "not_json": "record is not JSON",
    "not_object": "record is a JSON value, not an object",
    "out_of_range": "field 'timestamp' is not epoch seconds in 0..253402300799",
    "not_utf8": "record is not UTF-8",
    "late": "event time is older than the watermark minus the rule's lateness",
}


def key_of(value: bytes) -> bytes:
    return b"key-%d" % [v for v, _ in RECORDS].index(value)


def by_offset(letters: list, first_offset: int) -> dict[int, DeadLetter | Duplicate]:
    """Dead letters (or reports) by the input record's index (offsets count from 0, a file's lines from 1)."""
    return {d.record.position.offset - first_offset: d for d in letters}


def run_memory(dedup, tmp_path) -> tuple[dict[int, DeadLetter], dict[int, Duplicate]]:
    source, dlq, dups = tmp_path / "in.jsonl", tmp_path / "dead.jsonl", tmp_path / "dups.jsonl"
    source.write_bytes(b"".join(value + b"\n" for value, _ in RECORDS))
    dedup(
        "--engine",
        "memory",
        "--source",
        f"file:{source}",
        "--sink",
        f"file:{tmp_path / 'out.jsonl'}",
        "--dlq",
        f"file:{dlq}",
        "--duplicates",
        f"file:{dups}",
    )
    letters = [dead_letters.from_document(json.loads(line)) for line in dlq.read_bytes().splitlines()]
    assert {d.record.position.source for d in letters} == {str(source)}
    assert {d.record.position.partition for d in letters} == {0} and {d.record.key for d in letters} == {None}
    reports = [duplicates.from_document(json.loads(line)) for line in dups.read_bytes().splitlines()]
    assert {(d.first.source, d.first.partition) for d in reports} == {(str(source), 0)}
    return by_offset(letters, 1), by_offset(reports, 1)


def run_on_kafka(
    dedup, bootstrap: str, engine: str, *args, **env
) -> tuple[str, dict[int, DeadLetter], dict[int, Duplicate]]:
    topics = {role: unique(f"{engine}-dl-{role}") for role in ("in", "out", "dlq", "dups")}
    create_topics(bootstrap, *topics.values())
    produce(bootstrap, topics["in"], [value for value, _ in RECORDS], key_of)
    uri = {role: f"kafka://{bootstrap}/{topic}" for role, topic in topics.items()}
    dedup(
        "--engine",
        engine,
        "--source",
        uri["in"] + args[0],
        "--sink",
        uri["out"],
        "--dlq",
        uri["dlq"],
        "--duplicates",
        uri["dups"],
        **env,
    )
    letters = [dead_letters.from_headers(m.value, m.key, m.raw_headers) for m in read_topic(bootstrap, topics["dlq"])]
    reports = [duplicates.from_headers(m.value, m.key, m.raw_headers) for m in read_topic(bootstrap, topics["dups"])]
    assert {(d.first.source, d.first.partition) for d in reports} == {(topics["in"], 0)}
    return topics["in"], by_offset(letters, 0), by_offset(reports, 0)


def test_every_engine_writes_the_dead_letters_a_consumer_reads_the_same_way(dedup, kafka_bootstrap, tmp_path):
    if not connector_jars():
        pytest.skip("Spark's Kafka connector jars are not in .cache/jars/spark-kafka (scripts/bootstrap --services)")
    memory, memory_reports = run_memory(dedup, tmp_path)
    kafka_topic, kafka, kafka_reports = run_on_kafka(dedup, kafka_bootstrap, "kafka", "?group=dl&stop_at_end=true")
    # the late record in a micro-batch of its own: Spark judges lateness against earlier micro-batches
    spark_topic, spark, spark_reports = run_on_kafka(
        dedup,
        kafka_bootstrap,
        "spark",
        "",
        DEDUP_SPARK__AVAILABLE_NOW="true",
        DEDUP_SPARK__CHECKPOINT=str(tmp_path / "checkpoint"),
        DEDUP_SPARK__MAX_OFFSETS_PER_TRIGGER=str(len(RECORDS) - 1),
    )
    # 0. each engine reported the duplicate once, as a repeat of the first record, 5 s apart
    first_offset = {id(memory_reports): 1, id(kafka_reports): 0, id(spark_reports): 0}
    for reports in (memory_reports, kafka_reports, spark_reports):
        assert {i: report_view(d, first_offset[id(reports)]) for i, d in reports.items()} == {
            1: (REPEAT, "APP", 30, T + 5, 0, T, 5)
        }
    assert kafka_reports[1].record.key == spark_reports[1].record.key == key_of(REPEAT)
    # 1. each engine dead-lettered exactly the bad records, with their reasons and original bytes
    expected = {i: (value, reason) for i, (value, reason) in enumerate(RECORDS) if reason}
    for letters in (memory, kafka, spark):
        assert {i: (d.record.value, d.reason) for i, d in letters.items()} == expected
    # 2. the kafka engine's dead letters are the memory engine's, plus the key and the topic position
    for i, (value, _) in expected.items():
        assert kafka[i].record.key == key_of(value)
        assert (kafka[i].record.position.source, kafka[i].record.position.partition) == (kafka_topic, 0)
        assert consumer_view(kafka[i]) == consumer_view(memory[i])
    # 3. the Spark engine's are the kafka engine's, but for its own wording of some errors
    for i, (value, reason) in expected.items():
        assert spark[i].record.key == key_of(value)
        assert (spark[i].record.position.source, spark[i].record.position.partition) == (spark_topic, 0)
        assert spark[i].error == SPARK_ERRORS.get(reason, kafka[i].error)
        assert consumer_view(spark[i], error=False) == consumer_view(kafka[i], error=False)


def report_view(report: Duplicate, first_offset: int) -> tuple:
    """What a consumer compares across engines: the record, its rule, window and time, and the index
    of the first copy, its time and the distance (no time of judging, no key, no source name)."""
    return (
        report.record.value,
        report.rule,
        report.window,
        report.event_time,
        report.first.offset - first_offset,
        report.first_time,
        report.apart,
    )


def consumer_view(letter: DeadLetter, error: bool = True) -> tuple:
    """What a consumer compares across engines: no time, no key, no source name or partition."""
    fields = (letter.record.value, letter.reason, letter.error_class, letter.attempts)
    return fields + (letter.error,) if error else fields
