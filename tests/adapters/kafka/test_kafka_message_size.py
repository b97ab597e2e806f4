"""The producer refuses a message before queuing it exactly when ``_sizes.message_size`` says
it exceeds the topic's or the producer's limit: ``ProducerChannel.produce`` writes that sum
out for the usual message (no headers), and must not drift from it."""

from __future__ import annotations

import pytest

from adapters.kafka import ProducerChannel, message_size
from domain import RecordTooLarge

LIMIT = 1_000  # the topic's max.message.bytes in these cases
PRODUCER_MAX = 2_000


@pytest.fixture
def channel():
    # no broker: produce only queues (nothing is delivered, nothing is flushed)
    channel = ProducerChannel(
        {"bootstrap.servers": "127.0.0.1:1", "message.max.bytes": PRODUCER_MAX, "log_level": 0}, "size test producer"
    )
    channel.limits["limited"] = LIMIT
    yield channel
    channel.producer.purge()


@pytest.mark.parametrize("topic", ["limited", "unlimited"])
@pytest.mark.parametrize("key_length", [None, 0, 1, 40])
@pytest.mark.parametrize("headers", [None, [("dedup.reason", b"late")]], ids=["plain", "headers"])
def test_a_message_is_refused_exactly_when_its_size_exceeds_the_limit(channel, topic, key_length, headers):
    key = None if key_length is None else b"k" * key_length
    limit = min(channel.limits.get(topic, PRODUCER_MAX), PRODUCER_MAX)
    room = limit - message_size(b"", key, headers)
    for value_length in (room - 1, room, room + 1):
        value = b"v" * value_length
        too_large = message_size(value, key, headers) > limit
        if too_large:
            with pytest.raises(RecordTooLarge):
                channel.produce(topic, value, key, headers)
        else:
            channel.produce(topic, value, key, headers)
        assert too_large == (value_length == room + 1)
