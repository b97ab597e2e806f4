"""The output contracts against the Kafka adapters, on the real broker the test session
starts (read back with a ``read_committed`` consumer, headers decoded)."""

from __future__ import annotations

import pytest

from adapters.kafka import KafkaDeadLetterSink, KafkaSink, ProducerChannel, parse_kafka_uri, producer_config
from domain import dead_letters
from tests.domain.ports.sink_contract import (
    BOUND,
    UNIQUE_VALUES,
    DeadLetterSinkContract,
    EventSinkContract,
    event,
    record,
)
from tests.support.kafka_io import create_topics, read_topic, unique

pytestmark = pytest.mark.kafka


class KafkaTopic:
    @pytest.fixture(autouse=True)
    def _topic(self, kafka_bootstrap):
        self.bootstrap, self.topic = kafka_bootstrap, unique("contract")
        create_topics(kafka_bootstrap, self.topic)
        self.channel = ProducerChannel(
            producer_config(parse_kafka_uri(f"kafka://{kafka_bootstrap}/{self.topic}", "test"), None), "test sink"
        )
        yield
        self.channel.close()

    def messages(self):
        return read_topic(self.bootstrap, self.topic)


class TestKafkaSink(KafkaTopic, EventSinkContract):
    def make_sink(self):
        return KafkaSink(self.channel, self.topic)

    def written(self):
        return [m.value for m in self.messages()]

    def test_the_kafka_key_is_the_events_unique_value(self):
        sink = self.make_sink()
        sink.write(record(UNIQUE_VALUES[0], 1), event("u-key"))
        sink.flush()
        assert [m.key for m in self.messages()] == [b"u-key"]


class TestKafkaDeadLetterSink(KafkaTopic, DeadLetterSinkContract):
    def make_sink(self):
        return KafkaDeadLetterSink(self.channel, self.topic, BOUND)

    def written(self):
        return [dead_letters.from_headers(m.value, m.key, m.raw_headers) for m in self.messages()]
