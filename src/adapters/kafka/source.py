"""Reading a topic as a consumer group, acknowledging only what reached its final place.

Offsets are never committed automatically: ``commit(records)`` commits, synchronously, the
offset after the last record of each partition, once the engine has flushed the records'
outcomes. A crash before that replays the batch (at-least-once). Each record carries its
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
from typing import Any, Mapping, Sequence

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, TopicPartition

from domain.errors import SourceUnavailable
from domain.events import RawRecord, SourcePosition

from adapters.kafka.config import KafkaConfigurationError, KafkaEndpoint, consumer_config
from adapters.kafka.topics import config_error, describe

log = logging.getLogger(__name__)

DEFAULT_GROUP = "streamdedup"
_COORDINATOR_AWAY = (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._WAIT_COORD,
                     KafkaError._TIMED_OUT, KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR,
                     KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.REQUEST_TIMED_OUT)
_TOPIC_GONE = (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError.TOPIC_AUTHORIZATION_FAILED,
               KafkaError.GROUP_AUTHORIZATION_FAILED)


class StateNotShared(KafkaConfigurationError):
    """The consumer group gave this instance part of the topic, and its state lives in this process."""


class KafkaSource:
    """An ``EventSource`` over one topic.

    Unbounded unless ``stop_at_end`` (or ``?stop_at_end=true`` in the URI): then it is
    ``exhausted`` once every one of the topic's ``partitions`` has been read to its end, which
    is at or past the end offsets it had when the run started (a bounded run, for tests,
    benchmarks and catch-up jobs; assumes this consumer is the group's only member).
    ``whole_topic``: refuse (``StateNotShared``, from ``poll``) an assignment of fewer than all
    of the topic's ``partitions``.
    """

    def __init__(self, endpoint: KafkaEndpoint, settings: Mapping[str, Any] | None = None, *,
                 partitions: int = 1, stop_at_end: bool | None = None, commit_timeout: float = 30.0,
                 whole_topic: bool = False):
        self.endpoint = endpoint
        self.group = endpoint.group or DEFAULT_GROUP
        self.stop_at_end = endpoint.stop_at_end if stop_at_end is None else stop_at_end
        self.partitions = partitions
        self.commit_timeout = commit_timeout
        config = consumer_config(endpoint, settings, self.group, partition_eof=self.stop_at_end)
        try:
            self.consumer = Consumer(config)
        except KafkaException as exc:
            raise config_error(exc, "source", config) from None
        self.whole_topic = whole_topic
        self.instance: str | None = config.get("group.instance.id")  # static membership, when set
        self._at_end: set[int] = set()
        self._uncommitted: dict[tuple[str, int], int] = {}
        self._revoked: set[tuple[str, int]] = set()  # taken away since the last ``retain``
        self._refused: str | None = None
        self.consumer.subscribe([endpoint.topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_revoke)

    def poll(self, max_records: int, timeout: float) -> list[RawRecord]:
        """Up to ``max_records`` records; waits the whole ``timeout`` unless that many are ready
        (or, in a bounded run, the end was already reached)."""
        try:
            messages = self.consumer.consume(max_records, 0 if self.exhausted else timeout)
        except (KafkaException, RuntimeError) as exc:
            raise SourceUnavailable(f"cannot read {self.endpoint}: {describe(exc)}") from None
        if self._refused:
            raise StateNotShared(self._refused)
        records = []
        for message in messages:
            error = message.error()
            if error is None:
                records.append(self._record(message))
            else:
                self._on_error(message, error)
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
            ends = {(tp.topic, tp.partition): self.consumer.get_watermark_offsets(tp, cached=True)[1]
                    for tp in positions}
        except (KafkaException, RuntimeError):
            return {}
        return {(tp.topic, tp.partition): max(0, ends[tp.topic, tp.partition] - tp.offset)
                for tp in positions if tp.offset >= 0 and ends[tp.topic, tp.partition] >= 0}

    def commit(self, records: Sequence[RawRecord]) -> None:
        """Commit the offset after each partition's last record, synchronously.

        Retries while the group coordinator cannot be reached, for ``commit_timeout`` s. Raises
        ``SourceUnavailable`` when it refuses (the partitions were reassigned) or stays away:
        the records' outcomes are already written, so a restart replays them (at-least-once).
        """
        offsets = next_offsets(records)
        if not offsets:
            return
        try:
            results = self._commit_retrying(offsets)
        except KafkaException as exc:
            raise SourceUnavailable(f"cannot commit offsets of {self.endpoint} "
                                    f"(group {self.group}): {describe(exc)}") from None
        failed = [tp for tp in results or () if tp.error is not None]
        if failed:
            raise SourceUnavailable(f"cannot commit offset of {self.endpoint} partition {failed[0].partition} "
                                    f"(group {self.group}): {failed[0].error.str()}")
        self.mark_committed(records)

    def _commit_retrying(self, offsets: list[TopicPartition]) -> list[TopicPartition] | None:
        """Commit, retrying for up to ``commit_timeout`` s while the coordinator is away (a broker
        restart); a lost generation (the partitions went to another member) is not retried."""
        deadline = time.monotonic() + self.commit_timeout
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
        log.info("%s: %d records of partitions %s dropped from the batch: the group reassigned them",
                 self.endpoint, len(records) - len(kept), ",".join(str(p) for _, p in sorted(revoked)))
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
            self._refused = (f"the consumer group {self.group} gave this instance {len(held)} of the {self.partitions} "
                             f"partitions of {self.endpoint.topic} (another instance reads the rest), but its state "
                             "lives in this process and cannot be shared: run one instance, or give every instance "
                             "--state redis://HOST:PORT/DB")

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
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
            raise SourceUnavailable(f"cannot rewind {topic} partition {partition} to offset {offset}: "
                                    f"{describe(exc)}") from None
        self._at_end.discard(partition)

    def close(self) -> None:
        try:
            self.consumer.close()
        except (KafkaException, RuntimeError) as exc:
            log.warning("closing the consumer of %s: %s", self.endpoint, describe(exc))

    def _record(self, message) -> RawRecord:
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        self._uncommitted.setdefault((topic, partition), offset)
        if self._at_end:
            self._at_end.discard(partition)
        kind, millis = message.timestamp()
        arrived = millis / 1000 if kind != TIMESTAMP_NOT_AVAILABLE and millis >= 0 else None
        return RawRecord(message.value() or b"", SourcePosition(topic, partition, offset), message.key(), arrived)

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
        key = (record.position.source, record.position.partition)
        highest[key] = max(highest.get(key, -1), record.position.offset)
    return [TopicPartition(topic, partition, offset + 1) for (topic, partition), offset in highest.items()]
