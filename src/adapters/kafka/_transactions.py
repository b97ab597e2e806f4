"""Exactly-once batches: outputs and input offsets committed in one Kafka transaction.

``begin`` opens a transaction on the shared producer; the engine writes the batch's events
and dead letters into it; ``commit`` adds the consumer's positions for the batch to the
transaction (``send_offsets_to_transaction`` with the group's metadata) and commits it.
Readers with ``isolation.level=read_committed`` then see each batch's outputs exactly when
its input counts as consumed.

Failure behaviour: if anything fails while committing, the transaction is aborted, the
source is rewound to its last committed offsets (so the batch would be read again), and a
``SinkUnavailable`` (``ProducerFenced`` when another instance took over the transactional
id, ``ProducerStuck`` when librdkafka stopped answering) is raised; a transaction the channel
knows is ``doomed`` (a message refused as too large) is aborted before committing and
``BatchAborted`` raised, so the pipeline reads the batch again. ``abort`` does the same on the engine's request. A crash leaves the
transaction open: the next instance with the same transactional id aborts it when it
starts (``init_transactions``) and resumes from the committed offsets.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Sequence

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from adapters.kafka._errors import ProducerStuck
from adapters.kafka._producer import ProducerChannel
from adapters.kafka._source import KafkaSource, next_offsets
from adapters.kafka._topics import describe
from domain import BatchAborted, RawRecord, SinkUnavailable

log = logging.getLogger(__name__)


def default_transactional_id(source: KafkaSource) -> str:
    """``streamdedup-GROUP-TOPIC-INSTANCE``: one id per engine instance, so the instances of one
    group never fence each other (KIP-447: a zombie is fenced by the group generation sent
    with its offsets, not by its id).

    ``INSTANCE`` is the consumer's ``group.instance.id`` where one is set: the same across a
    restart, so a restarted instance aborts the transaction its predecessor left open at once.
    Otherwise it is ``HOST-PID`` (a container restarted in place keeps both); a transaction a
    crashed process left open then holds its partitions until ``transaction.timeout.ms``.
    """
    return f"streamdedup-{source.group}-{source.endpoint.topic}-{source.instance or f'{socket.gethostname()}-{os.getpid()}'}"


class TransactionalCommitter:
    """The exactly-once ``domain._ports.BatchCommitter``; initialises transactions (fencing any older
    instance) when built."""

    def __init__(self, channel: ProducerChannel, source: KafkaSource, timeout: float = 30.0, commit_attempts: int = 3):
        self.channel = channel
        self.source = source
        self.timeout = timeout
        self.commit_attempts = commit_attempts
        self.open = False
        try:
            channel.producer.init_transactions(timeout)
        except KafkaException as exc:
            raise SinkUnavailable(f"{channel.name}: cannot start transactions: {describe(exc)}") from None

    def begin(self) -> None:
        try:
            self.channel.producer.begin_transaction()
        except KafkaException as exc:
            raise self.channel.translate(exc) from None
        self.open = True

    def commit(self, records: Sequence[RawRecord]) -> None:
        doomed = self.channel.doomed
        if doomed:
            self.abort()
            because = (
                f"librdkafka failed it ({doomed.str()})"
                if isinstance(doomed, KafkaError)
                else "a message was refused as too large for its topic, whose limit could not be read at start "
                "(that topic's messages are now produced one at a time)"
            )
            raise BatchAborted(
                f"{self.channel.name}: the transaction cannot commit: {because}; it is aborted and the "
                "batch judged again"
            )
        try:
            self._send_offsets(records)
            self._commit_transaction()
        except KafkaException as exc:
            error = self.channel.translate(exc)
            recovering = bool(self.channel.careful) and exc.args[0].txn_requires_abort()
            self.abort()
            if recovering:  # the epoch bump after an abort for a refused message can fail the next transaction
                raise BatchAborted(
                    f"{error} (while recovering from a message refused as too large: the transaction "
                    "is aborted and the batch judged again)"
                ) from None
            raise type(error)(f"{error} (transaction aborted; the batch is not acknowledged)") from None
        except ProducerStuck:
            self.abort()
            raise
        self.open = False
        self.channel.committed()
        self.source.mark_committed(records)

    def abort(self) -> None:
        """Abort the open transaction, if any, and rewind the source; never raises."""
        if not self.open:
            return
        self.open = False
        if self.channel.stuck:
            log.error("%s: not aborting the transaction of a stuck producer; the next instance will", self.channel.name)
        else:
            try:
                self.channel.producer.abort_transaction(self.timeout)
            except KafkaException as exc:
                log.error("%s: aborting the transaction failed: %s", self.channel.name, describe(exc))
        self.channel.forget_failures()
        try:
            self.source.rewind()
        except Exception as exc:
            log.error("rewinding %s after an abort failed: %s", self.source.endpoint, exc)

    def _send_offsets(self, records: Sequence[RawRecord]) -> None:
        """``send_offsets_to_transaction`` under a watchdog: after a broker restart librdkafka
        (2.16) can block in it forever, ignoring its timeout (librdkafka issues 5456 and 5511).
        The call runs in a daemon thread; if it has not returned ``timeout`` + 5 s later the
        producer is declared stuck and ``ProducerStuck`` stops the engine (a restart recovers)."""
        args = (self._positions(records), self.source.consumer.consumer_group_metadata(), self.timeout)
        outcome: dict = {}

        def call() -> None:
            try:
                self.channel.producer.send_offsets_to_transaction(*args)
            except BaseException as exc:
                outcome["error"] = exc

        worker = threading.Thread(target=call, name="kafka-send-offsets", daemon=True)
        worker.start()
        worker.join(self.timeout + 5)
        if worker.is_alive():
            self.channel.stuck = True
            raise ProducerStuck(
                f"{self.channel.name}: sending the consumer offsets to the transaction did not "
                f"return within {self.timeout + 5:g}s (a librdkafka hang after a broker restart); "
                "restart the engine: the open transaction is aborted when it starts again"
            )
        if "error" in outcome:
            raise outcome["error"]

    def _commit_transaction(self) -> None:
        for attempt in range(1, self.commit_attempts + 1):
            try:
                self.channel.producer.commit_transaction(self.timeout)
                return
            except KafkaException as exc:
                if attempt == self.commit_attempts or not exc.args[0].retriable():
                    raise
                log.warning("%s: committing the transaction, retrying: %s", self.channel.name, describe(exc))

    def _positions(self, records: Sequence[RawRecord]) -> list[TopicPartition]:
        """The consumer's position in each partition of the batch (the offset after its last record)."""
        expected = next_offsets(records)
        positions = self.source.consumer.position([TopicPartition(tp.topic, tp.partition) for tp in expected])
        return [pos if pos.offset >= exp.offset else exp for pos, exp in zip(positions, expected)]
