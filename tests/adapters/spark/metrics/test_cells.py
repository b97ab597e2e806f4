"""The accounting cells (``adapters.spark.metrics._cells``): every combination of a judged row's
facts, spread over partitions, is counted exactly as the named counts define it."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from adapters.spark.metrics import BOUNDS, PREFIX, REASONS, TOTAL, VERDICTS, CellLayout
from adapters.spark.stream import NOTIFICATION, REJECTED_NOTIFICATION
from domain import BUCKET_OF, DEAD_LETTER_REASONS, NO_RULE, OVERSIZE, Verdict

pytestmark = pytest.mark.spark
RULES = ("APP", "WEB")
SCHEMA = "verdict string, reason string, rule string, passed boolean, delay double"


def expected_names(verdict, reason, rule, passed, delay) -> list[str]:
    """What one row counts in, read off its raw values (the definitions the cells encode)."""
    label = NO_RULE if rule is None else rule
    names = []
    if verdict is not None and verdict not in (NOTIFICATION, REJECTED_NOTIFICATION):
        names.append("in")
    bucket = {v.value: b for v, b in BUCKET_OF.items()}.get(verdict)
    names += [bucket] if bucket else []
    names += ["late"] if reason == "late" else []
    names += ["invalid"] if reason is not None and reason not in ("late", OVERSIZE) else []
    names += ["passed_through"] if passed else []
    names += ["invalidations"] if verdict == NOTIFICATION else []
    names += ["rejected_notifications"] if verdict == REJECTED_NOTIFICATION else []
    if bucket in ("out", "duplicates") and label in (*RULES, NO_RULE):
        names.append(f"{bucket}@{label}")
    if reason == "late" and label in RULES:
        names.append(f"late@{label}")
    if bucket == "dead_lettered" and reason in DEAD_LETTER_REASONS:
        names.append(f"dead_lettered@{reason}")
    if verdict == Verdict.EMIT.value and label in (*RULES, NO_RULE):
        names.append(f"{PREFIX}{label}:{TOTAL}")
        names += [f"{PREFIX}{label}:{i}" for i, bound in enumerate(BOUNDS) if delay is not None and delay <= bound]
    return names


def test_every_combination_of_facts_over_many_partitions_is_counted_exactly(spark):
    from pyspark.sql import functions as F

    delays = (None, -1.0, *(float(b) for b in BOUNDS), *(b * 1.5 for b in BOUNDS))
    rows = list(
        itertools.product(
            (None, "unlisted", *VERDICTS),
            (None, "unlisted", *REASONS),
            (None, "OTHER", *RULES, NO_RULE),
            (None, False, True),
            delays,
        )
    )
    rows += rows[::7]  # cells seen twice, in other partitions
    layout = CellLayout.of(RULES, BOUNDS)
    df = spark.createDataFrame(rows, SCHEMA).repartition(8)

    got = layout.counts(df.select(layout.cell(F.col("delay")).alias("c")).agg(layout.column(F.col("c"))).first())

    expected = Counter(name for row in rows for name in expected_names(*row))
    assert got == dict(expected)
    assert got["in"] == sum(1 for r in rows if r[0] not in (None, NOTIFICATION, REJECTED_NOTIFICATION))


def test_no_rows_count_nothing(spark):
    from pyspark.sql import functions as F

    layout = CellLayout.of(RULES, BOUNDS)
    empty = spark.createDataFrame([], SCHEMA)
    assert (
        layout.counts(empty.select(layout.cell(F.col("delay")).alias("c")).agg(layout.column(F.col("c"))).first()) == {}
    )
    assert layout.counts(None) == {}
