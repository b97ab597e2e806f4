"""The ports the core needs; adapters implement them.

Every method documents what it guarantees and what it raises. Adapters raise only
``domain._errors`` types: a library exception never crosses a port.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from domain._accounting import Accounting
from domain._dead_letters import DeadLetter
from domain._duplicates import Duplicate
from domain._errors import PermanentError
from domain._events import Event, RawRecord
from domain._inspection import StateReport
from domain._metrics import Metrics as Metrics  # the port lives in a leaf module; named here with the others
from domain._rules import RuleSet
from domain._state import Claim, Emission, Judgement


@dataclass(frozen=True, slots=True)
class Notification:
    """An ``INVALIDATE`` notification: forget ``event``'s key so it can pass again."""

    kind: str
    exception: str
    event: Event


class JsonDecoder(Protocol):
    """Reads a record's bytes as JSON for ``domain._events.parse_event``.

    It must give exactly what ``domain._events.parse_json`` gives: the same value for every
    record that function accepts, and ``InvalidEvent`` with the same code for every other (an
    adapter that is faster for common records falls back to that function for the rest).
    """

    def __call__(self, value: bytes) -> object: ...


class EventReader(Protocol):
    """Reads a record's bytes as an event for ``domain._dedup.Deduplicator``.

    It must give exactly what ``domain._events.parse_event`` gives: an equal ``Event`` (with
    equal ``fields``) for every record that function accepts, and ``InvalidEvent`` with the same
    code and text for every other (an adapter that is faster for common records falls back to
    that function for the rest).
    """

    def __call__(self, value: bytes) -> Event: ...


@runtime_checkable
class EventSource(Protocol):
    def poll(self, max_records: int, timeout: float) -> list[RawRecord]:
        """Up to ``max_records`` records, waiting at most ``timeout`` s; ``[]`` when none is ready.

        Raises ``SourceUnavailable`` when the input cannot be read for now.
        """

    @property
    def exhausted(self) -> bool:
        """True once a bounded source has returned its last record; never for an unbounded one."""

    def assignment(self) -> Collection[str] | None:
        """The partitions this source reads from now (``SourcePosition.partition_name``), or
        None when it cannot say (then the partitions seen so far count).

        Each one holds the watermarks back until it has shown an event or gone idle
        (``domain._watermarks``); a partition no longer listed no longer counts.
        """

    def retain(self, records: list[RawRecord]) -> list[RawRecord]:
        """Of ``records`` (read by ``poll`` since the last call), those still this reader's to process.

        Called once a batch is gathered, before it is judged. A source read by several
        instances drops the records of partitions taken from it meanwhile (their new reader
        reads them again from the last acknowledged position); others return ``records``.
        """

    def commit(self, records: Sequence[RawRecord]) -> None:
        """Acknowledge that ``records`` reached their final place.

        Only called after the sinks flushed the records' outcomes (at-least-once). A source
        that keeps positions (a Kafka consumer group) resumes after the acknowledged records
        on restart and hands out the unacknowledged ones again; a file is read from its
        start on every run. It may store an acknowledgement after returning (no later than
        ``close``): a crash in between hands those records out again, as for unacknowledged ones.
        """

    def close(self) -> None: ...


@runtime_checkable
class EventSink(Protocol):
    def write(self, record: RawRecord, event: Event) -> None:
        """Queue one unique event; its original bytes are written untouched.

        Raises ``SinkUnavailable`` (transient) or ``PermanentError`` for this record.
        """

    def flush(self) -> Sequence[tuple[RawRecord, PermanentError]] | None:
        """Block until every queued write is durable. Raises ``SinkUnavailable`` if not.

        Returns the records written since the last flush that the output refused for good only
        now (e.g. a Kafka topic whose size limit could not be read refused them as too large),
        each with its error; the caller sends them where the policies send a write that failed
        for good. None or empty: every write is durable.
        """

    def close(self) -> None: ...


@runtime_checkable
class DeadLetterSink(Protocol):
    def write(self, dead_letter: DeadLetter) -> None:
        """Queue one dead letter, encoded for the medium as ``domain._dead_letters`` defines it."""

    def flush(self) -> None:
        """Block until every queued dead letter is durable. Raises ``SinkUnavailable`` if not."""

    def close(self) -> None: ...


@runtime_checkable
class DuplicateSink(Protocol):
    """The optional duplicates output: a report per record judged a duplicate."""

    def write(self, duplicate: Duplicate) -> None:
        """Queue one report, encoded for the medium as ``domain._duplicates`` defines it."""

    def flush(self) -> None:
        """Block until every queued report is durable. Raises ``SinkUnavailable`` if not."""

    def close(self) -> None: ...


@runtime_checkable
class BatchCommitter(Protocol):
    """Makes a judged batch final: its outputs and its input acknowledgement go together.

    The pipeline calls ``begin`` before judging a batch, ``commit`` once every outcome of
    the batch was delivered and flushed, and ``abort`` when a policy stopped the batch.
    """

    def begin(self) -> None:
        """Open a batch; the outputs written from now on belong to it (a Kafka transaction).

        Raises ``SinkUnavailable`` when it cannot be opened; nothing was written then.
        """

    def commit(self, records: Sequence[RawRecord]) -> None:
        """Make the open batch final and acknowledge ``records`` to their source, together.

        On failure nothing of the batch is acknowledged (a committer that held its outputs
        back aborts them and rewinds the source) and a ``DedupError`` is raised
        (``SinkUnavailable``, ``SourceUnavailable``): a restart processes the batch again.
        """

    def abort(self) -> None:
        """Give up the open batch: held-back outputs are discarded and its records are not
        acknowledged, so they are read again. Does nothing when no batch is open; never raises."""


