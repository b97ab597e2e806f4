"""The ``kafka`` engine: the domain's batch pipeline over Kafka clients.

consume → deduplicate (the domain core, state in memory or Redis) → produce → acknowledge.
At-least-once by default: a batch's offsets are committed after its events and dead letters
(and duplicate reports, when asked for) are flushed. With ``exactly_once`` every batch is one
Kafka transaction holding its events, its dead letters, its duplicate reports and its input
offsets (``TransactionalCommitter``); the outputs share one transactional producer. Exactly-once output across a crash also needs state that survives
the crash (Redis): memory state starts empty after a restart.

Start-up fails with a one-line domain error when a broker does not answer within
``metadata_timeout`` or a topic does not exist. It also reads how large a message each
output topic takes (``max.message.bytes``): a unique event larger than the events topic
takes is refused before it is produced (``RecordTooLarge``: the ``invalid`` policy, by default
dead-lettered with reason ``oversize``), dead letters are cut to fit theirs, and no producer
batch is larger than a topic takes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from adapters._system import InMemoryMetrics
from adapters.kafka._closing import STUCK_CLOSE_TIMEOUT, close_clients
from adapters.kafka._config import KafkaEndpoint, parse_kafka_uri, producer_config
from adapters.kafka._dead_letters import KafkaDeadLetterSink
from adapters.kafka._duplicates import KafkaDuplicateSink
from adapters.kafka._errors import KafkaConfigurationError
from adapters.kafka._notifications import KafkaNotificationSink, KafkaNotificationSource
from adapters.kafka._producer import ProducerChannel
from adapters.kafka._sink import KafkaSink, rule_key
from adapters.kafka._sizes import PRODUCER_DEFAULT_BATCH
from adapters.kafka._source import KafkaSource
from adapters.kafka._topics import max_message_bytes, require_topics
from adapters.kafka._transactions import TransactionalCommitter, default_transactional_id
from domain import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_BATCH_DELAY,
    DEFAULT_MAX_BYTES,
    Accounting,
    BatchPipeline,
    Deduplicator,
    Delivery,
    Metrics,
)

log = logging.getLogger(__name__)


@dataclass
class KafkaEngine:
    """The batch pipeline over Kafka clients it owns: ``run`` closes them when it returns or raises."""

    pipeline: BatchPipeline
    resources: list = field(default_factory=list)
    on_batch: Callable[[Accounting], None] | None = None
    stuck_close_timeout: float = STUCK_CLOSE_TIMEOUT

    def run(self, stop: threading.Event | None = None) -> Accounting:
        """``BatchPipeline.run``: until the input ends or ``stop`` is set; returns the totals."""
        try:
            return self.pipeline.run(stop, self._polled)
        finally:
            self.close()

    def _polled(self, totals: Accounting) -> None:
        """After every poll: the source's lag per partition as ``kafka_lag`` gauges, then ``on_batch``."""
        source = self.pipeline.source
        assert isinstance(source, KafkaSource)  # build_kafka_engine's: only it has a lag
        for (topic, partition), lag in source.lag().items():
            self.pipeline.metrics.gauge("kafka_lag", lag, topic=topic, partition=str(partition))
        if self.on_batch is not None:
            self.on_batch(totals)

    def close(self) -> None:
        """Abort an open transaction, leave the consumer groups, flush and close the producers
        (``close_clients``: bounded, even when librdkafka stopped answering)."""
        committer = self.pipeline.committer
        assert committer is not None  # set by BatchPipeline.__post_init__
        committer.abort()
        close_clients(self.resources, self.stuck_close_timeout)


