"""A micro-batch's accounting as one aggregate: each judged row falls in one cell, and the cells are counted.

A row's cell is one integer made of the facts its counts depend on (``CellLayout.cell``): its
verdict, its reason, its rule (``NO_RULE`` when null), whether it was passed through, and for
a unique event the histogram bucket of its delay (``metrics._latency``). Spark counts the rows
per cell with ``histogram_numeric``, which keeps one bin per distinct value and is exact while
there are at most as many distinct values as bins (``CellLayout.size``, every cell there can be):
its bins are only merged, closest first, past that number. The aggregate is imperative: Spark
updates it without generating code in every task, where about ninety conditional sums (one per
count) made every task generate and look up the source of a projection (docs/design/latency.md).

``CellLayout.counts`` turns the cells back into the named counts of ``Accounting.as_dict`` plus
the breakdowns (``name@label``) and the latency buckets (``latency:RULE:I``, cumulative, and
``latency:RULE:n``): what a row counts in is defined here, once, over the decoded facts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from adapters.spark.metrics._latency import PREFIX, TOTAL
from adapters.spark.stream import NOTIFICATION, REJECTED_NOTIFICATION
from domain import BUCKET_OF, DEAD_LETTER_REASONS, LABEL_OF, NO_RULE, OVERSIZE, Verdict

CELLS = "cells"
CELL = "_accounting_cell"  # the column a row's cell is projected to
LATE = "late"
VERDICTS: tuple[str, ...] = (*(v.value for v in BUCKET_OF), NOTIFICATION, REJECTED_NOTIFICATION)
REASONS: tuple[str, ...] = tuple(dict.fromkeys((LATE, OVERSIZE, *DEAD_LETTER_REASONS)))
NOT_COUNTED = {NOTIFICATION, REJECTED_NOTIFICATION}  # verdicts of rows that are not input records


@dataclass(frozen=True)
class CellLayout:
    """The cells of the rules ``rules`` (their event types, in a fixed order) and histogram ``bounds``.

    Each fact has the values listed plus two: absent (null) first and an unlisted one last.
    """

    rules: tuple[str, ...]
    bounds: tuple[float, ...]

    @classmethod
    def of(cls, rules: Iterable[str], bounds: Iterable[float]) -> CellLayout:
        return cls(tuple(rules), tuple(bounds))

    @property
    def labels(self) -> tuple[str, ...]:
        return (*self.rules, NO_RULE)

    @property
    def radices(self) -> tuple[int, ...]:
        return len(VERDICTS) + 2, len(REASONS) + 2, len(self.labels) + 2, 2, len(self.bounds) + 1

    @property
    def size(self) -> int:
        size = 1
        for radix in self.radices:
            size *= radix
        return size

    def cell(self, delay: Column) -> Column:
        """A judged row's cell (``verdict``, ``reason``, ``rule``, ``passed`` and ``delay``: its seconds since arrival)."""
        verdict, reason = F.col("verdict"), F.col("reason")
        rule = F.coalesce(F.col("rule"), F.lit(NO_RULE))
        bucket = F.lit(len(self.bounds))
        for index in reversed(range(len(self.bounds))):
            bucket = F.when(delay <= F.lit(self.bounds[index]), index).otherwise(bucket)
        facts = [
            _index(verdict, VERDICTS),
            _index(reason, REASONS),
            _index(rule, self.labels),
            F.when(F.col("passed"), 1).otherwise(0),
            F.when(verdict == Verdict.EMIT.value, bucket).otherwise(0),
        ]
        code = F.lit(0)
        for radix, fact in zip(self.radices, facts):
            code = code * F.lit(radix) + fact
        return code

    def column(self, cell: Column) -> Column:
        """The aggregate of a column of cells (``cell``, projected beforehand: an aggregate
        evaluates its input without generated code): per cell, how many rows (``CELLS``, an
        array of ``{x: cell, y: count}``)."""
        return F.histogram_numeric(cell, F.lit(self.size)).alias(CELLS)

    def counts(self, row) -> dict[str, int]:
        """The named counts of an aggregated row (a ``Row`` or a mapping; ``None``: nothing counted)."""
        values = _mapping(row).get(CELLS) if row is not None else None
        counts: dict[str, int] = {}
        for bin_ in values or ():
            for name in self._names(int(bin_["x"])):
                counts[name] = counts.get(name, 0) + int(bin_["y"])
        return counts

    def _names(self, code: int) -> list[str]:
        facts = []
        for radix in reversed(self.radices):
            code, fact = divmod(code, radix)
            facts.append(fact)
        verdict_i, reason_i, label_i, passed, bucket = reversed(facts)
        verdict = _value(verdict_i, VERDICTS)
        reason = _value(reason_i, REASONS)
        label = _value(label_i, self.labels)
        names = []
        if verdict is not None and verdict not in NOT_COUNTED:
            names.append("in")
        bucket_name = BUCKET_OF.get(Verdict(verdict)) if verdict in _BUCKET_VERDICTS else None
        if bucket_name is not None:
            names.append(bucket_name)
        if reason == LATE:
            names.append("late")
        if reason is not None and reason not in (LATE, OVERSIZE):
            names.append("invalid")
        if passed:
            names.append("passed_through")
        if verdict == NOTIFICATION:
            names.append("invalidations")
        if verdict == REJECTED_NOTIFICATION:
            names.append("rejected_notifications")
        if self.rules:
            names += self._breakdown(bucket_name, reason, label)
        if verdict == Verdict.EMIT.value and label in self.labels:
            names.append(f"{PREFIX}{label}:{TOTAL}")
            names += [f"{PREFIX}{label}:{i}" for i in range(bucket, len(self.bounds))]
        return names

    def _breakdown(self, bucket_name: str | None, reason: str | None, label: str | None) -> list[str]:
        names = []
        if bucket_name is not None and LABEL_OF.get(bucket_name) == "rule" and label in self.labels:
            names.append(f"{bucket_name}@{label}")
        if reason == LATE and label in self.rules:
            names.append(f"late@{label}")
        if bucket_name == "dead_lettered" and reason in DEAD_LETTER_REASONS:
            names.append(f"dead_lettered@{reason}")
        return names


_BUCKET_VERDICTS = {v.value for v in BUCKET_OF}


def _index(value: Column, values: tuple[str, ...]) -> Column:
    """0 for null, 1 + the position of ``value`` in ``values``, else ``len(values) + 1``."""
    position = F.array_position(F.array(*[F.lit(v) for v in values]), value)
    return F.when(value.isNull(), 0).when(position == 0, len(values) + 1).otherwise(position).cast("int")


def _value(index: int, values: tuple[str, ...]) -> str | None:
    """The value ``_index`` numbered ``index``; an unlisted one reads as ``""`` (not null, no known value)."""
    if index == 0:
        return None
    return values[index - 1] if index <= len(values) else ""


def _mapping(row) -> Mapping:
    return row.asDict() if hasattr(row, "asDict") else row
