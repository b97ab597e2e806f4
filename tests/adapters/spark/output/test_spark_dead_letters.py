"""The Spark engine's dead-letter expressions against the domain's definition (parity).

The same dead letters go through ``domain._dead_letters`` (the reference) and through
``adapters.spark.output._dead_letters`` on a DataFrame shaped like a judged batch; the Kafka
headers must be the same bytes and the JSON documents the same fields and values.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest

from domain import DEFAULT_MAX_BYTES, MAX_ERROR_CHARS, DeadLetter, RawRecord, SourcePosition, dead_letters, millis

pytestmark = pytest.mark.spark

BATCH_SCHEMA = (
    "value binary, kafka_key binary, source string, partition int, offset long, reason string, "
    "detail string, error_class string, attempts int, time_ms long"
)


def letter(value: bytes, key: bytes | None, reason: str, error: str, **changes) -> DeadLetter:
    base = DeadLetter(
        RawRecord(value, SourcePosition("events-in", 1, 1234), key), reason, error, "invalid", 1, 1_795_325_944.125
    )
    return replace(base, **changes)


LETTERS = [
    letter(b"not json", b"k-1", "not_json", "record is not JSON"),
    letter(b"\x80\x81 not utf-8", None, "not_utf8", "record is not UTF-8", time=1_700_000_000.0),
    letter(
        b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":1}',
        b"u-\xc3\xa9",
        "late",
        "event time is older than the watermark minus the rule's lateness",
        time=1_700_000_000.999,
    ),
    letter(b"[1, 2]", b"", "not_object", 'caf\u00e9 \u2603 "quoted" \\ back\nslash ' + "x" * MAX_ERROR_CHARS),
    letter(
        b"x" * 300,
        b"long-key" * 20,
        "bug",
        "KeyError",
        error_class="bug",
        attempts=3,
        record=RawRecord(b"x" * 300, SourcePosition("/data/in/0001.jsonl", 0, 2**40), b"long-key" * 20),
    ),
]


def judged_rows(spark, letters):
    rows = [
        (
            d.record.value,
            d.record.key,
            d.record.position.source,
            d.record.position.partition,
            d.record.position.offset,
            d.reason,
            d.error,
            d.error_class,
            d.attempts,
            millis(d.time),
        )
        for d in letters
    ]
    return spark.createDataFrame(rows, BATCH_SCHEMA)


def test_spark_writes_the_headers_and_document_the_domain_defines(spark):
    from pyspark.sql import functions as F

    from adapters.spark.output import dead_letters as spark_dead_letters

    json_document, kafka_headers = spark_dead_letters.json_document, spark_dead_letters.kafka_headers

    given = {"error_class": F.col("error_class"), "attempts": F.col("attempts"), "time": F.col("time_ms")}
    df = judged_rows(spark, LETTERS).select(
        kafka_headers(given).alias("headers"), json_document(given).alias("document")
    )
    got = df.collect()
    assert len(got) == len(LETTERS)
    for dead_letter, row in zip(LETTERS, got):
        assert [(h["key"], bytes(h["value"])) for h in row["headers"]] == dead_letters.to_headers(dead_letter)
        assert json.loads(row["document"]) == dead_letters.to_document(dead_letter)
        assert f'"time":{dead_letter.time:.3f}' in row["document"]  # plain decimals, not 1.7E9


def test_the_engine_stamps_invalid_one_attempt_and_the_batch_time(spark):
    from adapters.spark.output import dead_letters as spark_dead_letters

    kafka_headers = spark_dead_letters.kafka_headers
    from adapters.spark.shared import with_clock

    before = time.time()
    [row] = with_clock(judged_rows(spark, LETTERS[:1])).select(kafka_headers().alias("headers")).collect()
    decoded = dead_letters.from_headers(b"not json", b"k-1", [(h["key"], bytes(h["value"])) for h in row["headers"]])
    assert (decoded.error_class, decoded.attempts) == ("invalid", 1)
    assert before - 1 <= decoded.time <= time.time() + 1
    assert replace(decoded, time=LETTERS[0].time) == LETTERS[0]


@pytest.mark.parametrize("max_bytes", [DEFAULT_MAX_BYTES, 320, 301, 100, 7, 0])
def test_spark_bounds_the_key_and_value_as_the_domain_does(spark, max_bytes):
    from pyspark.sql import functions as F

    from adapters.spark.output import dead_letters as spark_dead_letters

    bounded_record, json_document = spark_dead_letters.bounded_record, spark_dead_letters.json_document

    given = {"error_class": F.col("error_class"), "attempts": F.col("attempts"), "time": F.col("time_ms")}
    record = bounded_record(max_bytes)
    rows = (
        judged_rows(spark, LETTERS)
        .select(
            record["key"].alias("key"),
            record["value"].alias("value"),
            json_document(given, max_bytes).alias("document"),
        )
        .collect()
    )
    for dead_letter, row in zip(LETTERS, rows):
        value, key, _ = dead_letters.to_message(dead_letter, max_bytes)
        assert (row["key"], row["value"]) == (key, value)
        assert json.loads(row["document"]) == dead_letters.to_document(dead_letter, max_bytes)
