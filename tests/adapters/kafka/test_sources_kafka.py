"""The input contract against the Kafka source, on the real broker the test session starts
(records produced to a fresh topic; each test reads it with a consumer group of its own)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from adapters.kafka import KafkaSource, parse_kafka_uri
from domain import SourcePosition
from tests.domain.ports.source_contract import VALUES, EventSourceContract, read
from tests.support.kafka_io import committed_offsets, create_topics, produce, unique

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parents[3]


class KafkaInput(EventSourceContract):
    query = ""

    @pytest.fixture(autouse=True)
    def _topic(self, kafka_bootstrap):
        self.bootstrap, self.topic, self.group = kafka_bootstrap, unique("contract-in"), unique("group")
        create_topics(kafka_bootstrap, self.topic)

    def append(self, values, key_of=None):
        produce(self.bootstrap, self.topic, values, key_of)

    def make_source(self):
        return KafkaSource(
            parse_kafka_uri(f"kafka://{self.bootstrap}/{self.topic}?group={self.group}{self.query}", "source")
        )

    def position_of(self, index):
        return SourcePosition(self.topic, 0, index)


class TestKafkaSource(KafkaInput):
    bounded = False

    def test_a_fresh_source_resumes_after_the_committed_records(self):
        self.append(VALUES[:4])
        source = self.make_source()
        records = read(source, 4)
        source.commit(records[:3])
        source.close()
        assert committed_offsets(self.bootstrap, self.group, self.topic) == [3]
        again = self.make_source()
        assert read(again, 1) == records[3:]
        again.close()

    def test_acknowledgements_reach_the_group_while_the_source_keeps_reading(self):
        # commits are sent asynchronously: each must still reach the broker without a close
        self.append(VALUES[:4])
        source = self.make_source()
        records = read(source, 4)
        try:
            for acknowledged in (2, 4):
                source.commit(records[:acknowledged])
                deadline = time.monotonic() + 30
                while committed_offsets(self.bootstrap, self.group, self.topic) != [acknowledged]:
                    assert time.monotonic() < deadline, f"offset {acknowledged} never committed while reading"
                    assert source.poll(10, 0.2) == []
        finally:
            source.close()

    def test_a_close_right_after_many_acknowledgements_commits_the_last(self):
        self.append(VALUES)
        source = self.make_source()
        records = read(source, len(VALUES))
        for end in range(1, len(records) + 1):
            source.commit(records[end - 1 : end])
        source.close()
        assert committed_offsets(self.bootstrap, self.group, self.topic) == [len(VALUES)]

    def test_a_crash_right_after_confirming_replays_nothing_acknowledged(self):
        # the process dies at once (no close, no flush): only what the broker already took counts
        self.append(VALUES)
        crash = f"""
import os
from adapters.kafka import KafkaSource, parse_kafka_uri
from tests.domain.ports.source_contract import read
source = KafkaSource(parse_kafka_uri("kafka://{self.bootstrap}/{self.topic}?group={self.group}", "source"))
records = read(source, {len(VALUES)})
for end in range(1, len(records) + 1):
    source.commit(records[end - 1:end])
source.confirm_acknowledged()
os._exit(0)
"""
        subprocess.run([sys.executable, "-c", crash], cwd=ROOT, check=True, timeout=120)
        assert committed_offsets(self.bootstrap, self.group, self.topic) == [len(VALUES)]

    def test_each_record_carries_its_message_key(self):
        self.append(VALUES[:3], key_of=lambda value: b"key-%d" % VALUES.index(value))
        source = self.make_source()
        assert [r.key for r in read(source, 3)] == [b"key-0", b"key-1", b"key-2"]
        source.close()


class TestKafkaSourceStoppingAtEnd(KafkaInput):
    """``?stop_at_end=true``: a bounded run over what the topic holds."""

    bounded = True
    query = "&stop_at_end=true"

    def test_exhausted_only_once_every_partition_was_read_to_its_end(self):
        # partition 1 (one record) reaches its end long before partition 0 (2000, read 10 at a time)
        topic, many = unique("contract-in2"), [b'{"n": %d}' % i for i in range(2000)]
        create_topics(self.bootstrap, topic, partitions=2)
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 20})
        for partition, value in [(1, VALUES[0]), *((0, value) for value in many)]:
            producer.produce(topic, value, partition=partition)
        assert producer.flush(30) == 0
        source = KafkaSource(
            parse_kafka_uri(f"kafka://{self.bootstrap}/{topic}?group={self.group}", "source"),
            partitions=2,
            stop_at_end=True,
        )
        records, deadline = [], time.monotonic() + 60
        while not source.exhausted and time.monotonic() < deadline:
            records += source.poll(10, 0.3)
        assert source.exhausted is True
        assert [r.value for r in records if r.position.partition == 0] == many
        assert [r.value for r in records if r.position.partition == 1] == VALUES[:1]
        source.close()
