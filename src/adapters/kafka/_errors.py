"""The kafka adapter's errors, each a domain error family (``domain._errors``) so the policies
decide on it without knowing Kafka: a setup error stops the program before any work with one
line; a permanent error is not retried."""

from __future__ import annotations

from domain import PermanentError, SetupError


class KafkaConfigurationError(SetupError):
    """A Kafka URI, setting or topic the engine cannot start with; the message is one line."""


class StateNotShared(KafkaConfigurationError):
    """The consumer group gave this instance part of the topic, and its state lives in this process."""


class ProducerFenced(PermanentError):
    """The producer hit a fatal error (e.g. another instance took over its transactional id)."""


class ProducerStuck(PermanentError):
    """A producer call did not return (a librdkafka hang); only a restart of the engine helps."""


class RecordRejected(PermanentError):
    """The client refused one record for good (e.g. larger than the broker accepts)."""
