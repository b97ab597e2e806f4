"""Records through the pipeline of the in-process engines, in memory, in one call."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from adapters import InMemoryMetrics
from adapters.memory import InMemoryStateStore
from adapters.testing._clock import FakeClock
from adapters.testing._streams import ListDeadLetterSink, ListSink, ListSource
from domain import (
    DEFAULT_BATCH_SIZE,
    Accounting,
    BatchPipeline,
    DeadLetter,
    Deduplicator,
    Delivery,
    RawRecord,
    RuleSet,
    SourcePosition,
    StateStore,
)

SOURCE = "test"  # the source every record is read from, partition 0, offsets from 0


@dataclass
class Run:
    """What a run of ``deduplicate`` wrote: the unique events' bytes in the order they came
    out, the dead letters (each with the original bytes, ``record.value``, and a ``reason``),
    and the accounting (``accounting.records_in`` equals the records given, each counted in one
    bucket: ``out``, ``duplicates``, ``dead_lettered``, ``skipped``)."""

    emitted: list[bytes]
    dead_letters: list[DeadLetter]
    accounting: Accounting


def deduplicate(
    values: Iterable[bytes | str],
    rules: RuleSet | None = None,
    *,
    clock: FakeClock | None = None,
    state: StateStore | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    first_offset: int = 0,
) -> Run:
    """Judge ``values`` (JSON events, one per record; ``str`` is encoded as UTF-8) as the memory
    engine does, in order, from one partition (offsets from ``first_offset``), and return what
    came out.

    ``rules``: the default rules (APP 30 s, WEB 10 min) unless given. ``clock``: the wall
    clock the batches are judged at, a ``FakeClock`` at 2023-11-14 unless given (an event
    further ahead of it than its rule's ``max_ahead`` is a dead letter, ``too_far_ahead``).
    ``state``: a new in-memory store unless given (pass one to judge a second run against
    the first's memory; start that run's offsets after the first's: a record at a position
    already judged is a replay of it, judged as before). Errors follow the default policies: an invalid record becomes a
    dead letter, nothing stops the run.
    """
    clock = clock or FakeClock()
    records = [
        RawRecord(value.encode() if isinstance(value, str) else value, SourcePosition(SOURCE, 0, offset))
        for offset, value in enumerate(values, first_offset)
    ]
    core = Deduplicator(rules or RuleSet(), state if state is not None else InMemoryStateStore(), clock)
    sink, dead_letters = ListSink(), ListDeadLetterSink()
    pipeline = BatchPipeline(
        core,
        ListSource([records]),
        Delivery(core, sink, dead_letters),
        InMemoryMetrics(),
        batch_size=batch_size,
        max_batch_delay=0,
    )
    totals = pipeline.run()
    return Run(sink.written, dead_letters.written, totals)
