"""Duplicate reports to a topic, as ``domain._duplicates`` defines them: the original value and
key, and the metadata in ``dedup.*`` headers. Written through the engine's shared
``ProducerChannel``: with exactly-once, in the same transaction as the events.
"""

from __future__ import annotations

from adapters.kafka._producer import ProducerChannel
from domain import Duplicate, duplicates


class KafkaDuplicateSink:
    """A ``DuplicateSink`` writing to ``topic``; ``flush`` raises ``SinkUnavailable`` like the channel.

    A report always fits its topic: a record larger than the topic takes beside the headers
    (``ProducerChannel.room``) is carried cut, named by ``original.size`` and ``original.sha256``.
    """

    def __init__(self, channel: ProducerChannel, topic: str):
        self.channel = channel
        self.topic = topic

    def write(self, duplicate: Duplicate) -> None:
        headers = duplicates.to_headers(duplicate)
        room = self.channel.room(self.topic, headers + ORIGINAL_HEADERS_ROOM)
        carried = duplicates.bounded(duplicate, room)
        if carried is not duplicate:  # cut to fit: its headers name the original
            headers = duplicates.to_headers(carried)
        self.channel.produce(self.topic, carried.record.value, carried.record.key, headers)

    def flush(self) -> None:
        self.channel.flush()

    def close(self) -> None:
        """The channel is shared; its owner closes it."""


ORIGINAL_HEADERS_ROOM = [("dedup.original.size", b"0" * 20), ("dedup.original.sha256", b"0" * 64)]
"""Room for the headers a cut report gains, kept free whether or not it is cut."""
