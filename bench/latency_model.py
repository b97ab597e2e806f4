"""The pure part of ``bench/latency_bench.py``: the load's schedule, the stream it sends and
what a correct engine does with each record, percentiles, and the accounting of what came out.

Nothing here touches Kafka or a clock of its own (the caller passes ``now``, or a clock and
a sleep), so ``tests/bench/test_latency_bench.py`` drives every piece with fakes.

* ``Schedule`` / ``pace``: a fixed rate on an absolute schedule (record ``i`` is due at
  ``start + i / rate``), sent in ticks (5 ms by default); a sender that cannot keep up is
  found out: ``GeneratorBehind`` as soon as it is more than ``max_behind`` seconds late, or
  at the end when it reached less than ``min_share`` of the rate.
* ``LoadStream``: JSON events keyed by ``uniqueValue`` over ``partitions`` partitions
  (``partition_of``: CRC-32 of the key), event time = the wall clock; a share are repeats of
  a key first sent in the last ``repeat_within`` seconds (duplicates: dropped), late records
  (event time ``late_by`` seconds behind a time their partition already showed for their
  type: dead-lettered ``late``) and invalid records (``not_json``, ``missing_field``). It
  remembers the ids a correct engine emits (``expected``) and the dead letters by reason
  (``dead``). With the default rules (APP 30 s, WEB 10 min, lateness = window) the verdicts
  hold as long as ``repeat_within + 1 < 30`` and ``late_by > 600``.
* ``percentile`` / ``summarize``: nearest-rank percentiles (the smallest value with at least
  p % of the values at or below it).
* ``account``: the ids expected but never seen (missing), seen more than once (doubled), seen
  but not expected (unexpected).
"""

from __future__ import annotations

import json
import math
import random
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p99.9", 99.9))
TYPES = ("APP", "WEB")
PHASES = {"probe": "p", "warm": "w", "measure": "m"}  # the prefix of the ids each phase sends


class GeneratorBehind(Exception):
    """The load generator did not hold its schedule: latencies measured behind a late
    generator measure the generator, so the run is refused, not reported."""


# --- the schedule -------------------------------------------------------------------------


@dataclass(frozen=True)
class Schedule:
    """``total`` records at ``rate`` per second from ``start``: record ``i`` is due at ``start + i / rate``."""

    rate: float
    start: float
    total: int

    def due(self, now: float) -> int:
        """How many records are due by ``now`` (at most ``total``)."""
        if now < self.start:
            return 0
        return min(self.total, math.floor((now - self.start) * self.rate + 1e-9) + 1)

    def behind(self, now: float, sent: int) -> float:
        """How late the first unsent record is at ``now`` (0 when none is due yet)."""
        if sent >= self.due(now):
            return 0.0
        return now - (self.start + sent / self.rate)


@dataclass(frozen=True)
class Pace:
    """What ``pace`` achieved: records sent, from ``start`` to the last send, the worst lateness."""

    rate: float
    sent: int
    start: float
    last_send: float
    worst_behind: float

    @property
    def reached(self) -> float:
        """Records per second; on schedule this is ``rate`` (the last record's slot counts)."""
        span = self.last_send - self.start + 1 / self.rate
        return self.sent / span if span > 0 else 0.0

    def check(self, min_share: float = 0.97) -> Pace:
        """Raises ``GeneratorBehind`` when less than ``min_share`` of the rate was reached."""
        if self.reached < min_share * self.rate:
            raise GeneratorBehind(
                f"the load generator reached {self.reached:,.0f} events/s of the {self.rate:,.0f} "
                f"requested ({self.reached / self.rate:.1%} < {min_share:.0%}): it measures nothing"
            )
        return self


def pace(
    rate: float,
    seconds: float,
    send: Callable[[], None],
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    *,
    tick: float = 0.005,
    max_behind: float = 1.0,
    on_tick: Callable[[], None] = lambda: None,
) -> Pace:
    """Calls ``send`` ``round(rate * seconds)`` times on the absolute schedule, a tick's worth
    at a time, sleeping to the next tick boundary when nothing is due (no drift). ``on_tick`` runs once a tick
    (the producer's poll). Raises ``GeneratorBehind`` as soon as a record is more than
    ``max_behind`` seconds late; the caller checks the rate reached (``Pace.check``)."""
    schedule = Schedule(rate, clock(), max(1, round(rate * seconds)))
    sent, worst, last = 0, 0.0, schedule.start
    most = max(1, math.ceil(rate * tick * 4))  # sends between two looks at the lateness
    while sent < schedule.total:
        now = clock()
        worst = max(worst, schedule.behind(now, sent))
        if worst > max_behind:
            raise GeneratorBehind(
                f"the load generator fell {worst:.2f} s behind its schedule of {rate:,.0f} "
                f"events/s at record {sent:,} of {schedule.total:,}: it measures nothing"
            )
        for _ in range(min(most, schedule.due(now) - sent)):
            last = clock()
            send()
            sent += 1
        on_tick()
        if sent < schedule.total and schedule.due(clock()) <= sent:  # nothing due: sleep to the next tick
            sleep(max(0.0, next_tick(schedule.start, clock(), tick) - clock()))
    return Pace(rate, sent, schedule.start, last, worst)