def build_kafka_engine(
    core: Deduplicator,
    source_uri: str,
    sink_uri: str,
    dlq_uri: str | None,
    notifications_uri: str | None = None,
    *,
    exactly_once: bool = False,
    kafka_settings: Mapping[str, Any] | None = None,
    transactional_id: str | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    metrics: Metrics | None = None,
    poll_timeout: float = 0.5,
    max_batch_delay: float = DEFAULT_MAX_BATCH_DELAY,
    stop_at_end: bool | None = None,
    notifications_out_uri: str | None = None,
    metadata_timeout: float = 10.0,
    flush_timeout: float = 30.0,
    dead_letter_max_bytes: int = DEFAULT_MAX_BYTES,
    duplicates_uri: str | None = None,
) -> KafkaEngine:
    """Check the brokers and topics, then wire the Kafka adapters around ``core``.

    A batch closes when it holds ``batch_size`` records or its oldest record has waited
    ``max_batch_delay`` s (``domain._pipeline``); an idle topic is waited on ``poll_timeout`` s per poll.
    ``kafka_settings`` are librdkafka settings for every client (``consumer.``/``producer.``
    prefixes target one kind). ``stop_at_end`` overrides the source URI's ``?stop_at_end=``.
    ``dead_letter_max_bytes`` bounds a dead letter's key plus value (``domain._dead_letters``).
    ``duplicates_uri``: a topic for the report of every duplicate (``domain._duplicates``), off when None.
    Raises ``KafkaConfigurationError`` (bad URI or setting, missing topic) or
    ``SourceUnavailable``/``SinkUnavailable`` (a broker that does not answer).
    """
    settings = dict(kafka_settings or {})
    endpoints = _endpoints(source_uri, sink_uri, dlq_uri, notifications_uri, notifications_out_uri, duplicates_uri)
    if exactly_once:
        _require_one_cluster(endpoints)
    partitions = require_topics(list(endpoints.items()), settings, metadata_timeout)
    limits = _write_limits(endpoints, settings, metadata_timeout)
    resources: list = []
    try:
        source = KafkaSource(
            endpoints["source"],
            settings,
            partitions=partitions["source"],
            stop_at_end=stop_at_end,
            whole_topic=not core.state.durable,
        )
        resources.append(source)
        txn_id = transactional_id or default_transactional_id(source) if exactly_once else None
        channels = _Channels(settings, flush_timeout, resources, txn_id, limits)
        delivery = _delivery(core, endpoints, channels, dead_letter_max_bytes)
        notifications = _notification_source(
            core, endpoints, settings, channels, source.group, resources, dead_letter_max_bytes
        )
        committer = TransactionalCommitter(channels.to(endpoints["sink"]), source) if exactly_once else None
    except BaseException:
        close_clients(resources)
        raise
    log.info(
        "kafka engine: %s (group %s) -> %s, dead letters -> %s, duplicates -> %s, %s",
        endpoints["source"],
        source.group,
        endpoints["sink"],
        endpoints["dlq"],
        endpoints.get("duplicates", "(off)"),
        f"exactly-once ({txn_id})" if exactly_once else "at-least-once",
    )
    pipeline = BatchPipeline(
        core,
        source,
        delivery,
        metrics or InMemoryMetrics(),
        committer,
        notifications=notifications,
        batch_size=batch_size,
        poll_timeout=poll_timeout,
        max_batch_delay=max_batch_delay,
    )
    return KafkaEngine(pipeline, resources)


def _delivery(
    core: Deduplicator, endpoints: dict[str, KafkaEndpoint], channels: _Channels, dead_letter_max_bytes: int
) -> Delivery:
    sink = KafkaSink(channels.to(endpoints["sink"]), endpoints["sink"].topic, rule_key(core.rules))
    dead_letters = KafkaDeadLetterSink(channels.to(endpoints["dlq"]), endpoints["dlq"].topic, dead_letter_max_bytes)
    out, reports = endpoints.get("notifications_out"), endpoints.get("duplicates")
    notification_sink = KafkaNotificationSink(channels.to(out), out.topic) if out else None
    duplicates = KafkaDuplicateSink(channels.to(reports), reports.topic) if reports else None
    return Delivery(core, sink, dead_letters, notification_sink, duplicates)


