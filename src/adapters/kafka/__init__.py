"""Kafka adapters (confluent-kafka) and the ``kafka`` engine.

``_config`` (URIs, client settings, redaction), ``_topics`` (start-up checks), ``_source``,
``_producer`` (the shared producer), ``_sink``, ``_dead_letters``, ``_notifications``,
``_transactions`` (exactly-once batches), ``_errors`` (what it raises), ``_closing`` (closing the
clients, bounded) and ``_engine`` (the wiring). Imported only when the kafka engine is chosen.
"""

from adapters.kafka._closing import STUCK_CLOSE_TIMEOUT, STUCK_EXIT_MARGIN, close_clients
from adapters.kafka._config import (
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
from adapters.kafka._dead_letters import CUTS, KafkaDeadLetterSink
from adapters.kafka._duplicates import ORIGINAL_HEADERS_ROOM, KafkaDuplicateSink
from adapters.kafka._engine import KafkaEngine, build_kafka_engine
from adapters.kafka._errors import (
    KafkaConfigurationError,
    ProducerFenced,
    ProducerStuck,
    RecordRejected,
    StateNotShared,
)
from adapters.kafka._notifications import MAX_PER_POLL, KafkaNotificationSink, KafkaNotificationSource
from adapters.kafka._producer import PURGED, TOO_LARGE, ProducerChannel
from adapters.kafka._sink import KafkaSink, rule_key, unique_value_key
from adapters.kafka._sizes import (
    DEAD_LETTER_HEADERS_ROOM,
    HEADER_OVERHEAD,
    PRODUCER_DEFAULT_BATCH,
    PRODUCER_DEFAULT_MAX,
    RECORD_OVERHEAD,
    message_size,
)
from adapters.kafka._source import DEFAULT_GROUP, HANDOVER_COMMIT_TIMEOUT, KafkaSource, next_offsets
from adapters.kafka._topics import config_error, describe, max_message_bytes, require_topics, unavailable
from adapters.kafka._transactions import TransactionalCommitter, default_transactional_id
from adapters.kafka._upstream import BULK, UpstreamProducer, produce, producer_key

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
    "STUCK_EXIT_MARGIN",
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
    "UpstreamProducer",
    "admin_config",
    "build_kafka_engine",
    "client_settings",
    "close_clients",
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
