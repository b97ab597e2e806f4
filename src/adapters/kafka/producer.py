"""One idempotent (optionally transactional) producer, shared by an engine's outputs.

The event sink and the dead-letter sink write through the same ``ProducerChannel``, so with
exactly-once both are in the same transaction. Delivery reports arrive for failures only.

Failure behaviour: ``produce`` raises ``RecordTooLarge`` (permanent, ``invalid``) for a message
larger than its topic takes (``limits``: each topic's ``max.message.bytes``, read at start)
or than the producer's ``message.max.bytes``, before producing it: a broker refusing it
would fail the flush (and doom a transaction) again and again. It raises ``RecordRejected``
(permanent) for a record the client refuses outright otherwise. ``flush`` raises
``SinkUnavailable`` when messages are still unacknowledged after ``flush_timeout`` (they stay
queued and librdkafka keeps retrying them; the next flush waits for them again) or when
deliveries failed. Without a transaction, failed messages are produced again at the next
flush, so retrying ``flush`` loses nothing. Inside a transaction a failed delivery dooms it:
``flush`` keeps raising until the transaction is aborted.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from domain.errors import PermanentError, RecordTooLarge, SinkUnavailable

from adapters.kafka.sizes import PRODUCER_DEFAULT_MAX, message_size
from adapters.kafka.topics import config_error, describe

log = logging.getLogger(__name__)

LOG_EVERY = 10.0


class ProducerFenced(PermanentError):
    """The producer hit a fatal error (e.g. another instance took over its transactional id)."""


class ProducerStuck(PermanentError):
    """A producer call did not return (a librdkafka hang); only a restart of the engine helps."""


class RecordRejected(PermanentError):
    """The client refused one record for good (e.g. larger than the broker accepts)."""


class ProducerChannel:
    def __init__(self, config: dict[str, Any], name: str, *, flush_timeout: float = 30.0):
        self.name = name
        self.transactional = "transactional.id" in config
        self.flush_timeout = flush_timeout
        self.stuck = False
        self._failed: list[tuple[str, bytes, bytes | None, list | None, KafkaError]] = []
        self._last_error: KafkaError | None = None
        self._logged: dict[int, float] = {}
        self.limits: dict[str, int] = {}  # topic -> its max.message.bytes (a topic not here: the producer's)
        self.producer_max = int(config.get("message.max.bytes", PRODUCER_DEFAULT_MAX))
        try:
            self.producer = Producer({**config, "error_cb": self._on_error, "on_delivery": self._on_delivery})
        except KafkaException as exc:
            raise config_error(exc, name, config) from None

    def max_bytes(self, topic: str) -> int:
        """The largest message (``sizes.message_size``) ``topic`` and this producer take."""
        return min(self.limits.get(topic, self.producer_max), self.producer_max)

    def room(self, topic: str, headers: list) -> int:
        """How many bytes of key plus value a message to ``topic`` with ``headers`` may carry."""
        return max(0, self.max_bytes(topic) - message_size(b"", None, headers))

    def produce(self, topic: str, value: bytes, key: bytes | None = None, headers: list | None = None) -> None:
        """Queue one message; waits (up to ``flush_timeout``) while the local queue is full.
        Raises ``RecordTooLarge`` when it is larger than ``max_bytes(topic)``."""
        size = message_size(value, key, headers)
        if size > self.max_bytes(topic):
            raise RecordTooLarge(size, self.max_bytes(topic), f"topic {topic!r}")
        deadline = None
        while True:
            try:
                self.producer.produce(topic, value, key, headers=headers)
                return
            except BufferError:
                deadline = deadline or time.monotonic() + self.flush_timeout
                if time.monotonic() > deadline:
                    raise SinkUnavailable(f"{self.name}: local queue still full after {self.flush_timeout:g}s"
                                          f"{self._because()}") from None
                self.producer.poll(0.05)
            except KafkaException as exc:
                raise self.translate(exc, record=True) from None

    def flush(self) -> None:
        if self._failed and not self.transactional:
            self._resend()
        try:
            remaining = self.producer.flush(self.flush_timeout)
        except KafkaException as exc:
            raise self.translate(exc) from None
        if remaining:
            raise SinkUnavailable(f"{self.name}: {remaining} messages not acknowledged within "
                                  f"{self.flush_timeout:g}s{self._because()}")
        if self._failed:
            topic, _, _, _, error = self._failed[-1]
            raise SinkUnavailable(f"{self.name}: {len(self._failed)} deliveries to {topic!r} failed: {error.str()}")

    def forget_failures(self) -> None:
        """Called when the transaction that held the failed messages was aborted."""
        self._failed.clear()

    def close(self) -> None:
        if self.stuck:
            log.error("%s: stuck; not flushing or closing it (the process should exit)", self.name)
            return
        try:
            self.producer.flush(self.flush_timeout)
            self.producer.close()
        except (KafkaException, RuntimeError) as exc:
            log.warning("closing the producer of %s: %s", self.name, describe(exc))

    def _resend(self) -> None:
        """Produce the failed messages again, each forgotten only once queued: when the queue stays
        full, ``produce`` raises and the rest stay failed, so the flush raises and retries them."""
        log.warning("%s: producing %d failed messages again", self.name, len(self._failed))
        while self._failed:
            topic, value, key, headers, _ = self._failed[0]
            self.produce(topic, value, key, headers)
            self._failed.pop(0)

    def _on_delivery(self, error: KafkaError | None, message) -> None:
        if error is not None:
            self._failed.append((message.topic(), message.value(), message.key(), message.headers(), error))

    def _on_error(self, error: KafkaError) -> None:
        """librdkafka reports every failed reconnect: log each kind of error once per ``LOG_EVERY`` s."""
        self._last_error = error
        if error.fatal():
            log.error("%s: fatal producer error: %s", self.name, error.str())
        elif time.monotonic() - self._logged.get(error.code(), -LOG_EVERY) >= LOG_EVERY:
            self._logged[error.code()] = time.monotonic()
            log.warning("%s: %s", self.name, error.str())

    def _because(self) -> str:
        return f" (last error: {self._last_error.str()})" if self._last_error is not None else ""

    def translate(self, exc: KafkaException, record: bool = False) -> Exception:
        """The domain error for a producer call that raised (``record``: a ``produce`` call)."""
        error = exc.args[0] if exc.args else None
        if isinstance(error, KafkaError) and error.fatal():
            return ProducerFenced(f"{self.name}: fatal producer error: {error.str()}")
        if record and isinstance(error, KafkaError) and not error.retriable():
            return RecordRejected(f"{self.name}: record refused: {error.str()}")
        return SinkUnavailable(f"{self.name}: {describe(exc)}")
