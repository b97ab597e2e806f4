"""Dead letters to a topic, as ``domain.dead_letters`` defines them: the original value and
key (cut to the bound when they are larger), and the metadata in ``dedup.*`` headers.
Written through the engine's shared ``ProducerChannel``: with exactly-once, in the same
transaction as the events.
"""

from __future__ import annotations

from domain.dead_letters import DEFAULT_MAX_BYTES, DeadLetter, to_headers, to_message

from adapters.kafka.producer import ProducerChannel


class KafkaDeadLetterSink:
    """A ``DeadLetterSink`` writing to ``topic``; ``flush`` raises ``SinkUnavailable`` like the channel.

    Every dead letter fits its topic: its key plus value are bounded by ``max_bytes`` and by
    what the topic takes besides the headers (``ProducerChannel.room``), so a record too large
    for the topic is dead-lettered cut, never refused.
    """

    def __init__(self, channel: ProducerChannel, topic: str, max_bytes: int = DEFAULT_MAX_BYTES):
        self.channel = channel
        self.topic = topic
        self.max_bytes = max_bytes

    def write(self, dead_letter: DeadLetter) -> None:
        room = self.channel.room(self.topic, to_headers(dead_letter))  # bounding keeps the headers as they are
        self.channel.produce(self.topic, *to_message(dead_letter, min(self.max_bytes, room)))

    def flush(self) -> None:
        self.channel.flush()

    def close(self) -> None:
        """The channel is shared; its owner closes it."""
