"""Kafka adapters (confluent-kafka) and the ``kafka`` engine.

``config`` (URIs, client settings, redaction), ``topics`` (start-up checks), ``source``,
``producer`` (the shared producer), ``sink``, ``dead_letters``, ``notifications``,
``transactions`` (exactly-once batches), ``errors`` (what it raises) and ``engine`` (the
wiring). Imported only when the kafka engine is chosen.
"""

from adapters.kafka.config import (
    LOG_EVERY,
    ROLES,
    KafkaEndpoint,
    admin_config,
    client_settings,
    consumer_config,
    librdkafka_log,
    parse_kafka_uri,
    producer_config,
    redacted,
    scrub,
)
from adapters.kafka.dead_letters import CUTS, KafkaDeadLetterSink
from adapters.kafka.duplicates import ORIGINAL_HEADERS_ROOM, KafkaDuplicateSink
from adapters.kafka.engine import STUCK_CLOSE_TIMEOUT, KafkaEngine, build_kafka_engine
from adapters.kafka.errors import KafkaConfigurationError, ProducerFenced, ProducerStuck, RecordRejected, StateNotShared
from adapters.kafka.notifications import MAX_PER_POLL, KafkaNotificationSink, KafkaNotificationSource
from adapters.kafka.producer import PURGED, TOO_LARGE, ProducerChannel
from adapters.kafka.sink import KafkaSink, rule_key, unique_value_key
from adapters.kafka.sizes import (
    DEAD_LETTER_HEADERS_ROOM,
    HEADER_OVERHEAD,
    PRODUCER_DEFAULT_BATCH,
    PRODUCER_DEFAULT_MAX,
    RECORD_OVERHEAD,
    message_size,
)
from adapters.kafka.source import DEFAULT_GROUP, HANDOVER_COMMIT_TIMEOUT, KafkaSource, next_offsets
from adapters.kafka.topics import config_error, describe, max_message_bytes, require_topics, unavailable
from adapters.kafka.transactions import TransactionalCommitter, default_transactional_id
from adapters.kafka.upstream import BULK, produce, producer_key

__all__ = [
    "BULK",
    "CUTS",
    "DEAD_LETTER_HEADERS_ROOM",
    "DEFAULT_GROUP",
    "HANDOVER_COMMIT_TIMEOUT",
    "HEADER_OVERHEAD",
    "LOG_EVERY",
    "MAX_PER_POLL",
    "ORIGINAL_HEADERS_ROOM",
    "PRODUCER_DEFAULT_BATCH",
    "PRODUCER_DEFAULT_MAX",
    "PURGED",
    "RECORD_OVERHEAD",
    "ROLES",
    "STUCK_CLOSE_TIMEOUT",
    "TOO_LARGE",
    "KafkaConfigurationError",
    "KafkaDeadLetterSink",
    "KafkaDuplicateSink",
    "KafkaEndpoint",
    "KafkaEngine",
    "KafkaNotificationSink",
    "KafkaNotificationSource",
    "KafkaSink",
    "KafkaSource",
    "ProducerChannel",
    "ProducerFenced",
    "ProducerStuck",
    "RecordRejected",
    "StateNotShared",
    "TransactionalCommitter",
    "admin_config",
    "build_kafka_engine",
    "client_settings",
    "config_error",
    "consumer_config",
    "default_transactional_id",
    "describe",
    "librdkafka_log",
    "max_message_bytes",
    "message_size",
    "next_offsets",
    "parse_kafka_uri",
    "produce",
    "producer_config",
    "producer_key",
    "redacted",
    "require_topics",
    "rule_key",
    "scrub",
    "unavailable",
    "unique_value_key",
]