@runtime_checkable
class StateStore(Protocol):
    """Remembers emissions per key. Times are in the rule's time basis (seconds).

    ``durable``: whether what the store remembers survives a crash of the process (Redis:
    yes; the in-memory store, even with a snapshot written at close: no). Exactly-once
    output needs a durable store; only a durable store can be inspected from outside.
    """

    @property
    def durable(self) -> bool: ...

    def check_and_set(self, claim: Claim) -> bool:
        """Atomically apply :func:`domain._state.decide`: True means emit, False duplicate.

        Idempotent for a replayed claim (same owner and time): granted again.
        Entries with ``expires_at <= claim.now`` are treated as absent. Raises ``StateUnavailable``.
        """

    def check_and_set_many(self, claims: Sequence[Claim]) -> list[Judgement]:
        """``check_and_set`` for each claim in order, each seeing the previous ones' effect; a
        refused claim's judgement names the emission it repeats (:func:`domain._state.decide`).

        Stores should decide the whole batch in one round trip. Raises ``StateUnavailable``
        with nothing applied, or everything applied (retrying the batch is then idempotent).
        """

    def invalidate(self, key: str) -> bool:
        """Forget every emission of ``key``; True if something was forgotten. Idempotent."""

    def entries(self, key: str, now: int) -> tuple[Emission, ...]:
        """The live emissions of ``key`` (read-only; used by migrations and inspection)."""

    def close(self) -> None: ...


@runtime_checkable
class PipelinedStateStore(StateStore, Protocol):
    """A ``StateStore`` that decides claims while its caller goes on (Redis: the script runs
    while the engine parses the batch's next records): ``Deduplicator.process`` sends each
    chunk of a batch's claims as soon as they are made and reads the answers at the end."""

    def send_many(self, claims: Sequence[Claim]) -> Callable[[], list[Judgement]]:
        """Send ``claims`` to be decided as ``check_and_set_many`` decides them, without waiting;
        the returned call gives their judgements.

        Claims are decided in the order they were sent, and answers must be read in that
        order. Either call may raise what ``check_and_set_many`` raises; the claims may then
        have been applied or not, and claiming them again gives the same judgements (each
        carries its owner).
        """


@runtime_checkable
class NotificationSource(Protocol):
    rejected: int  # invalid notifications read so far: never returned, counted here

    def poll(self, timeout: float, final: bool = False) -> list[Notification]:
        """Notifications that arrived since the last call; invalid ones are never returned.

        The adapter dead-letters invalid ones where it has a dead-letter output (Kafka, reason
        ``bad_notification`` or an event code), else logs them (a file, which keeps the line);
        either way it counts them in ``rejected``. ``final``: the input will not grow, so a last
        line without its newline is read as complete (a file; a stream ignores it).
        """

    def commit(self) -> None:
        """Acknowledge every notification returned so far (called once they took effect)."""

    def close(self) -> None: ...


@runtime_checkable
class NotificationSink(Protocol):
    def publish(self, notification: Notification) -> None:
        """Send one notification durably. Raises ``SinkUnavailable``."""

    def close(self) -> None: ...


@runtime_checkable
@runtime_checkable
class Clock(Protocol):
    def now(self) -> float:
        """Wall-clock seconds since the epoch."""

    def sleep(self, seconds: float) -> None: ...


@runtime_checkable
class Engine(Protocol):
    """A deduplication job: the memory, kafka and Spark engines alike, as ``dedup run`` drives them."""

    on_batch: Callable[[Accounting], None] | None  # called with the run's totals after every batch or poll

    def run(self, stop: threading.Event | None = None) -> Accounting:
        """Process until the input ends (a bounded run) or ``stop`` is set; the running batch
        finishes first. Returns the run's accounting. Raises ``SetupError`` when the job cannot
        start as configured, ``PolicyExhausted`` or ``RestartsExhausted`` when an error policy or
        the restart strategy gives up (the failing batch is then not acknowledged)."""


class SavedState(Protocol):
    """A job's state read while no job runs on it: what ``dedup state inspect``, ``explain`` and
    ``migrate`` use. Implemented by the memory snapshot, Redis and the Spark checkpoint; the
    container picks one by the state's URI. Each raises a ``SetupError`` (one line) for a state
    it cannot read."""

    name: str
    """How reports name it: ``snapshot PATH``, ``redis HOST:PORT/DB``, ``spark checkpoint DIR``."""

    def report(self, sample_size: int) -> StateReport:
        """Keys per rule, samples, expiries, value formats and size."""

    def recorded_key_fields(self, rule: str) -> tuple[str, ...] | None:
        """``rule``'s key fields as the state records them (a Spark checkpoint's manifest), else None."""

    def emissions(self, keys: Sequence[str]) -> dict[str, tuple[Emission, ...]]:
        """The emissions kept for each of ``keys`` that has any."""

    def clock(self, rule: str, now: int) -> tuple[int, str]:
        """The time liveness is judged at when none is given, and what it is (the rule's
        watermark where the state records it, else the wall clock ``now``)."""

    def migrate_to(
        self, target: str, rules: RuleSet, old_key_fields: dict[str, tuple[str, ...]], dry_run: bool
    ) -> list[str]:
        """Prepare the state at ``target`` for a job with ``rules`` from this one, unless
        ``dry_run``; returns the steps. ``old_key_fields``: this state's key fields where it
        does not record them."""

    def close(self) -> None: ...
