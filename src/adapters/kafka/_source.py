"""Reading a topic as a consumer group, acknowledging only what reached its final place.

Offsets are never committed automatically: ``commit(records)`` acknowledges the offset after
the last record of each partition, once the engine has flushed the records' outcomes. The
commit is sent asynchronously, so the next batch does not wait for the group coordinator's
answer: each commit carries every partition's latest acknowledged offset not yet confirmed
(offsets are cumulative, so a commit that failed is covered by the next one); a partition
taken away, and every partition at ``close``, is committed synchronously before it goes.
An acknowledgement still unconfirmed after ``commit_timeout`` s makes ``commit`` wait for
the coordinator as a synchronous commit does, and raise ``SourceUnavailable`` when it stays
away. A crash replays what was not yet committed (at-least-once). Each record carries its
(topic, partition, offset) as its position, which the Redis state uses as the owner token.

Several instances may read one topic in one consumer group. When the group takes a
partition away (a rebalance, inside ``poll``), the records of it read and not yet
committed are not this instance's to process any more: ``retain`` drops them from the batch
being gathered (their new reader reads them again from the last committed offset), and a
partition given back in the same rebalance is read again from there. With state that lives
in one process (``whole_topic``), an assignment of less than the whole topic is refused
(``StateNotShared``): what one instance remembers, another could not see.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, TopicPartition

from adapters.kafka._config import LOG_EVERY, KafkaEndpoint, consumer_config
from adapters.kafka._errors import StateNotShared
from adapters.kafka._topics import config_error, describe
from domain import RawRecord, SourcePosition, SourceUnavailable

log = logging.getLogger(__name__)

HANDOVER_COMMIT_TIMEOUT = 5.0  # seconds a commit before partitions go (revoked, closed) retries an absent coordinator
DEFAULT_GROUP = "streamdedup"
_COORDINATOR_AWAY = (
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._WAIT_COORD,
    KafkaError._TIMED_OUT,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.REQUEST_TIMED_OUT,
)
_TOPIC_GONE = (
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._UNKNOWN_TOPIC,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
)


class KafkaSource:
    """An ``EventSource`` over one topic.

    Unbounded unless ``stop_at_end`` (or ``?stop_at_end=true`` in the URI): then it is
    ``exhausted`` once every one of the topic's ``partitions`` has been read to its end, which
    is at or past the end offsets it had when the run started (a bounded run, for tests,
    benchmarks and catch-up jobs; assumes this consumer is the group's only member).
    ``whole_topic``: refuse (``StateNotShared``, from ``poll``) an assignment of fewer than all
    of the topic's ``partitions``.
    """

    def __init__(
        self,
        endpoint: KafkaEndpoint,
        settings: Mapping[str, Any] | None = None,
        *,
        partitions: int = 1,
        stop_at_end: bool | None = None,
        commit_timeout: float = 30.0,
        whole_topic: bool = False,
    ):
        self.endpoint = endpoint
        self.group = endpoint.group or DEFAULT_GROUP
        self.stop_at_end = endpoint.stop_at_end if stop_at_end is None else stop_at_end
        self.partitions = partitions
        self.commit_timeout = commit_timeout
        config = consumer_config(endpoint, settings, self.group, partition_eof=self.stop_at_end)
        try:
            self.consumer = Consumer({**config, "on_commit": self._on_commit})
        except KafkaException as exc:
            raise config_error(exc, "source", config) from None
        self.whole_topic = whole_topic
        self.instance: str | None = config.get("group.instance.id")  # static membership, when set
        self._at_end: set[int] = set()
        self._uncommitted: dict[tuple[str, int], int] = {}
        self._revoked: set[tuple[str, int]] = set()  # taken away since the last ``retain``
        self._acknowledged: dict[tuple[str, int], int] = {}  # the next offset acknowledged, per partition held
        self._unconfirmed: set[tuple[str, int]] = set()  # partitions whose acknowledgement is not yet confirmed
        self._unconfirmed_since: float | None = None  # since when acknowledgements wait unconfirmed (None: none do)
        self._commit_logged = -LOG_EVERY
        self._refused: str | None = None
        self.consumer.subscribe(
            [endpoint.topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )

    def poll(self, max_records: int, timeout: float) -> list[RawRecord]:
        """Up to ``max_records`` records; waits the whole ``timeout`` unless that many are ready
        (or, in a bounded run, the end was already reached)."""
        try:
            messages: list[Any] = self.consumer.consume(
                max_records, 0 if self.exhausted else timeout
            )  # a record has its topic, partition and offset
        except (KafkaException, RuntimeError) as exc:
            raise SourceUnavailable(f"cannot read {self.endpoint}: {describe(exc)}") from None
        if self._refused:
            raise StateNotShared(self._refused)
        records: list[RawRecord] = []
        append, uncommitted, at_end = records.append, self._uncommitted, self._at_end
        topic, seen = self.endpoint.topic, set()  # the one topic subscribed: its name not asked of each message
        for message in messages:  # one pass, no call per record but the message's own
            error = message.error()
            if error is not None:
                self._on_error(message, error)
                continue
            partition, offset = message.partition(), message.offset()
            if partition not in seen:
                seen.add(partition)
                uncommitted.setdefault((topic, partition), offset)
            if at_end:
                at_end.discard(partition)
            kind, millis = message.timestamp()
            arrived = millis / 1000 if kind != TIMESTAMP_NOT_AVAILABLE and millis >= 0 else None
            append(RawRecord(message.value() or b"", SourcePosition(topic, partition, offset), message.key(), arrived))
        return records

    @property
    def exhausted(self) -> bool:
        return self.stop_at_end and len(self._at_end) >= self.partitions

    def assignment(self) -> list[str] | None:
        """The partitions the group gave this consumer (None while it has none yet)."""
        try:
            assigned = self.consumer.assignment()
        except (KafkaException, RuntimeError):
            return None
        return [SourcePosition(tp.topic, tp.partition, 0).partition_name() for tp in assigned] or None

    def lag(self) -> dict[tuple[str, int], int]:
        """How many records each assigned partition is behind its end: the end offset the last
        fetch saw minus the position read so far (cached by the client: no broker round trip)."""
        try:
            positions = self.consumer.position(self.consumer.assignment())
            ends = {
                (tp.topic, tp.partition): self.consumer.get_watermark_offsets(tp, cached=True)[1] for tp in positions
            }
        except (KafkaException, RuntimeError):
            return {}
        return {
            (tp.topic, tp.partition): max(0, ends[tp.topic, tp.partition] - tp.offset)
            for tp in positions
            if tp.offset >= 0 and ends[tp.topic, tp.partition] >= 0
        }

    def commit(self, records: Sequence[RawRecord]) -> None:
        """Acknowledge the offset after each partition's last record (see the module's text).

        Raises ``SourceUnavailable`` when an acknowledgement stayed unconfirmed for
        ``commit_timeout`` s and a synchronous commit of it fails too (the coordinator stays
        away for as long, or refuses: the partitions were reassigned). The records' outcomes
        are already written, so a restart replays them (at-least-once).
        """
        for tp in next_offsets(records):
            self._acknowledged[tp.topic, tp.partition] = tp.offset
            self._unconfirmed.add((tp.topic, tp.partition))
            self._uncommitted.pop((tp.topic, tp.partition), None)
        if not self._unconfirmed:
            return
        if self._unconfirmed_since is None:
            self._unconfirmed_since = time.monotonic()
        elif time.monotonic() - self._unconfirmed_since > self.commit_timeout:
            self._commit_acknowledged(self._unconfirmed)
            return
        try:
            self.consumer.commit(offsets=self._offsets(self._unconfirmed), asynchronous=True)
        except KafkaException as exc:  # not sent: the next commit, or the deadline's synchronous one, sends it
            self._log_commit_failure(describe(exc))

    def confirm_acknowledged(self, timeout: float | None = None) -> None:
        """Commit synchronously what was acknowledged and not yet confirmed, so a crash from
        now on replays nothing acknowledged before this call. Raises ``SourceUnavailable`` as
        ``commit`` does."""
        if self._unconfirmed:
            self._commit_acknowledged(set(self._unconfirmed), timeout)

    def _commit_acknowledged(
        self, partitions: set[tuple[str, int]] | None = None, timeout: float | None = None
    ) -> None:
        """Commit the last acknowledged offset of each partition held (of ``partitions`` only,
        when given) synchronously, confirmed or not (an asynchronous commit retried late may
        have moved it back), retrying while the coordinator is away for up to ``timeout`` s
        (``commit_timeout`` by default). Raises ``SourceUnavailable`` when it refuses or stays away."""
        offsets = self._offsets(self._acknowledged if partitions is None else partitions)
        if not offsets:
            return
        try:
            results = self._commit_retrying(offsets, self.commit_timeout if timeout is None else timeout)
        except KafkaException as exc:
            raise SourceUnavailable(
                f"cannot commit offsets of {self.endpoint} (group {self.group}): {describe(exc)}"
            ) from None
        failed = [tp for tp in results or () if tp.error is not None]
        if failed:
            error = failed[0].error
            assert error is not None  # failed holds the partitions with an error
            raise SourceUnavailable(
                f"cannot commit offset of {self.endpoint} partition {failed[0].partition} "
                f"(group {self.group}): {error.str()}"
            )
        self._confirmed(results or offsets)

    def _offsets(self, partitions) -> list[TopicPartition]:
        return [
            TopicPartition(topic, partition, self._acknowledged[topic, partition])
            for topic, partition in sorted(partitions)
            if (topic, partition) in self._acknowledged
        ]

    def _on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """An asynchronous commit's answer (served by ``poll``): forget what it confirmed."""
        if error is not None:
            if error.code() != KafkaError._NO_OFFSET:
                self._log_commit_failure(error.str())
            return
        failed = [tp for tp in partitions if tp.error is not None]
        if failed:
            error = failed[0].error
            assert error is not None  # failed holds the partitions with an error
            self._log_commit_failure(f"partition {failed[0].partition}: {error.str()}")
        self._confirmed([tp for tp in partitions if tp.error is None])

    def _confirmed(self, offsets: Sequence[TopicPartition]) -> None:
        """The coordinator took ``offsets``: forget the acknowledgements they cover, and count
        ``commit_timeout`` for the rest from now."""
        for tp in offsets:
            if self._acknowledged.get((tp.topic, tp.partition), tp.offset + 1) <= tp.offset:
                self._unconfirmed.discard((tp.topic, tp.partition))
        if offsets:
            self._unconfirmed_since = time.monotonic() if self._unconfirmed else None

    def _log_commit_failure(self, reason: str) -> None:
        if time.monotonic() - self._commit_logged >= LOG_EVERY:
            self._commit_logged = time.monotonic()
            log.warning(
                "committing offsets of %s (group %s) failed, the next commit carries them: %s",
                self.endpoint,
                self.group,
                reason,
            )

    def _commit_retrying(self, offsets: list[TopicPartition], timeout: float) -> list[TopicPartition] | None:
        """Commit, retrying for up to ``timeout`` s while the coordinator is away (a broker
        restart); a lost generation (the partitions went to another member) is not retried."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.consumer.commit(offsets=offsets, asynchronous=False)
            except KafkaException as exc:
                error = exc.args[0]
                if not (error.retriable() or error.code() in _COORDINATOR_AWAY) or time.monotonic() > deadline:
                    raise
                log.warning("committing offsets of %s, retrying: %s", self.endpoint, error.str())
                time.sleep(0.5)

    def retain(self, records: list[RawRecord]) -> list[RawRecord]:
        """``records`` without those of partitions the group took away since the last call.

        A partition taken away and given back meanwhile is read again from its last committed
        offset: its records read before are dropped with those read after.
        """
        if not self._revoked:
            return records
        revoked, self._revoked = self._revoked, set()
        kept = [r for r in records if (r.position.source, r.position.partition) not in revoked]
        for topic, partition in sorted(revoked):
            offset = self._uncommitted.pop((topic, partition), None)
            if offset is not None:  # given back: read since, from the committed offset
                self._seek(topic, partition, offset)
        log.info(
            "%s: %d records of partitions %s dropped from the batch: the group reassigned them",
            self.endpoint,
            len(records) - len(kept),
            ",".join(str(p) for _, p in sorted(revoked)),
        )
        return kept

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if not self.whole_topic:
            return
        try:
            held = {(tp.topic, tp.partition) for tp in consumer.assignment()}
        except (KafkaException, RuntimeError):
            held = set()
        held |= {(tp.topic, tp.partition) for tp in partitions}
        if len(held) < self.partitions:
            self._refused = (
                f"the consumer group {self.group} gave this instance {len(held)} of the {self.partitions} "
                f"partitions of {self.endpoint.topic} (another instance reads the rest), but its state "
                "lives in this process and cannot be shared: run one instance, or give every instance "
                "--state redis://HOST:PORT/DB"
            )

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Before partitions go to another member: commit what was acknowledged of them, so
        their new reader starts after it, then forget them."""
        try:
            self._commit_acknowledged({(tp.topic, tp.partition) for tp in partitions}, HANDOVER_COMMIT_TIMEOUT)
        except SourceUnavailable as exc:
            log.warning("%s; their new reader reads those records again", exc)
        self._on_lost(consumer, partitions)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Partitions gone (revoked, or lost with the group membership): forget them."""
        for tp in partitions:
            self._acknowledged.pop((tp.topic, tp.partition), None)
            self._unconfirmed.discard((tp.topic, tp.partition))
            self._revoked.add((tp.topic, tp.partition))
            self._uncommitted.pop((tp.topic, tp.partition), None)
            self._at_end.discard(tp.partition)

    def mark_committed(self, records: Sequence[RawRecord]) -> None:
        """Note that ``records`` were committed elsewhere (by a transaction)."""
        for position in {(r.position.source, r.position.partition) for r in records}:
            self._uncommitted.pop(position, None)

    def rewind(self) -> None:
        """Seek back to the last committed offsets, so the uncommitted records are read again.

        Those are known here (the first offset read since the last commit, per partition),
        so rewinding needs no broker round trip and works while the broker is away.
        """
        for (topic, partition), offset in sorted(self._uncommitted.items()):
            self._seek(topic, partition, offset)
        self._uncommitted.clear()

    def _seek(self, topic: str, partition: int, offset: int) -> None:
        try:
            self.consumer.seek(TopicPartition(topic, partition, offset))
        except KafkaException as exc:
            raise SourceUnavailable(
                f"cannot rewind {topic} partition {partition} to offset {offset}: {describe(exc)}"
            ) from None
        self._at_end.discard(partition)

    def close(self) -> None:
        """Commit every partition's last acknowledged offset, then leave the group."""
        try:
            self._commit_acknowledged(timeout=HANDOVER_COMMIT_TIMEOUT)
        except SourceUnavailable as exc:
            log.warning("%s; a restart reads those records again", exc)
        try:
            self.consumer.close()
        except (KafkaException, RuntimeError) as exc:
            log.warning("closing the consumer of %s: %s", self.endpoint, describe(exc))

    def _on_error(self, message, error: KafkaError) -> None:
        if error.code() == KafkaError._PARTITION_EOF:
            self._at_end.add(message.partition())
        elif error.fatal() or error.code() in _TOPIC_GONE:
            raise SourceUnavailable(f"cannot read {self.endpoint}: {error.str()}")
        else:
            log.warning("reading %s: %s", self.endpoint, error.str())


def next_offsets(records: Sequence[RawRecord]) -> list[TopicPartition]:
    """Per (topic, partition): the offset after the highest one in ``records``."""
    highest: dict[tuple[str, int], int] = {}
    for record in records:
        position = record.position
        key = (position.source, position.partition)
        if position.offset > highest.get(key, -1):
            highest[key] = position.offset
    return [TopicPartition(topic, partition, offset + 1) for (topic, partition), offset in highest.items()]