def next_tick(start: float, now: float, tick: float) -> float:
    """The first tick boundary (``start + k * tick``) after ``now``."""
    return start + (math.floor((now - start) / tick) + 1) * tick


# --- the stream -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Mix:
    """Shares of the records (the rest are first occurrences) and the times they rest on."""

    repeat_share: float = 0.18
    late_share: float = 0.005
    invalid_share: float = 0.005
    app_share: float = 0.5
    repeat_within: float = 5.0
    late_by: int = 3600


@dataclass(frozen=True)
class Record:
    """One record to send; ``verdict``: what a correct engine does with it (``unique`` is
    emitted, ``duplicate`` dropped, the others dead-lettered with that reason)."""

    id: str
    key: bytes | None
    partition: int
    value: bytes
    verdict: str


def partition_of(key: bytes, partitions: int) -> int:
    return zlib.crc32(key) % partitions


@dataclass
class LoadStream:
    """Makes the records (see the module's text) and remembers their verdicts: ``expected``,
    the ids a correct engine emits; ``dead``, the dead letters by reason; ``verdicts``, counts."""

    run: str
    partitions: int
    mix: Mix = field(default_factory=Mix)
    seed: int = 7
    expected: set[str] = field(default_factory=set)
    dead: Counter = field(default_factory=Counter)
    verdicts: Counter = field(default_factory=Counter)

    def __post_init__(self):
        self._rng = random.Random(self.seed)
        self._seq = 0
        self._recent: list[tuple[float, str, str]] = []  # (wall time, uniqueValue, type) of recent firsts
        self._head = 0
        self._types_seen: dict[int, set[str]] = {}

    def next(self, phase: str, now: float) -> Record:
        """The next record of ``phase`` (``PHASES``) sent at wall time ``now``."""
        draw, mix = self._rng.random(), self.mix
        record = None
        if draw < mix.invalid_share:
            record = self._invalid(phase, now)
        elif draw < mix.invalid_share + mix.late_share:
            record = self._late(phase, now)
        elif draw < mix.invalid_share + mix.late_share + mix.repeat_share:
            record = self._repeat(phase, now)
        return self._note(record or self._first(phase, now))

    def probe(self, partition: int, type_: str, now: float) -> Record:
        """A first occurrence of ``type_`` on ``partition``: a startup probe."""
        self._seq += 1
        for attempt in range(10_000):
            unique_value = f"{self.run}-{self._seq:09d}-{attempt}"
            if partition_of(unique_value.encode(), self.partitions) == partition:
                return self._note(self._first("probe", now, unique_value, type_))
        raise AssertionError("no key found for the partition")  # pragma: no cover - 1 in e^-2500

    def _first(self, phase: str, now: float, unique_value: str | None = None, type_: str | None = None) -> Record:
        id_ = self._new_id(phase)
        unique_value = unique_value or f"{self.run}-{self._seq:09d}"
        type_ = type_ or ("APP" if self._rng.random() < self.mix.app_share else "WEB")
        self._recent.append((now, unique_value, type_))
        record = self._event(id_, unique_value, type_, int(now), "unique")
        self._types_seen.setdefault(record.partition, set()).add(type_)
        self.expected.add(id_)
        return record

    def _repeat(self, phase: str, now: float) -> Record | None:
        """Another id with the key and type of a first occurrence sent at most ``repeat_within`` s ago."""
        while self._head < len(self._recent) and self._recent[self._head][0] < now - self.mix.repeat_within:
            self._head += 1
        if self._head > 100_000:
            del self._recent[: self._head]
            self._head = 0
        if self._head == len(self._recent):
            return None
        _, unique_value, type_ = self._recent[self._rng.randrange(self._head, len(self._recent))]
        return self._event(self._new_id(phase), unique_value, type_, int(now), "duplicate")

    def _late(self, phase: str, now: float) -> Record | None:
        """A new key on a partition that already showed its type, ``late_by`` s behind the clock."""
        id_ = self._new_id(phase)
        unique_value = f"{self.run}-{self._seq:09d}"
        seen = sorted(self._types_seen.get(partition_of(unique_value.encode(), self.partitions), ()))
        if not seen:
            return None
        return self._event(id_, unique_value, self._rng.choice(seen), int(now) - self.mix.late_by, "late")

    def _invalid(self, phase: str, now: float) -> Record:
        """Every other one not JSON, the others without a ``uniqueValue``; unkeyed, partitions in turn."""
        id_ = self._new_id(phase)
        partition = self._seq % self.partitions
        if self._seq % 2:
            return Record(id_, None, partition, f'{{"id": "{id_}", not json'.encode(), "not_json")
        value = json.dumps({"id": id_, "type": "APP", "timestamp": int(now)}).encode()
        return Record(id_, None, partition, value, "missing_field")

    def _event(self, id_: str, unique_value: str, type_: str, timestamp: int, verdict: str) -> Record:
        key = unique_value.encode()
        value = json.dumps({"id": id_, "uniqueValue": unique_value, "type": type_, "timestamp": timestamp}).encode()
        return Record(id_, key, partition_of(key, self.partitions), value, verdict)

    def _new_id(self, phase: str) -> str:
        self._seq += 1
        return f"{PHASES[phase]}-{self.run}-{self._seq}"

    def _note(self, record: Record) -> Record:
        self.verdicts[record.verdict] += 1
        if record.verdict not in ("unique", "duplicate"):
            self.dead[record.verdict] += 1
        return record


