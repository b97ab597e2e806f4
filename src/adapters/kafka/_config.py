"""Kafka URIs and client settings: ``kafka://HOST:PORT[,HOST:PORT]/TOPIC?group=G&...``.

Query parameters: ``group`` (the consumer group), ``start=earliest|latest`` (where a new
group starts; earliest by default), ``stop_at_end=true`` (a bounded run: stop at the end of
the topic); any other parameter is a librdkafka setting for the clients of that URI (e.g.
``client.id=x``).

Settings shared by every client (``security.protocol``, ``sasl.*``, ``ssl.*``…) come as a
dict of librdkafka settings; a key prefixed ``consumer.`` or ``producer.`` applies to that
kind of client only. The settings the delivery guarantees rest on (manual offset commits,
idempotence, ``acks=all``, the transactional id) always win. Secrets are never logged:
settings are shown through ``domain._redaction`` (:func:`redacted`, :func:`scrub`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from adapters.kafka._errors import KafkaConfigurationError
from domain import redact, redact_settings, redact_uri, remember, secrets_of_settings

ROLES = ("consumer", "producer")
_TRUE = ("1", "true", "yes", "on")
librdkafka_log = logging.getLogger("adapters.kafka.librdkafka")
LOG_EVERY = 10.0  # seconds between two warnings of one kind of failure that repeats (reconnects, commits)


@dataclass(frozen=True)
class KafkaEndpoint:
    """Where one input or output lives: brokers, topic, and its own client settings."""

    bootstrap: str
    topic: str
    group: str | None = None
    start: str = "earliest"
    stop_at_end: bool = False
    options: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"kafka://{self.bootstrap}/{self.topic}"


def parse_kafka_uri(uri: str, role: str) -> KafkaEndpoint:
    """Parse ``uri`` (the ``role`` names it in errors, e.g. ``source``); raises ``KafkaConfigurationError``."""
    parts = urlsplit(uri)
    topic = parts.path.strip("/")
    if parts.scheme != "kafka" or not parts.netloc or not topic or "/" in topic:
        raise KafkaConfigurationError(
            f"invalid {role} URI {redact_uri(_without_query(uri))!r}: expected kafka://HOST:PORT/TOPIC[?group=GROUP]"
        )
    bootstrap = parts.netloc.rpartition("@")[2]
    for server in bootstrap.split(","):
        host, _, port = server.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise KafkaConfigurationError(
                f"invalid {role} URI {redact_uri(_without_query(uri))!r}: {server!r} is "
                "not HOST:PORT (a port is a number from 1 to 65535)"
            )
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    start = query.pop("start", "earliest")
    if start not in ("earliest", "latest"):
        raise KafkaConfigurationError(f"invalid {role} URI parameter start={start!r}: use earliest or latest")
    return KafkaEndpoint(
        bootstrap,
        topic,
        query.pop("group", None) or None,
        start,
        query.pop("stop_at_end", "false").lower() in _TRUE,
        query,
    )


def client_settings(settings: Mapping[str, Any] | None, role: str | None) -> dict[str, str]:
    """The passthrough settings for one kind of client: unprefixed keys plus ``role.``-prefixed ones."""
    out: dict[str, str] = {}
    for key, value in (settings or {}).items():
        prefix, dot, rest = key.partition(".")
        if dot and prefix in ROLES:
            if prefix == role:
                out[rest] = str(value)
        else:
            out[key] = str(value)
    return out


def consumer_config(
    endpoint: KafkaEndpoint, settings: Mapping[str, Any] | None, group: str, partition_eof: bool = False
) -> dict[str, Any]:
    defaults = {
        "auto.offset.reset": endpoint.start,
        "isolation.level": "read_committed",
        "enable.partition.eof": str(partition_eof).lower(),
    }
    enforced = {
        "bootstrap.servers": endpoint.bootstrap,
        "group.id": group,
        "enable.auto.commit": "false",
        "enable.auto.offset.store": "false",
    }
    return _with_logging({**defaults, **client_settings(settings, "consumer"), **endpoint.options, **enforced})


def producer_config(
    endpoint: KafkaEndpoint, settings: Mapping[str, Any] | None, transactional_id: str | None = None
) -> dict[str, Any]:
    defaults = {"linger.ms": "5", "delivery.report.only.error": True}
    enforced = {"bootstrap.servers": endpoint.bootstrap, "enable.idempotence": "true", "acks": "all"}
    if transactional_id:
        enforced["transactional.id"] = transactional_id
    return _with_logging({**defaults, **client_settings(settings, "producer"), **endpoint.options, **enforced})


def admin_config(endpoint: KafkaEndpoint, settings: Mapping[str, Any] | None) -> dict[str, Any]:
    return _with_logging(
        {**client_settings(settings, None), **endpoint.options, "bootstrap.servers": endpoint.bootstrap}
    )


def redacted(config: Mapping[str, Any]) -> dict[str, Any]:
    """A client's settings as they may be shown (``domain._redaction``)."""
    return redact_settings({k: v for k, v in config.items() if k != "logger"})


def scrub(message: str, config: Mapping[str, Any]) -> str:
    """``message`` with the secrets of ``config`` masked (librdkafka may echo a bad value)."""
    remember(secrets_of_settings({k: v for k, v in config.items() if isinstance(v, str)}))
    return redact(message)


def _with_logging(config: dict[str, Any]) -> dict[str, Any]:
    """librdkafka's own log lines go to Python logging instead of stderr."""
    return {**config, "logger": librdkafka_log}


def _without_query(uri: str) -> str:
    return uri.split("?", 1)[0]
