"""Dead letters to a topic: the original bytes and key, and why, where from and when in headers.

Headers (UTF-8 text): ``dedup.reason`` (e.g. ``not_json``, ``late``), ``dedup.error`` (the
message, at most 1000 characters), ``dedup.error_class`` (``invalid``, ``bug``,
``transient``), ``dedup.source.topic`` / ``.partition`` / ``.offset``, ``dedup.attempts``
and ``dedup.time`` (epoch seconds with milliseconds). Written through the engine's shared
``ProducerChannel``: with exactly-once, in the same transaction as the events.
"""

from __future__ import annotations

from domain.ports import DeadLetter

from adapters.kafka.producer import ProducerChannel

MAX_ERROR_CHARS = 1000


def dead_letter_headers(dead_letter: DeadLetter) -> list[tuple[str, bytes]]:
    position = dead_letter.record.position
    values = {
        "dedup.reason": dead_letter.reason,
        "dedup.error": dead_letter.error[:MAX_ERROR_CHARS],
        "dedup.error_class": dead_letter.error_class,
        "dedup.source.topic": position.source,
        "dedup.source.partition": str(position.partition),
        "dedup.source.offset": str(position.offset),
        "dedup.attempts": str(dead_letter.attempts),
        "dedup.time": f"{dead_letter.time:.3f}",
    }
    return [(name, value.encode()) for name, value in values.items()]


class KafkaDeadLetterSink:
    """A ``DeadLetterSink`` writing to ``topic``; ``flush`` raises ``SinkUnavailable`` like the channel."""

    def __init__(self, channel: ProducerChannel, topic: str):
        self.channel = channel
        self.topic = topic

    def write(self, dead_letter: DeadLetter) -> None:
        record = dead_letter.record
        self.channel.produce(self.topic, record.value, record.key, dead_letter_headers(dead_letter))

    def flush(self) -> None:
        self.channel.flush()

    def close(self) -> None:
        """The channel is shared; its owner closes it."""
