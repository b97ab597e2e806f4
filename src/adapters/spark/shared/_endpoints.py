"""Where a Spark job reads and writes: a source or sink URI parsed into an ``Endpoint``.

Shared vocabulary: the stream reads from an endpoint, the checkpoint guard and the writers
name theirs, the start-up checks look them up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

from adapters.kafka import parse_kafka_uri
from adapters.spark.shared._errors import SparkSetupError
from domain import redact_uri


@dataclass(frozen=True)
class Endpoint:
    """A parsed source or sink URI."""

    kind: str  # "kafka" or "jsonl"
    location: str  # bootstrap servers (never with user-info), or a directory
    topic: str | None = None
    options: dict[str, str] = field(default_factory=dict)


def parse_uri(uri: str, role: str = "Kafka") -> Endpoint:
    """A source or sink URI; a Kafka one through the kafka adapter's parser (``parse_kafka_uri``:
    the user-info is dropped there, the servers checked, ``role`` named in its error)."""
    parts = urlsplit(uri)
    if parts.scheme == "kafka":
        kafka = parse_kafka_uri(uri, role)
        return Endpoint("kafka", kafka.bootstrap, kafka.topic, kafka.options)
    if parts.scheme in ("jsonl", "file"):
        return Endpoint("jsonl", parts.path, None, dict(parse_qsl(parts.query)))
    if parts.scheme == "":
        return Endpoint("jsonl", uri, None, {})
    raise SparkSetupError(f"unsupported URI scheme {parts.scheme!r} in {redact_uri(uri)!r} (use kafka:// or jsonl:)")
