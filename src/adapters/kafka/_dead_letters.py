"""Dead letters to a topic, as ``domain._dead_letters`` defines them: the original value and
key (cut to the bound when they are larger), and the metadata in ``dedup.*`` headers.
Written through the engine's shared ``ProducerChannel``: with exactly-once, in the same
transaction as the events.
"""

from __future__ import annotations

from adapters.kafka._producer import ProducerChannel
from adapters.kafka._sizes import message_size
from domain import DEFAULT_MAX_BYTES, DeadLetter, SinkUnavailable, dead_letters

CUTS = 24  # halvings of a refused dead letter's key and value: from 16 MiB to nothing


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
        self._written: dict[tuple[bytes, bytes | None], DeadLetter] = {}  # since the last flush, by message

    def write(self, dead_letter: DeadLetter, bound: int | None = None) -> None:
        room = self.channel.room(
            self.topic, dead_letters.to_headers(dead_letter)
        )  # bounding keeps the headers as they are
        refused = self.channel.refused_alone.get(self.topic)
        if refused is not None:  # the topic's limit is unknown but below that: cut to half of it
            room = min(room, max(0, refused // 2 - message_size(b"", None, dead_letters.to_headers(dead_letter))))
        value, key, headers = dead_letters.to_message(
            dead_letter, min(self.max_bytes, room, *(() if bound is None else (bound,)))
        )
        self.channel.produce(self.topic, value, key, headers)
        if not self.channel.transactional and self.topic not in self.channel.limits_read:
            self._written[(value, key)] = dead_letter

    def flush(self) -> None:
        """Flush; a dead letter the topic refused as too large only at delivery (its limit could
        not be read at start) is written again cut to half its key and value, until it fits."""
        self.channel.flush()
        if self.channel.transactional:
            return  # a refusal dooms the transaction: the committer aborts it and the batch is judged again
        for _ in range(CUTS):
            written, self._written = self._written, {}
            again = [
                (written[(value, key)], len(value or b"") + len(key or b""))
                for value, key, _ in self.channel.take_refused(self.topic)
                if (value, key) in written
            ]
            if not again:
                return
            for dead_letter, size in again:
                self.write(dead_letter, size // 2)
            self.channel.flush()
        raise SinkUnavailable(
            f"dead letters to {self.topic!r} are refused as too large even when cut to {CUTS} halvings of their size"
        )

    def close(self) -> None:
        """The channel is shared; its owner closes it."""