def phase_of(id_: str) -> str:
    """The phase that sent the record with this id."""
    prefix = id_.partition("-")[0]
    return next((name for name, short in PHASES.items() if short == prefix), "unknown")


# --- figures --------------------------------------------------------------------------------


def percentile(ordered: Sequence[float], p: float) -> float:
    """Nearest rank: the smallest value with at least ``p`` % of ``ordered`` (sorted) at or below it."""
    if not ordered:
        raise ValueError("no values")
    rank = math.ceil(round(p * len(ordered) / 100, 9))
    return ordered[min(len(ordered), max(1, rank)) - 1]


def summarize(latencies: Iterable[float]) -> dict:
    """Count, mean, ``PERCENTILES`` and max of ``latencies`` (seconds); None figures when empty."""
    ordered = sorted(latencies)
    if not ordered:
        return {"count": 0, "mean": None, **{name: None for name, _ in PERCENTILES}, "max": None}
    return {
        "count": len(ordered),
        "mean": sum(ordered) / len(ordered),
        **{name: percentile(ordered, p) for name, p in PERCENTILES},
        "max": ordered[-1],
    }


@dataclass(frozen=True)
class Outcome:
    """What came out against what was expected (ids, sorted)."""

    missing: list[str]
    doubled: dict[str, int]  # id -> times seen (> 1), expected or not
    unexpected: list[str]

    @property
    def exact(self) -> bool:
        return not (self.missing or self.doubled or self.unexpected)


def account(expected: set[str], arrivals: Mapping[str, Sequence[float]]) -> Outcome:
    """``arrivals``: id -> the times it was seen on the output."""
    return Outcome(
        missing=sorted(expected - arrivals.keys()),
        doubled={id_: len(times) for id_, times in sorted(arrivals.items()) if len(times) > 1},
        unexpected=sorted(arrivals.keys() - expected),
    )


def latencies(sent: Mapping[str, float], arrivals: Mapping[str, Sequence[float]], ids: Iterable[str]) -> list[float]:
    """Seconds from each id's send to its first arrival, for the ``ids`` that arrived."""
    return [min(arrivals[id_]) - sent[id_] for id_ in ids if id_ in arrivals]


class Drain:
    """When reading the outputs may stop: every ``expected`` id and ``dead_letters`` dead letters
    seen, then ``grace`` seconds more (to catch copies arriving late); or at ``deadline``."""

    def __init__(self, expected: Iterable[str], dead_letters: int, deadline: float, grace: float = 1.0):
        self.outstanding = set(expected)
        self.dead_letters, self.deadline, self.grace = dead_letters, deadline, grace
        self.complete_at: float | None = None

    def seen(self, id_: str) -> None:
        self.outstanding.discard(id_)

    def over(self, dead_letters_seen: int, now: float) -> bool:
        if self.complete_at is None and not self.outstanding and dead_letters_seen >= self.dead_letters:
            self.complete_at = now
        return now >= self.deadline or (self.complete_at is not None and now >= self.complete_at + self.grace)


def timeline(
    sent: Mapping[str, float], arrivals: Mapping[str, Sequence[float]], ids: Iterable[str], bucket: float = 5.0
) -> list[dict]:
    """``summarize`` per ``bucket`` seconds of send time (from the first of ``ids`` sent), for the
    ids that arrived: a steady latency against one that grows (an engine falling behind)."""
    ids = [id_ for id_ in ids if id_ in arrivals]
    if not ids:
        return []
    start = min(sent[id_] for id_ in ids)
    buckets: dict[int, list[str]] = {}
    for id_ in ids:
        buckets.setdefault(int((sent[id_] - start) // bucket), []).append(id_)
    return [
        {"from_s": index * bucket, **summarize(latencies(sent, arrivals, members))}
        for index, members in sorted(buckets.items())
    ]
