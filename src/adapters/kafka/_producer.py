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

A topic whose ``max.message.bytes`` could not be read at start (e.g. ACLs that forbid
describing its configuration) refuses a message too large for it only at delivery, and a
broker refuses a whole producer batch, so the refusal does not say which message was too
large. Such messages are produced again *alone* (each flushed on its own): one refused alone
is too large for good, kept for its writer (``take_refused``: the event sink sends it where the
policies send a record too large, the dead-letter sink cuts it to fit), and the topic's limit
is learned (below its size), so from then on ``produce`` refuses such messages itself. Inside
a transaction any refusal dooms it (``doomed``): the committer aborts it, the batch is read
again, and the topic's messages are produced alone (``careful``) until a transaction commits.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from adapters.kafka._config import LOG_EVERY
from adapters.kafka._errors import ProducerFenced, RecordRejected
from adapters.kafka._sizes import PRODUCER_DEFAULT_MAX, RECORD_OVERHEAD, message_size
from adapters.kafka._topics import config_error, describe
from domain import RecordTooLarge, SinkUnavailable

log = logging.getLogger(__name__)

TOO_LARGE = {KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE}  # a broker's refusals of a message's size
PURGED = {KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT}


class ProducerChannel:
    def __init__(self, config: dict[str, Any], name: str, *, flush_timeout: float = 30.0):
        self.name = name
        self.transactional = "transactional.id" in config
        self.flush_timeout = flush_timeout
        self.stuck = False
        self._failed: list[tuple[str, bytes, bytes | None, list | None, KafkaError]] = []
        self.refused: list[tuple[str, bytes, bytes | None, list | None, RecordTooLarge]] = []  # alone: too large
        self._batch_refused: list[tuple[str, bytes, bytes | None, list | None]] = []  # in a batch: unknown which
        self.careful: set[str] = set()  # topics whose messages are produced alone (``produce_alone``)
        self._alone = False
        self._txn_failed: KafkaError | None = None
        self.refused_alone: dict[str, int] = {}  # topic -> the smallest message (bytes) it refused on its own
        self._last_error: KafkaError | None = None
        self._logged: dict[int, float] = {}
        self.limits: dict[str, int] = {}  # topic -> its max.message.bytes (a topic not here: the producer's)
        self.limits_read: set[str] = set()  # topics whose max.message.bytes was read (not learned)
        self.producer_max = int(config.get("message.max.bytes", PRODUCER_DEFAULT_MAX))
        try:
            self.producer = Producer({**config, "error_cb": self._on_error, "on_delivery": self._on_delivery})
        except KafkaException as exc:
            raise config_error(exc, name, config) from None

    def max_bytes(self, topic: str) -> int:
        """The largest message (``_sizes.message_size``) ``topic`` and this producer take."""
        return min(self.limits.get(topic, self.producer_max), self.producer_max)

    def room(self, topic: str, headers: list) -> int:
        """How many bytes of key plus value a message to ``topic`` with ``headers`` may carry."""
        return max(0, self.max_bytes(topic) - message_size(b"", None, headers))

    def produce(self, topic: str, value: bytes, key: bytes | None = None, headers: list | None = None) -> None:
        """Queue one message; waits (up to ``flush_timeout``) while the local queue is full.
        Raises ``RecordTooLarge`` when it is larger than ``max_bytes(topic)``."""
        if headers:
            size = message_size(value, key, headers)
        else:  # ``message_size`` written out for the usual message (tests/adapters/kafka/test_kafka_message_size.py)
            size = RECORD_OVERHEAD + (len(value) if value else 0) + (len(key) if key else 0)
        if size > self.producer_max or size > self.limits.get(topic, size):
            raise RecordTooLarge(size, self.max_bytes(topic), self._output(topic))
        if self.transactional and self.doomed:
            return  # the transaction cannot commit: the committer aborts it and the batch is judged again
        if topic in self.careful:
            self.produce_alone(topic, value, key, headers)
            return
        deadline = None
        while True:
            try:
                self.producer.produce(topic, value, key, headers=headers)
                return
            except BufferError:
                deadline = deadline or time.monotonic() + self.flush_timeout
                if time.monotonic() > deadline:
                    raise SinkUnavailable(
                        f"{self.name}: local queue still full after {self.flush_timeout:g}s{self._because()}"
                    ) from None
                self.producer.poll(0.05)
            except KafkaException as exc:
                error = exc.args[0]
                if self.transactional and (error.code() == KafkaError._STATE or error.txn_requires_abort()):
                    self._txn_failed = error  # the committer aborts the transaction and the batch is judged again
                    return
                raise self.translate(exc, record=True) from None

    def produce_alone(self, topic: str, value: bytes, key: bytes | None = None, headers: list | None = None) -> None:
        """Produce one message and flush it on its own, so a refusal of its size is its own: then it
        is kept in ``refused`` and the topic's limit learned (see the module's text)."""
        self.producer.flush(self.flush_timeout)
        self._alone = True
        try:
            self.producer.produce(topic, value, key, headers=headers)
            self.producer.flush(self.flush_timeout)
        except KafkaException as exc:
            raise self.translate(exc, record=True) from None
        finally:
            self._alone = False

    @property
    def doomed(self) -> KafkaError | bool:
        """The open transaction cannot commit: a message was refused as too large, or librdkafka
        failed the transaction (it must be aborted)."""
        return self._txn_failed or bool(self.refused or self._batch_refused)

    def flush(self) -> None:
        if self._failed and not self.transactional:
            self._resend()
        try:
            remaining = self.producer.flush(self.flush_timeout)
        except KafkaException as exc:
            raise self.translate(exc) from None
        if remaining:
            raise SinkUnavailable(
                f"{self.name}: {remaining} messages not acknowledged within {self.flush_timeout:g}s{self._because()}"
            )
        if self._failed:
            topic, _, _, _, error = self._failed[-1]
            raise SinkUnavailable(f"{self.name}: {len(self._failed)} deliveries to {topic!r} failed: {error.str()}")
        if self._batch_refused and not self.transactional:
            self._resend_alone()
            if self._failed:
                raise SinkUnavailable(f"{self.name}: {len(self._failed)} deliveries failed when produced again")

    def _resend_alone(self) -> None:
        """Produce each message of a refused batch again on its own (see the module's text)."""
        batch, self._batch_refused = self._batch_refused, []
        log.warning(
            "%s: %d messages refused as too large in a batch; producing each again on its own", self.name, len(batch)
        )
        for topic, value, key, headers in batch:
            try:
                self.produce_alone(topic, value, key, headers)
            except RecordTooLarge as error:  # too large for the limit learned from another of them
                self.refused.append((topic, value, key, headers, error))

    def forget_failures(self) -> None:
        """Called when the transaction that held the failed messages was aborted: its topics whose
        messages were refused as too large are produced ``careful`` from now on."""
        self.careful.update(entry[0] for entry in self.refused)
        self.careful.update(entry[0] for entry in self._batch_refused)
        self._failed.clear()
        self.refused.clear()
        self._batch_refused.clear()
        self._txn_failed = None

    def committed(self) -> None:
        """Called when a transaction committed: no topic needs its messages produced alone now."""
        self.careful.clear()

    def take_refused(self, topic: str) -> list[tuple[bytes, bytes | None, RecordTooLarge]]:
        """The messages to ``topic`` its broker refused as too large since the last call: ``(value,
        key, error)``; they are forgotten here."""
        taken = [(value, key, error) for t, value, key, _, error in self.refused if t == topic]
        self.refused = [entry for entry in self.refused if entry[0] != topic]
        return taken

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
        full, ``produce`` raises and the rest stay failed, so the flush raises and retries them.

        Only the messages failed when it starts: one that fails again while the others are
        queued (the broker still away) waits for the next flush, or a broker outage longer than
        ``message.timeout.ms`` would keep this loop producing the same messages for ever."""
        log.warning("%s: producing %d failed messages again", self.name, len(self._failed))
        for _ in range(len(self._failed)):
            topic, value, key, headers, _ = self._failed[0]
            self.produce(topic, value, key, headers)
            self._failed.pop(0)

    def _on_delivery(self, error: KafkaError | None, message) -> None:
        if error is None or (self.transactional and error.code() in PURGED):
            return  # purged by an abort: the aborted batch is judged again
        topic, value, key, headers = message.topic(), message.value(), message.key(), message.headers()
        if error.code() in TOO_LARGE and not self._alone:
            self._batch_refused.append((topic, value, key, headers))
            return
        if error.code() in TOO_LARGE:
            size = message_size(value, key, headers)
            self.refused_alone[topic] = min(size, self.refused_alone.get(topic, size))
            if size <= self.max_bytes(topic):
                log.warning(
                    "%s: topic %r refused a message of %d bytes as too large (%s); its limit, which could "
                    "not be read at start, is taken as below that from now on",
                    self.name,
                    topic,
                    size,
                    error.str(),
                )
                self.limits[topic] = size - 1
            self.refused.append(
                (topic, value, key, headers, RecordTooLarge(size, self.max_bytes(topic), self._output(topic)))
            )
            return
        self._failed.append((topic, value, key, headers, error))

    def _output(self, topic: str) -> str:
        """``topic`` as a ``RecordTooLarge`` names it, saying when its limit was learned, not read."""
        if topic in self.refused_alone and topic not in self.limits_read:
            return (
                f"topic {topic!r} (its limit could not be read; it refused a message of "
                f"{self.refused_alone[topic]} bytes)"
            )
        return f"topic {topic!r}"

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
