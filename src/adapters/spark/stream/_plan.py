"""The deduplication plan, compiled from a ``domain._rules.RuleSet`` into Spark operations.

The rules become column expressions (each event's window, lateness, time and scoped key,
chosen by its type); the judgement itself is one JVM ``transformWithState`` operator
(``stream._operator``) applying the domain's decision per key in arrival order. Nothing
here decides semantics: windows, lateness, key scoping and the unknown-type policy come
from the RuleSet, and the operator implements ``domain._state.decide``.

``with_verdicts(records)`` returns every input row once with ``verdict`` (the domain's
``Verdict`` values: ``emit``, ``duplicate``, ``dead-letter``, or ``skip`` for invalid records
under ``invalid=skip``), ``reason`` and ``passed`` (emitted without a rule), and for a
duplicate what its report needs (``domain._duplicates``): ``t`` and ``window`` under its rule,
``repeats_time`` and ``repeats_owner`` (the emission it repeats, its maker's position token). With Redis as the
state, the stream stops at ``state_input`` and each micro-batch is judged by
``adapters.spark.batch._redis_judge``, whose verdicts ``verdicts`` turns into the same rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from adapters.spark.shared import CLOCK, clock_seconds, escaped, key_column, with_clock
from adapters.spark.stream._operator import apply_operator, running_newest
from adapters.spark.stream._parse import drop_work_columns, key_field_part, key_field_problem, parse
from domain import REQUIRED_STRING_FIELDS, DedupRule, RuleSet, Terminal, TimeBasis, UnknownTypePolicy, Verdict

if TYPE_CHECKING:
    from adapters.spark.stream._watermarks import BatchWatermarks

STANDARD_FIELDS = (*REQUIRED_STRING_FIELDS, "timestamp")  # key fields the parser checks itself
RECORD_COLUMNS = ("value", "kafka_key", "source", "partition", "offset", "ord", "file_time", "arrived")
PASS_GROUPS = 64  # rows passed through are spread over this many stateless groups
VERDICT_COLUMNS = ("verdict", "repeats_time", "repeats_owner")  # what the judge adds to each operator-input row
EMIT, DUPLICATE, DEAD_LETTER, SKIP = (
    v.value for v in (Verdict.EMIT, Verdict.DUPLICATE, Verdict.DEAD_LETTER, Verdict.SKIP)
)
NOTIFICATION = "invalidated"  # the verdict of an INVALIDATE notification row: not an input record
REJECTED_NOTIFICATION = "rejected_notification"  # a notification that is not an INVALIDATE of a valid, ruled event
Hook = Callable[[DataFrame], DataFrame]


@dataclass(frozen=True)
class DedupPlan:
    """``invalid``: the ``invalid`` policy's last step, applied per micro-batch (docs/design/spark.md,
    deviation 4): ``skip`` marks invalid records skipped, ``fail`` fails the micro-batch
    (``raise_error``), ``dead-letter`` and ``invalidate`` (no key to forget) dead-letter them."""

    rules: RuleSet
    invalid: Terminal = Terminal.DEAD_LETTER
    before_operator: Hook | None = None  # e.g. a migration's old-state lookup, notifications
    state_rows: Any = None  # the JVM StateRowCount counting the operator's keys (``state_row_counter``)
    watermarks: BatchWatermarks | None = None  # what each batch is judged against

    @property
    def extra_fields(self) -> tuple[str, ...]:
        names = {n for r in self.rules.rules.values() for n in r.key_fields if n not in STANDARD_FIELDS}
        return tuple(sorted(names))

    def with_verdicts(self, records: DataFrame) -> DataFrame:
        """Every row of ``records`` (columns ``RECORD_COLUMNS``) once, with its verdict.

        One path for all rows: the operator judges valid events with a rule and passes the
        others through (a filter-and-union split would let Spark's predicate pushdown copy
        the whole parse expression into each branch's filter).
        """
        marks = self.watermarks
        assert marks is not None  # the operator reads them: a plan streamed through it has them (SparkEngine.plan)
        judged = apply_operator(self.state_input(records), "key", self.state_rows, marks.horizons, marks.newest)
        return self.verdicts(judged)

    def state_input(self, records: DataFrame) -> DataFrame:
        """The rows the state judges (``operator_input``), through ``before_operator``."""
        rows = self.operator_input(records)
        return rows if self.before_operator is None else self.before_operator(rows)

    def operator_input(self, records: DataFrame) -> DataFrame:
        """Records → one row per record with its rule's columns: ``key``, ``t``, ``window``,
        ``lateness``, ``judged`` (a valid event with a rule: the state judges it), ``rule`` and ``lane`` (the source
        partition its watermark counts it in: ``topic:partition``, or ``files`` for every file
        of a directory, which are one stream read in order), ``seen`` (the newest time of the
        rule in the row's input partition so far, ``stream._operator.running_newest``), ``reason``/``detail``."""
        records = with_clock(records)
        if "arrived" not in records.columns:  # when the record arrived (stream._sources); else now
            records = records.withColumn("arrived", F.timestamp_micros(F.col(CLOCK)))
        if "file_time" not in records.columns:  # one source, ordered by ``ord`` alone
            records = records.withColumn("file_time", F.lit(0).cast("long"))
        annotated = self.annotate(parse(records, self.extra_fields))
        judged = F.col("reason").isNull() & F.col("ruled")
        spread = F.concat(F.lit("\u0000"), F.pmod(F.col("ord"), F.lit(PASS_GROUPS)).cast("string"))
        lane = F.when(F.col("source").contains("/"), F.lit("files")).otherwise(
            F.concat_ws(":", F.col("source"), F.col("partition").cast("string"))
        )
        rows = annotated.select(
            *RECORD_COLUMNS,
            CLOCK,
            "reason",
            "detail",
            "t",
            "ts",
            "window",
            "lateness",
            judged.alias("judged"),
            F.when(judged, F.col("key")).otherwise(spread).alias("key"),
            F.when(judged, F.col("type")).alias("rule"),
            lane.alias("lane"),
        )
        return running_newest(rows)

    def verdicts(self, judged: DataFrame) -> DataFrame:
        """The judged rows (the operator's verdicts ``emit``, ``duplicate``, ``late``, ``pass``,
        ``invalidated``) as the plan's output, invalid records per ``invalid``; ``rule`` is the
        rule that judged the row (null: passed through or invalid). A notification row the
        operator passed is ``invalidated`` when its event is valid but has no rule (nothing to
        forget, as in the domain), else ``rejected_notification`` (``stream._invalidation``):
        counted, never written."""
        verdict, late, valid = F.col("verdict"), F.col("verdict") == "late", F.col("reason").isNull()
        note = (F.col("invalidate") if "invalidate" in judged.columns else F.lit(False)) & (verdict == "pass")
        rejected = note & ~valid
        passed = (verdict == "pass") & ~note
        return judged.select(
            *RECORD_COLUMNS,
            CLOCK,
            F.when(rejected, REJECTED_NOTIFICATION)
            .when(note, NOTIFICATION)
            .when(late, DEAD_LETTER)
            .when(passed & ~valid, self._invalid_verdict())
            .when(passed, EMIT)
            .otherwise(verdict)
            .alias("verdict"),
            F.when(late, "late").when(~rejected, F.col("reason")).alias("reason"),
            F.when(late, F.lit("event time is older than the watermark minus the rule's lateness"))
            .when(~rejected, F.col("detail"))
            .alias("detail"),
            (passed & valid).alias("passed"),
            F.col("rule"),
            "t",
            "window",
            "repeats_time",
            "repeats_owner",
        )

    def _invalid_verdict(self) -> Column:
        if self.invalid is Terminal.SKIP:
            return F.lit(SKIP)
        if self.invalid is Terminal.FAIL:
            message = F.concat(F.lit("invalid record (policy invalid=fail): "), F.col("reason"))
            return F.raise_error(message).cast("string")
        return F.lit(DEAD_LETTER)

    def annotate(self, parsed: DataFrame) -> DataFrame:
        """Adds the rule's columns; rejects unknown types and missing key fields per the RuleSet."""
        rules = list(self.rules.rules.values())
        ruled = F.col("type").isin(*[r.event_type for r in rules]) if rules else F.lit(False)
        df = parsed.withColumns(
            {
                "ruled": F.coalesce(ruled, F.lit(False)),
                "window": self._by_type(lambda r: F.lit(r.window)).cast("long"),
                "lateness": self._by_type(lambda r: F.lit(r.lateness)).cast("long"),
                "t": self._by_type(_time_of).cast("long"),
                "_latest": self._by_type(_latest_time).cast("long"),
                "key": self._by_type(_key_of),
                "_key_problem": self._by_type(_key_problem),
            }
        )
        df = df.withColumns({"reason": self._rejection(df), "detail": self._rejection_detail()})
        return drop_work_columns(df.withColumn("ts", F.timestamp_seconds("t")))

    def _by_type(self, expression) -> Column:
        column = None
        for rule in self.rules.rules.values():
            case = F.col("type") == rule.event_type
            column = F.when(case, expression(rule)) if column is None else column.when(case, expression(rule))
        return F.lit(None) if column is None else column

    def _rejection(self, df: DataFrame) -> Column:
        unknown = (
            F.col("reason").isNull()
            & ~F.col("ruled")
            & F.lit(self.rules.unknown_types is UnknownTypePolicy.DEAD_LETTER)
        )
        bad_key = F.col("reason").isNull() & F.col("ruled") & F.col("key").isNull()
        ahead = F.col("reason").isNull() & F.col("ruled") & (F.col("t") > F.col("_latest"))
        return (
            F.when(unknown, "unknown_type")
            .when(bad_key, F.coalesce(F.col("_key_problem"), F.lit("missing_field")))
            .when(ahead, "future")
            .otherwise(F.col("reason"))
        )

    def _rejection_detail(self) -> Column:
        return (
            F.when(
                F.col("reason") == "unknown_type",
                F.concat(F.lit("no deduplication rule for type '"), F.col("type"), F.lit("'")),
            )
            .when((F.col("reason") == "missing_field") & F.col("detail").isNull(), F.lit("a key field is missing"))
            .when(
                (F.col("reason") == "wrong_type") & F.col("detail").isNull(),
                F.lit("a key field must be a string, an integer or a boolean"),
            )
            .when(
                F.col("reason") == "future",
                F.concat(
                    F.lit("time "),
                    F.col("t"),
                    F.lit(" is more than max_ahead "),
                    F.col("_latest") - clock_seconds(),
                    F.lit(" s past the clock"),
                ),
            )
            .otherwise(F.col("detail"))
        )


def _time_of(rule: DedupRule) -> Column:
    if rule.time_basis is TimeBasis.PROCESSING_TIME:
        return clock_seconds()
    return F.col("timestamp")


def _latest_time(rule: DedupRule) -> Column:
    """The latest plausible event time (``DedupRule.check_not_ahead``); none for processing time."""
    if rule.time_basis is TimeBasis.PROCESSING_TIME:
        return F.lit(None)
    return clock_seconds() + F.lit(rule.max_ahead)


def _key_of(rule: DedupRule) -> Column:
    """``DedupRule.state_key`` (``adapters.spark.shared._keys``); null while a key field is missing
    or of the wrong type (``_key_problem``)."""
    parts = [_key_part(name) for name in rule.key_fields]
    all_present = reduce(lambda acc, part: acc & part.isNotNull(), parts, F.lit(True))
    return F.when(all_present, key_column(rule.event_type, parts))


def _key_problem(rule: DedupRule) -> Column:
    """The first of ``rule``'s extra key fields that makes no key part: its reason (null: none)."""
    problems = [key_field_problem(name) for name in rule.key_fields if name not in STANDARD_FIELDS]
    return F.coalesce(*problems) if problems else F.lit(None).cast("string")


def _key_part(name: str) -> Column:
    if name == "timestamp":
        return escaped(F.col("timestamp").cast("string"))
    if name in REQUIRED_STRING_FIELDS:
        return escaped(F.col(name))
    return key_field_part(name)
