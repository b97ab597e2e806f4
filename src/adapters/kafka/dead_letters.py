"""Dead letters to a topic, as ``domain.dead_letters`` defines them: the original value and
key, and the metadata in ``dedup.*`` headers. Written through the engine's shared
``ProducerChannel``: with exactly-once, in the same transaction as the events.
"""

from __future__ import annotations

from domain.dead_letters import DeadLetter, to_headers

from adapters.kafka.producer import ProducerChannel


class KafkaDeadLetterSink:
    """A ``DeadLetterSink`` writing to ``topic``; ``flush`` raises ``SinkUnavailable`` like the channel."""

    def __init__(self, channel: ProducerChannel, topic: str):
        self.channel = channel
        self.topic = topic

    def write(self, dead_letter: DeadLetter) -> None:
        record = dead_letter.record
        self.channel.produce(self.topic, record.value, record.key, to_headers(dead_letter))

    def flush(self) -> None:
        self.channel.flush()

    def close(self) -> None:
        """The channel is shared; its owner closes it."""
