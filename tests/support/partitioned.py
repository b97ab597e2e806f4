"""Keyed multi-partition topics as producers write them, and what a correct engine makes of them.

``keyed_topic`` spreads a generated stream over ``partitions`` by ``uniqueValue`` (records
without one by their bytes), the way a producer keyed by ``uniqueValue`` does, and can make
one partition lag far behind the others in event time. ``expected`` judges the stream with
the domain core and the in-memory store, read in order from one partition, without the
lag: whatever the partition count, batch size and interleaving, and however far one
partition lags, an engine must emit and dead-letter exactly those records.
"""

from __future__ import annotations

import json
import zlib
from collections import Counter
from dataclasses import dataclass

from adapters.kafka import parse_kafka_uri, produce, producer_key
from app import StreamSpec, generate
from domain import InvalidEvent, parse_event
from tests.support.kafka_io import create_topics
from tests.support.streams import reference

LAG = 3600  # the lagging partition's events are this much older than the others'


@dataclass(frozen=True)
class KeyedTopic:
    records: list[tuple[int, bytes | None, bytes]]  # (partition, key, value) in production order
    partitions: int
    originals: list[bytes]  # the values before the lagging partition's were shifted

    def values(self) -> list[bytes]:
        return [value for _, _, value in self.records]

    def expected(self) -> tuple[Counter, Counter]:
        """(emitted, dead-lettered) values: the reference judgement of the stream in order."""
        judged = reference(self.originals)
        produced = dict(zip(self.originals, self.values()))
        return Counter(produced[v] for v in judged.emitted), Counter(produced[v] for v in judged.dead_letters)


def keyed_topic(partitions: int, spec: StreamSpec, lagging: int | None = None) -> KeyedTopic:
    return spread(generate(spec)[0], partitions, lagging)


def spread(values: list[bytes], partitions: int, lagging: int | None = None) -> KeyedTopic:
    """``values`` keyed by ``uniqueValue`` (records without one by their bytes) over ``partitions``."""
    records = []
    for value in values:
        key = producer_key(value)
        partition = zlib.crc32(key or value) % partitions
        if partition == lagging:
            value = _shifted(value, -LAG)
        records.append((partition, key, value))
    return KeyedTopic(records, partitions, values)


def produce_keyed(bootstrap: str, topic: str, keyed: KeyedTopic) -> None:
    create_topics(bootstrap, topic, partitions=keyed.partitions)
    produce(parse_kafka_uri(f"kafka://{bootstrap}/{topic}", "preload"), keyed.records)


def _shifted(value: bytes, seconds: int) -> bytes:
    try:
        event = parse_event(value)
    except InvalidEvent:
        return value
    return json.dumps({**event.to_wire(), "timestamp": event.timestamp + seconds}).encode()
