"""The options Spark's Kafka source gets: the engine's defaults, the client settings over them,
the source URI's own options over both."""

from __future__ import annotations

from adapters.spark.shared import parse_uri
from adapters.spark.stream import kafka_source_options


def options(uri: str, max_records: int | None = None, **client) -> dict[str, str]:
    return kafka_source_options(parse_uri(uri), max_records, client)


def test_a_kafka_source_reads_committed_records_and_never_waits_on_the_broker_for_records_it_did_not_ask_for():
    got = options("kafka://127.0.0.1:9092/events")
    assert got["kafka.bootstrap.servers"] == "127.0.0.1:9092" and got["subscribe"] == "events"
    assert got["kafka.isolation.level"] == "read_committed" and got["startingOffsets"] == "earliest"
    assert got["kafka.fetch.max.wait.ms"] == "0"
    assert "maxOffsetsPerTrigger" not in got


def test_client_settings_override_the_defaults_and_the_uri_overrides_both():
    got = options(
        "kafka://127.0.0.1:9092/events?kafka.fetch.max.wait.ms=50",
        5000,
        **{"kafka.fetch.max.wait.ms": "20", "kafka.isolation.level": "read_uncommitted"},
    )
    assert got["kafka.fetch.max.wait.ms"] == "50" and got["kafka.isolation.level"] == "read_uncommitted"
    assert got["maxOffsetsPerTrigger"] == "5000"
