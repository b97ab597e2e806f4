"""``dedup generate --out kafka://…``: the stream on a topic as an upstream producer writes it.

Every record once, each keyed by its ``uniqueValue`` (the records that have none unkeyed),
so every copy of an event is on one partition, in stream order there.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from adapters.kafka import producer_key
from app import StreamSpec, generate, main
from tests.support.kafka_io import create_topics, read_topic, unique

pytestmark = pytest.mark.kafka


def test_the_stream_is_produced_keyed_by_unique_value(kafka_bootstrap):
    topic = unique("generated")
    create_topics(kafka_bootstrap, topic, partitions=3)

    assert main(["generate", "--events", "300", "--seed", "5", "--out", f"kafka://{kafka_bootstrap}/{topic}"]) == 0

    records, _ = generate(StreamSpec(uniques=300, seed=5))
    messages = read_topic(kafka_bootstrap, topic)
    assert sorted(m.value for m in messages) == sorted(records)
    assert all(m.key == producer_key(m.value) for m in messages)
    assert {m.key is None for m in messages} == {True, False}  # invalid records too, unkeyed
    by_key = defaultdict(list)
    for m in messages:
        by_key[m.key].append(m)
    for key, copies in by_key.items():
        if key is not None:  # every copy on one partition, in stream order
            assert len({m.partition for m in copies}) == 1
            assert [m.value for m in copies] == [r for r in records if producer_key(r) == key]


def test_a_missing_topic_is_named_in_one_line(kafka_bootstrap, capsys):
    assert main(["generate", "--events", "10", "--out", f"kafka://{kafka_bootstrap}/{unique('missing')}"]) != 0
    assert "does not exist" in capsys.readouterr().err
