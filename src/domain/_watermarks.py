"""Per-rule watermarks over a partitioned source (Flink's per-partition watermarks).

Producers spread events over partitions by key, so each partition covers the same span of
event time, but a consumer reads them in chunks, one partition after another. A watermark
taken over everything read would race ahead with the first chunk and declare the other
partitions' events late. So:

* An event is **late** only when its own partition has moved past it: when its time is
  older than ``horizon`` (the newest time its partition showed for the rule, or the rule's
  watermark if that is higher) minus the rule's lateness. Every key lives in one partition,
  so this verdict does not depend on how partitions are interleaved or batched.
* The **watermark** of a rule, which decides when state may be forgotten, is the minimum
  over the source's partitions of the newest time seen in each:

* A partition the source reads (``expect``) but that has shown no event of the rule yet
  holds the rule's watermark back: until then the rule has none (nothing is late).
* A partition that shows no event of the rule for ``idle_timeout`` seconds of wall-clock
  time (since its last one, or since it was first expected) is left out, so one silent
  partition does not hold everything back.
* A partition the source no longer reads (revoked in a rebalance) is left out and forgotten.
* A partition **gained** after the first assignment (a rebalance moved it here from another
  instance of the group, or the topic grew) starts afresh, like a partition first expected,
  and may take the watermark **back**: it was read up to where its previous reader stopped,
  which can be far behind the partitions this reader had, and its events must not be judged
  late, nor its remembered emissions expired, against their time. A lower watermark only
  keeps state longer; whether a repeat is inside its window is decided by event times.
* Otherwise the watermark never goes back; when every partition is idle it stays where it was.
* No time an event is judged against runs ahead of the wall clock (``clock_bound``): a
  horizon or watermark raised by a record from the future (up to the rule's ``max_ahead``,
  or a producer whose clock is fast) is read as the wall clock's second. One such record,
  or a whole skewed producer, can then make no on-time event late and no remembered
  emission be forgotten early; a backlog (times behind the clock) is judged as before.

Partitions are named by the engine (``topic:partition``); times are whole seconds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from domain._metrics import Metrics

DEFAULT_IDLE_TIMEOUT = 60.0


_UNSAMPLED = object()
"""In ``Watermarks._known``: the lowest active time moved, the watermark not yet taken from it."""


def clock_bound(t: int | None, now: float) -> int | None:
    """``t`` (a horizon or a watermark), never past the wall clock's second ``now``."""
    return None if t is None else min(t, math.floor(now))


def publish_table(metrics: Metrics, watermarks: dict[str, int], newest: dict[tuple[str, str], int]) -> None:
    """Each rule's watermark (``watermark_seconds``) and how far it is behind the newest event
    time seen for the rule (``event_time_lag_seconds``) as gauges of a ``domain._ports.Metrics``,
    from a table (``Watermarks.table``: its watermarks, its newest times by rule and partition)."""
    for rule, mark in watermarks.items():
        metrics.gauge("watermark_seconds", mark, rule=rule)
        latest = max((t for (r, _), t in newest.items() if r == rule), default=mark)
        metrics.gauge("event_time_lag_seconds", max(0, latest - mark), rule=rule)


def _horizon(newest: int | None, watermark: int | None) -> int | None:
    """A partition's horizon from its ``newest`` time and the rule's ``watermark``."""
    if newest is None or watermark is None:
        return watermark if newest is None else newest
    return max(newest, watermark)


