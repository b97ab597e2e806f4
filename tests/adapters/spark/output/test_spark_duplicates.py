"""The Spark engine's duplicate-report expressions against the domain's definition (parity).

The same reports go through ``domain._duplicates`` (the reference) and through
``adapters.spark.output._duplicates`` on a DataFrame shaped like a judged batch; the Kafka
headers must be the same bytes and the JSON documents the same fields and values.
"""

from __future__ import annotations

import json

import pytest

from domain import Duplicate, Emission, RawRecord, SourcePosition, duplicates, millis

pytestmark = pytest.mark.spark

BATCH_SCHEMA = (
    "value binary, kafka_key binary, source string, partition int, offset long, rule string, "
    "window long, t long, repeats_time long, repeats_owner string, time_ms long"
)


def report(
    value: bytes, key: bytes | None, at: SourcePosition, owner: str, t: int = 1_700_000_100, first: int = 1_700_000_090
) -> Duplicate:
    return Duplicate.of(RawRecord(value, at, key), "APP", 30, t, Emission(first, first + 30, owner), 1_795_325_944.125)


REPORTS = [
    report(b'{"id":"2"}', b"k-1", SourcePosition("events-in", 1, 1234), "events-in:3:17"),
    report(
        b'{"id":"3"}',
        None,
        SourcePosition("file:/data/in/0001.jsonl", 0, 2**40),
        "file:/data/in/0000.jsonl:0:7",
        t=1_700_000_000,
        first=1_700_000_029,
    ),
    report(b'{"id":"4"}', b"", SourcePosition("events-in", 0, 5), ""),  # the state does not know the first copy
    report(b'{"id":"5", "pad": "' + b"x" * 400 + b'"}', b"key" * 50, SourcePosition("t", 2, 9), "t:2:8"),
]


def judged_rows(spark, reports):
    rows = [
        (
            d.record.value,
            d.record.key,
            d.record.position.source,
            d.record.position.partition,
            d.record.position.offset,
            d.rule,
            d.window,
            d.event_time,
            d.first_time,
            d.first.token() if d.first else None,
            millis(d.time),
        )
        for d in reports
    ]
    return spark.createDataFrame(rows, BATCH_SCHEMA)


@pytest.mark.parametrize("max_bytes", [64 * 1024, 300, 0])
def test_spark_writes_the_headers_and_document_the_domain_defines(spark, max_bytes):
    from pyspark.sql import functions as F

    from adapters.spark.output import duplicates as spark_duplicates

    bounded_record, json_document, kafka_headers = (
        spark_duplicates.bounded_record,
        spark_duplicates.json_document,
        spark_duplicates.kafka_headers,
    )

    given = {"time": F.col("time_ms")}
    record = bounded_record(max_bytes)
    df = judged_rows(spark, REPORTS).select(
        kafka_headers(max_bytes, given).alias("headers"),
        json_document(max_bytes, given).alias("document"),
        record["key"].alias("key"),
        record["value"].alias("value"),
    )
    got = df.collect()
    assert len(got) == len(REPORTS)
    for duplicate, row in zip(REPORTS, got):
        expected = duplicates.bounded(duplicate, max_bytes)
        assert [(h["key"], bytes(h["value"])) for h in row["headers"]] == duplicates.to_headers(expected)
        assert json.loads(row["document"]) == duplicates.to_document(expected)
        assert f'"time":{expected.time:.3f}' in row["document"]  # plain decimals, not 1.795325944125E9
        assert duplicates.from_document(json.loads(row["document"])) == expected
        assert (row["key"] and bytes(row["key"]), bytes(row["value"])) == (expected.record.key, expected.record.value)