def _notification_source(
    core, endpoints, settings, channels, group, resources, dead_letter_max_bytes
) -> KafkaNotificationSource | None:
    if "notifications" not in endpoints:
        return None
    # read outside any transaction: invalid notifications are dead-lettered by a plain producer
    dead_letters = KafkaDeadLetterSink(channels.plain(endpoints["dlq"]), endpoints["dlq"].topic, dead_letter_max_bytes)
    source = KafkaNotificationSource(
        endpoints["notifications"], dead_letters, core.clock.now, settings, group=f"{group}-notifications"
    )
    resources.insert(0, source)
    return source


class _Channels:
    """One producer per cluster (transactional under exactly-once), plus a plain one when needed."""

    def __init__(self, settings, flush_timeout, resources, transactional_id, limits=None) -> None:
        self.settings, self.flush_timeout, self.resources = settings, flush_timeout, resources
        self.transactional_id = transactional_id
        self.limits: dict[str, dict[str, int]] = limits or {}  # bootstrap -> topic -> max.message.bytes
        self._by_cluster: dict[tuple[str, bool], ProducerChannel] = {}

    def to(self, endpoint: KafkaEndpoint) -> ProducerChannel:
        return self._channel(endpoint, self.transactional_id)

    def plain(self, endpoint: KafkaEndpoint) -> ProducerChannel:
        return self._channel(endpoint, None)

    def _channel(self, endpoint: KafkaEndpoint, transactional_id: str | None) -> ProducerChannel:
        key = (endpoint.bootstrap, transactional_id is not None)
        if key not in self._by_cluster:
            name = f"kafka producer ({endpoint.bootstrap}{', transactional' if transactional_id else ''})"
            limits = self.limits.get(endpoint.bootstrap, {})
            config = _batches_within(producer_config(endpoint, self.settings, transactional_id), limits)
            channel = ProducerChannel(config, name, flush_timeout=self.flush_timeout)
            channel.limits.update(limits)
            channel.limits_read.update(limits)
            self._by_cluster[key] = channel
            self.resources.append(channel)
        return self._by_cluster[key]


def _write_limits(endpoints: dict[str, KafkaEndpoint], settings, timeout: float) -> dict[str, dict[str, int]]:
    """Per cluster, the ``max.message.bytes`` of each topic written (one that cannot be read is left out)."""
    limits: dict[str, dict[str, int]] = {}
    for role in ("sink", "dlq", "notifications_out", "duplicates"):
        endpoint = endpoints.get(role)
        if endpoint is None:
            continue
        limit = max_message_bytes(endpoint, settings, timeout)
        if limit is not None:
            limits.setdefault(endpoint.bootstrap, {})[endpoint.topic] = limit
    return limits


def _batches_within(config: dict[str, Any], limits: Mapping[str, int]) -> dict[str, Any]:
    """``config`` with ``batch.size`` at most the smallest topic limit: a broker refuses a batch
    larger than its topic takes with every message in it, and librdkafka never splits one."""
    if not limits:
        return config
    return {**config, "batch.size": min(int(config.get("batch.size", PRODUCER_DEFAULT_BATCH)), *limits.values())}


def _endpoints(source, sink, dlq, notifications, notifications_out, duplicates) -> dict[str, KafkaEndpoint]:
    if dlq is None:
        raise KafkaConfigurationError("the kafka engine needs a dead-letter topic: set dlq to kafka://HOST:PORT/TOPIC")
    uris = {
        "source": source,
        "sink": sink,
        "dlq": dlq,
        "notifications": notifications,
        "notifications_out": notifications_out,
        "duplicates": duplicates,
    }
    return {role: parse_kafka_uri(uri, role) for role, uri in uris.items() if uri is not None}


def _require_one_cluster(endpoints: dict[str, KafkaEndpoint]) -> None:
    source = endpoints["source"].bootstrap
    for role, endpoint in endpoints.items():
        if role != "notifications" and endpoint.bootstrap != source:
            raise KafkaConfigurationError(
                f"exactly-once needs the {role} topic on the source's cluster ({source}), not {endpoint.bootstrap}"
            )
