"""Start-up checks: the brokers answer and every topic the engine uses exists; and how
large a message each topic the engine writes takes.

Only whole-cluster metadata is requested (never one topic by name), so a check can never
make a broker with ``auto.create.topics.enable`` create a misspelt topic.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource

from adapters.kafka._config import KafkaEndpoint, admin_config, scrub
from adapters.kafka._errors import KafkaConfigurationError
from domain import SinkUnavailable, SourceUnavailable, TransientError, first_line

log = logging.getLogger(__name__)


def require_topics(
    endpoints: Sequence[tuple[str, KafkaEndpoint]], settings: Mapping[str, Any] | None, timeout: float
) -> dict[str, int]:
    """The partition count of each role's topic; raises a one-line domain error naming the role.

    An unreachable broker raises ``SourceUnavailable`` (for the source) or ``SinkUnavailable``;
    a missing topic raises ``KafkaConfigurationError``.
    """
    counts, listings = {}, {}
    for role, endpoint in endpoints:
        if endpoint.bootstrap not in listings:
            listings[endpoint.bootstrap] = _list_topics(role, endpoint, settings, timeout)
        partitions = listings[endpoint.bootstrap].get(endpoint.topic)
        if partitions is None:
            raise KafkaConfigurationError(
                f"kafka topic {endpoint.topic!r} ({role}) does not exist on {endpoint.bootstrap}; create it first"
            )
        counts[role] = partitions
    return counts


def _list_topics(role: str, endpoint: KafkaEndpoint, settings, timeout: float) -> dict[str, int]:
    config = admin_config(endpoint, settings)
    try:
        admin = AdminClient(config)
    except KafkaException as exc:
        raise config_error(exc, role, config) from None
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        error = unavailable(role)
        raise error(
            f"kafka broker {endpoint.bootstrap} unreachable ({role} {endpoint.topic!r}): no metadata "
            f"within {timeout:g}s ({scrub(describe(exc), config)})"
        ) from None
    return {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}


def max_message_bytes(endpoint: KafkaEndpoint, settings: Mapping[str, Any] | None, timeout: float) -> int | None:
    """The topic's ``max.message.bytes`` (the broker's default unless the topic sets it); None, logged,
    when its configuration cannot be read (e.g. not authorised): its messages are then not checked."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, endpoint.topic)
    try:
        admin = AdminClient(admin_config(endpoint, settings))
        [future] = admin.describe_configs([resource], request_timeout=timeout).values()
        return int(future.result(timeout)["max.message.bytes"].value)
    except (KafkaException, KeyError, TypeError, ValueError) as exc:
        log.warning(
            "cannot read max.message.bytes of %s (%s): messages too large for it are not caught before "
            "they are produced",
            endpoint,
            describe(exc),
        )
        return None


def unavailable(role: str) -> type[TransientError]:
    return SourceUnavailable if role in ("source", "notifications") else SinkUnavailable


def describe(exc: BaseException) -> str:
    """A KafkaException's librdkafka text (``Local: Broker transport failure``), one line."""
    error: Any = exc.args[0] if exc.args else None  # a KafkaError, or whatever else the exception carries
    return first_line(exc, error.str() if hasattr(error, "str") else str(exc))


def config_error(exc: BaseException, role: str, config: Mapping[str, Any]) -> KafkaConfigurationError:
    """A client that refused its configuration (unknown or invalid setting)."""
    return KafkaConfigurationError(f"invalid kafka setting for the {role}: {scrub(describe(exc), config)}")
