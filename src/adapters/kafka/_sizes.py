"""How many bytes a Kafka broker counts for one message, to tell before producing whether a
topic takes it: a message over the topic's ``max.message.bytes`` is refused at delivery, which
fails the flush and stalls the engine; one over the producer's ``message.max.bytes`` is
refused by the client.

``message_size`` is an upper bound of the record batch that one message makes on its own,
uncompressed (Kafka's record format v2: a 61-byte batch header, then the record, its lengths
as varints of at most 5 or 10 bytes). It leaves no room for error, only a few spare bytes.
"""

from __future__ import annotations

from collections.abc import Iterable

RECORD_OVERHEAD = 100  # the batch header (61 bytes) and the record's own fields at their longest (36)
HEADER_OVERHEAD = 10  # a header's two varint lengths
PRODUCER_DEFAULT_MAX = 1_000_000  # librdkafka's message.max.bytes
PRODUCER_DEFAULT_BATCH = 1_000_000  # librdkafka's batch.size
DEAD_LETTER_HEADERS_ROOM = (
    16 * 1024
)  # the dedup.* headers of any dead letter fit (an error text is at most 4,000 bytes)


def message_size(
    value: bytes | None, key: bytes | None = None, headers: Iterable[tuple[str, bytes | None]] | None = None
) -> int:
    """An upper bound of the bytes a broker counts for a message with ``value``, ``key`` and ``headers``."""
    if not headers:
        return RECORD_OVERHEAD + len(value or b"") + len(key or b"")
    header_bytes = sum(HEADER_OVERHEAD + len(name.encode()) + len(data or b"") for name, data in headers)
    return RECORD_OVERHEAD + len(value or b"") + len(key or b"") + header_bytes
