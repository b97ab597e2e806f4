"""INVALIDATE notifications through a topic of their own.

The source reads with its own consumer group and commits only when told the notifications
took effect (``commit``). An invalid notification is dead-lettered (reason
``bad_notification`` or an event code) and acknowledged with the next commit; when a poll
returned only invalid ones, the source flushes their dead letters and commits at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException

from adapters.kafka._config import KafkaEndpoint, consumer_config
from adapters.kafka._producer import ProducerChannel
from adapters.kafka._source import next_offsets
from adapters.kafka._topics import config_error, describe
from domain import (
    DeadLetter,
    DeadLetterSink,
    InvalidEvent,
    Notification,
    RawRecord,
    SourcePosition,
    SourceUnavailable,
    encode_notification,
    parse_notification,
)

log = logging.getLogger(__name__)

MAX_PER_POLL = 500


class KafkaNotificationSource:
    """A ``NotificationSource``; ``group`` defaults to the URI's ``?group=``."""

    def __init__(
        self,
        endpoint: KafkaEndpoint,
        dead_letters: DeadLetterSink,
        clock: Callable[[], float],
        settings: Mapping[str, Any] | None = None,
        group: str | None = None,
    ):
        self.endpoint = endpoint
        self.group = endpoint.group or group or "streamdedup-notifications"
        self.dead_letters = dead_letters
        self.clock = clock
        config = consumer_config(endpoint, settings, self.group)
        try:
            self.consumer = Consumer(config)
        except KafkaException as exc:
            raise config_error(exc, "notifications", config) from None
        self.consumer.subscribe([endpoint.topic])
        self._read: list[RawRecord] = []
        self.rejected = 0

    def poll(self, timeout: float, final: bool = False) -> list[Notification]:
        try:
            messages = self.consumer.consume(MAX_PER_POLL, timeout)
        except (KafkaException, RuntimeError) as exc:
            raise SourceUnavailable(f"cannot read notifications from {self.endpoint}: {describe(exc)}") from None
        notes, invalid = [], 0
        for message in messages:
            error = message.error()
            if error is not None:
                log.warning("reading notifications from %s: %s", self.endpoint, error.str())
                continue
            note = self._parse(message)
            if note is None:
                invalid += 1
            else:
                notes.append(note)
        if invalid and not notes:
            self.commit()
        return notes

    def commit(self) -> None:
        """Flush the dead letters of invalid notifications, then commit everything read so far."""
        offsets = next_offsets(self._read)
        if not offsets:
            return
        self.dead_letters.flush()
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            raise SourceUnavailable(f"cannot commit notifications of {self.endpoint}: {describe(exc)}") from None
        self._read.clear()

    def close(self) -> None:
        try:
            self.consumer.close()
        except (KafkaException, RuntimeError) as exc:
            log.warning("closing the notifications consumer of %s: %s", self.endpoint, describe(exc))

    def _parse(self, message) -> Notification | None:
        record = RawRecord(
            message.value() or b"",
            SourcePosition(message.topic(), message.partition(), message.offset()),
            message.key(),
        )
        self._read.append(record)
        try:
            return parse_notification(record.value)
        except InvalidEvent as exc:
            log.warning("invalid notification at %s: %s", record.position.token(), exc)
            self.rejected += 1
            self.dead_letters.write(DeadLetter(record, exc.reason, str(exc), exc.error_class, 1, self.clock()))
            return None


class KafkaNotificationSink:
    """A ``NotificationSink``: each notification is produced and flushed before ``publish`` returns.

    Keyed by the event's ``uniqueValue``. Through a transactional channel it is part of the
    running batch's transaction. Raises ``SinkUnavailable`` when it is not acknowledged.
    """

    def __init__(self, channel: ProducerChannel, topic: str):
        self.channel = channel
        self.topic = topic

    def publish(self, notification: Notification) -> None:
        self.channel.produce(self.topic, encode_notification(notification), notification.event.unique_value.encode())
        self.channel.flush()

    def close(self) -> None:
        """The channel is shared; its owner closes it."""
