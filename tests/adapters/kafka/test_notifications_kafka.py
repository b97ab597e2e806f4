"""The notification contract against the Kafka adapters, on the real broker the test session
starts (a fresh notifications topic and dead-letter topic per test, read back with plain consumers)."""

from __future__ import annotations

import hashlib
import time

import pytest

from adapters.kafka import (
    KafkaDeadLetterSink,
    KafkaNotificationSink,
    KafkaNotificationSource,
    ProducerChannel,
    parse_kafka_uri,
    producer_config,
)
from tests.domain.ports.notification_contract import MALFORMED, NOTES, NotificationContract, poll
from tests.support.kafka_io import committed_offsets, create_topics, produce, read_topic, unique

pytestmark = pytest.mark.kafka

NOW = 1_700_000_000.25


class TestKafkaNotifications(NotificationContract):
    @pytest.fixture(autouse=True)
    def _topics(self, kafka_bootstrap):
        self.bootstrap, self.topic, self.dlq = kafka_bootstrap, unique("contract-notes"), unique("contract-dlq")
        self.group = unique("notes-group")
        create_topics(kafka_bootstrap, self.topic, self.dlq)
        self.channel = ProducerChannel(
            producer_config(parse_kafka_uri(f"kafka://{kafka_bootstrap}/{self.topic}", "test"), None), "test notes"
        )
        yield
        self.channel.close()

    def make_sink(self):
        return KafkaNotificationSink(self.channel, self.topic)

    def make_source(self):
        endpoint = parse_kafka_uri(f"kafka://{self.bootstrap}/{self.topic}?group={self.group}", "notifications")
        return KafkaNotificationSource(endpoint, KafkaDeadLetterSink(self.channel, self.dlq), lambda: NOW)

    def append_raw(self, values):
        produce(self.bootstrap, self.topic, values)

    def published(self):
        return [m.value for m in read_topic(self.bootstrap, self.topic)]

    def test_a_notification_is_keyed_by_its_events_unique_value(self):
        self.make_sink().publish(NOTES[1])
        assert [m.key for m in read_topic(self.bootstrap, self.topic)] == [NOTES[1].event.unique_value.encode()]

    def test_a_fresh_source_resumes_after_the_committed_notifications(self):
        sink, source = self.make_sink(), self.make_source()
        sink.publish(NOTES[0])
        sink.publish(NOTES[1])
        assert poll(source, 2) == NOTES[:2]
        source.commit()
        source.close()
        assert committed_offsets(self.bootstrap, self.group, self.topic) == [2]
        sink.publish(NOTES[2])
        again = self.make_source()
        assert poll(again, 1) == NOTES[2:]
        again.close()

    def test_a_malformed_notification_is_dead_lettered_with_the_next_commit(self):
        self.append_raw(MALFORMED[:1])
        self.make_sink().publish(NOTES[0])
        source = self.make_source()
        assert poll(source, 1) == NOTES[:1]
        source.commit()
        [dead] = read_topic(self.bootstrap, self.dlq)
        assert dead.value == MALFORMED[0]
        assert {k: v for k, v in dead.headers.items() if k != "dedup.error"} == {
            "dedup.reason": "bad_notification",
            "dedup.error_class": "invalid",
            "dedup.source.topic": self.topic,
            "dedup.source.partition": "0",
            "dedup.source.offset": "0",
            "dedup.attempts": "1",
            "dedup.time": f"{NOW:.3f}",
            "dedup.original.size": str(len(MALFORMED[0])),
            "dedup.original.sha256": hashlib.sha256(MALFORMED[0]).hexdigest(),
        }
        assert dead.headers["dedup.error"].startswith(("notification is not JSON", "notification is not UTF-8"))
        source.close()

    def test_a_poll_of_only_malformed_notifications_dead_letters_and_commits_them_at_once(self):
        self.append_raw(MALFORMED)
        source, deadline = self.make_source(), time.monotonic() + 30
        while committed_offsets(self.bootstrap, self.group, self.topic) != [len(MALFORMED)]:
            assert source.poll(0.5) == []
            assert time.monotonic() < deadline, "the malformed notifications were never committed"
        dead = read_topic(self.bootstrap, self.dlq)
        assert [m.value for m in dead] == MALFORMED
        assert [m.headers["dedup.reason"] for m in dead] == ["bad_notification"] * 4 + ["missing_field"] + [
            "bad_notification"
        ] * 2
        source.close()
        self.make_sink().publish(NOTES[0])
        again = self.make_source()
        assert poll(again, 1) == NOTES[:1]
        again.close()
        assert len(read_topic(self.bootstrap, self.dlq)) == len(MALFORMED)  # not dead-lettered twice
