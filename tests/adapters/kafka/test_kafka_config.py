"""Kafka URIs and client settings (no broker needed)."""

from __future__ import annotations

import pytest

from adapters.kafka import (
    KafkaConfigurationError,
    KafkaEndpoint,
    consumer_config,
    parse_kafka_uri,
    producer_config,
    redacted,
    scrub,
)


@pytest.mark.parametrize(
    "uri, expected",
    [
        ("kafka://127.0.0.1:9092/events?group=dedup", KafkaEndpoint("127.0.0.1:9092", "events", "dedup")),
        ("kafka://a:1,b:2/events", KafkaEndpoint("a:1,b:2", "events")),
        (
            "kafka://h:1/events?group=g&start=latest&stop_at_end=true&client.id=me",
            KafkaEndpoint("h:1", "events", "g", "latest", True, {"client.id": "me"}),
        ),
        ("kafka://user:pw@h:1/events", KafkaEndpoint("h:1", "events")),
    ],
)
def test_uris(uri, expected):
    assert parse_kafka_uri(uri, "source") == expected


@pytest.mark.parametrize(
    "uri", ["kafka://h:1", "kafka://h:1/", "file:x", "kafka:///events", "kafka://h:1/a/b", "kafka://h:1/t?start=middle"]
)
def test_bad_uris_are_one_line_errors_naming_the_role(uri):
    with pytest.raises(KafkaConfigurationError, match="sink"):
        parse_kafka_uri(uri, "sink")


def test_the_uri_never_shows_its_query_in_errors():
    with pytest.raises(KafkaConfigurationError) as error:
        parse_kafka_uri("kafka://h:1/a/b?sasl.password=s3cret", "source")
    assert "s3cret" not in str(error.value)


def test_settings_reach_the_right_clients_and_guarantees_cannot_be_turned_off():
    settings = {
        "security.protocol": "SSL",
        "consumer.fetch.min.bytes": "10",
        "producer.linger.ms": "50",
        "enable.auto.commit": "true",
        "acks": "1",
        "enable.idempotence": "false",
    }
    endpoint = parse_kafka_uri("kafka://h:1/t?group=g&client.id=c", "source")
    consumer = consumer_config(endpoint, settings, "g")
    producer = producer_config(endpoint, settings, "txn-1")
    assert (consumer["security.protocol"], consumer["fetch.min.bytes"], consumer["client.id"]) == ("SSL", "10", "c")
    assert "linger.ms" not in consumer and "fetch.min.bytes" not in producer
    assert (consumer["enable.auto.commit"], consumer["enable.auto.offset.store"]) == ("false", "false")
    assert (producer["acks"], producer["enable.idempotence"], producer["linger.ms"]) == ("all", "true", "50")
    assert producer["transactional.id"] == "txn-1"


def test_secrets_are_redacted_and_scrubbed():
    config = {
        "sasl.password": "pw-123",
        "ssl.key.password": "k-456",
        "sasl.oauthbearer.client.secret": "c-789",
        "sasl.jaas.config": "x",
        "ssl.key.pem": "-----BEGIN",
        "sasl.username": "alice",
    }
    shown = redacted(config)
    assert shown["sasl.username"] == "alice"
    assert {v for k, v in shown.items() if k != "sasl.username"} == {"***"}
    assert scrub('Invalid value "pw-123" for sasl.password', config) == 'Invalid value "***" for sasl.password'


@pytest.mark.parametrize(
    "uri",
    [
        "kafka://user:Sup3r@h1:9092,h2:9093/events?maxOffsetsPerTrigger=5",
        "kafka://h1:9092,h2:9093/events?maxOffsetsPerTrigger=5",
    ],
)
def test_both_engines_read_a_kafka_uri_through_one_parser_that_drops_the_user_info(uri):
    from adapters.spark.shared import parse_uri

    kafka, spark = parse_kafka_uri(uri, "source"), parse_uri(uri, "source")
    assert (kafka.bootstrap, kafka.topic, kafka.options) == ("h1:9092,h2:9093", "events", {"maxOffsetsPerTrigger": "5"})
    assert (spark.kind, spark.location, spark.topic, spark.options) == (
        "kafka",
        kafka.bootstrap,
        "events",
        kafka.options,
    )


def test_the_spark_engine_refuses_a_kafka_uri_with_a_bad_port_in_one_line_naming_the_role_without_the_password():
    from adapters.spark.shared import parse_uri

    with pytest.raises(KafkaConfigurationError) as refused:
        parse_uri("kafka://admin:Sup3r@h:99999/t", "sink")
    assert str(refused.value).startswith("invalid sink URI") and "Sup3r" not in str(refused.value)