@dataclass
class Watermarks:
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    _expected: set[str] | None = None  # None: the source does not say; the partitions seen count
    _since: dict[str, float] = field(default_factory=dict)  # partition → wall time first expected
    _newest: dict[str, dict[str, list[Any]]] = field(default_factory=dict)  # rule → partition → [time, wall]
    _current: dict[str, int] = field(default_factory=dict)
    _known: dict[str, list[Any]] = field(
        default_factory=dict
    )  # rule → [now, ``of``, lowest active newest, the next one up, active partitions] still true

    def expect(self, partitions: Iterable[str], now: float) -> None:
        """The partitions the source reads from now on (its current assignment)."""
        expected = set(partitions)
        if self._expected is not None and expected != self._expected:
            gained = expected - self._expected
            for partition in gained | (self._expected - expected):
                self._since.pop(partition, None)
                for seen in self._newest.values():
                    seen.pop(partition, None)
            if gained:
                self._current.clear()
        self._expected = expected
        self._known.clear()
        for partition in expected:
            self._since.setdefault(partition, now)

    def observe(self, rule: str, partition: str, t: int, now: float) -> None:
        """An event of ``rule`` at time ``t`` was read from ``partition`` at wall time ``now``."""
        self._observe(rule, partition, t, now)

    def _observe(self, rule: str, partition: str, t: int, now: float) -> list[Any]:
        """``observe``; returns the partition's ``[newest time, wall time]`` after it.

        What ``of`` answered at ``now`` stays true (``_known``) unless this moves the lowest
        active partition: a partition first seen, or seen again at a new wall time (it may have
        been idle), forgets it. A partition raised above the second lowest forgets it too;
        one at the lowest raised to no more than the second lowest moves the lowest there
        (ties: the second lowest is the lowest), and of two active partitions the lowest raised
        past the other makes that one the lowest, with no walk over the partitions; one above
        the lowest leaves it where it is.
        """
        seen = self._newest.get(rule)
        if seen is None:
            seen = self._newest[rule] = {}
        newest = seen.get(partition)
        if newest is None:
            newest = seen[partition] = [t, now]
        elif newest[1] != now:
            newest[0], newest[1] = max(newest[0], t), now
        elif t > newest[0]:
            known, before = self._known.get(rule), newest[0]
            newest[0] = t
            if known is not None and known[0] == now and known[2] is not None:
                if before > known[2]:
                    return newest  # active and above the lowest: the watermark stays where it is
                counted = self._expected is None or partition in self._expected  # else ``expect`` left it out
                if counted and t <= known[3]:  # it was the lowest and stays the lowest, at t
                    known[1], known[2] = _UNSAMPLED, t
                    return newest
                if counted and known[4] == 2:  # of two active partitions, the other is the lowest now
                    known[1], known[2], known[3] = _UNSAMPLED, known[3], t
                    return newest
        else:
            return newest
        self._known.pop(rule, None)
        return newest

    def judge(self, rule: str, partition: str, t: int, now: float) -> tuple[int | None, int]:
        """``observe`` the event, then what it is judged against: the rule's watermark (``of``)
        and its partition's ``horizon``, both bound by the clock (``clock_bound``). One call for
        the three, as an engine judges every record."""
        newest: int = self._observe(rule, partition, t, now)[0]
        known = self._known.get(rule)
        fresh = known is not None and known[0] == now and known[1] is not _UNSAMPLED
        mark: int | None = known[1] if fresh and known is not None else self.of(rule, now)
        second = math.floor(now)
        if mark is None:
            return None, newest if newest < second else second
        if mark > second:
            mark = second
        horizon = newest if newest > mark else mark
        return mark, horizon if horizon < second else second

    def of(self, rule: str, now: float) -> int | None:
        """The rule's watermark at wall time ``now``; None while it has none."""
        known = self._known.get(rule)
        if known is not None and known[0] == now:
            mark: int | None = known[1]
            if mark is not _UNSAMPLED:
                return mark
            low: int = known[2]  # the lowest moved (``_observe``), the others did not
            mark = known[1] = self._current[rule] = max(self._current.get(rule, low), low)
            return mark
        lowest, second, active = self._lowest_active(rule, now)
        if lowest is not None:
            self._current[rule] = max(self._current.get(rule, lowest), lowest)
        mark = self._current.get(rule)
        self._known[rule] = [now, mark, lowest, second, active]
        return mark

    def _lowest_active(self, rule: str, now: float) -> tuple[int | None, float, int]:
        """The lowest newest time of the partitions not idle at ``now``, the next one up (the
        lowest again when two share it; infinite when one partition is active), and how many
        are active; None while a partition that showed nothing yet holds the watermark back,
        or when every partition is idle."""
        seen = self._newest.get(rule, {})
        partitions = seen.keys() if self._expected is None else self._expected
        low: int | None = None
        second, active = math.inf, 0
        for partition in partitions:
            newest = seen.get(partition)
            if newest is None:
                if now - self._since.get(partition, now) < self.idle_timeout:
                    return None, second, 0
            elif now - newest[1] < self.idle_timeout:
                active += 1
                t = newest[0]
                if low is None or t < low:
                    low, second = t, (second if low is None else low)
                elif t < second:
                    second = t
        return low, second, active

    def newest(self, rule: str, partition: str) -> int | None:
        """The newest time ``partition`` showed for ``rule``."""
        seen = self._newest.get(rule, {}).get(partition)
        return None if seen is None else seen[0]

    def horizon(self, rule: str, partition: str, watermark: int | None) -> int | None:
        """What an event of ``rule`` from ``partition`` is late against (see the module's text),
        given the rule's ``watermark`` (``of``)."""
        return _horizon(self.newest(rule, partition), watermark)

    def table(self, now: float) -> tuple[dict[str, int], dict[tuple[str, str], int]]:
        """Every rule's watermark and every (rule, partition)'s newest time, at wall time ``now``:
        what an engine that judges a batch at a time judges it against."""
        watermarks = {rule: mark for rule in self._newest if (mark := self.of(rule, now)) is not None}
        newest = {(rule, p): seen[0] for rule, parts in self._newest.items() for p, seen in parts.items()}
        return watermarks, newest

    def publish(self, metrics: Metrics, now: float) -> None:
        """The watermarks' ``table`` at ``now`` as gauges (``publish_table``)."""
        publish_table(metrics, *self.table(now))

    def to_document(self) -> dict[str, Any]:
        """What a restart needs to resume the watermarks (JSON-ready)."""
        return {"newest": self._newest, "current": self._current, "since": self._since}

    @classmethod
    def from_document(cls, document: dict[str, Any], idle_timeout: float = DEFAULT_IDLE_TIMEOUT) -> Watermarks:
        marks = cls(idle_timeout)
        marks._newest = {rule: {p: list(v) for p, v in parts.items()} for rule, parts in document["newest"].items()}
        marks._current = {rule: int(t) for rule, t in document["current"].items()}
        marks._since = dict(document.get("since", {}))
        marks._known.clear()
        return marks
