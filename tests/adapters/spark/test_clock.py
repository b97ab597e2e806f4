"""The micro-batch's time read without compiling it into Spark's generated code
(``adapters.spark.shared._batch_time``): the same values as ``current_timestamp()``, on a static and
a streaming DataFrame; a streaming query that reads it compiles no new class per batch; and
the engine's plan reads it in one small projection, every other projection staying in
whole-stage code generation."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from adapters.spark.shared import CLOCK, batch_timestamp, clock_micros, clock_millis, clock_seconds, with_clock

pytestmark = pytest.mark.spark

BATCHES = 4


def clock_columns():
    return [
        clock_micros().alias("micros"),
        clock_millis().alias("millis"),
        clock_seconds().alias("seconds"),
        batch_timestamp().alias("timestamp"),
    ]


def spark_clock_columns():
    now = F.current_timestamp()
    return [
        F.unix_micros(now).alias("micros"),
        F.unix_millis(now).alias("millis"),
        F.unix_seconds(now).alias("seconds"),
        now.alias("timestamp"),
    ]


def test_on_a_static_dataframe_the_clock_is_current_timestamp(spark):
    rows = (
        with_clock(spark.range(3))
        .select(
            *clock_columns(),
            *[
                c.alias("spark_" + n)
                for c, n in zip(spark_clock_columns(), ("micros", "millis", "seconds", "timestamp"))
            ],
        )
        .collect()
    )
    for row in rows:
        assert (row.micros, row.millis, row.seconds, row.timestamp) == (
            row.spark_micros,
            row.spark_millis,
            row.spark_seconds,
            row.spark_timestamp,
        )


def compiled_per_batch(spark, tmp_path, name, columns, clocked=False):
    """Run a file stream of ``BATCHES`` one-file micro-batches selecting ``columns`` beside the
    batch's own ``current_timestamp()``; the batches' rows, and the classes Spark compiled
    during the batches after the first two."""
    source = tmp_path / name / "in"
    source.mkdir(parents=True)
    for i in range(BATCHES):
        (source / f"{i}.txt").write_text("a\nb\n")
    histogram = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    seen, compiled = [], []

    def batch(frame, batch_id):
        before = histogram.getCount()
        seen.extend(frame.collect())
        compiled.append(histogram.getCount() - before)

    stream = spark.readStream.option("maxFilesPerTrigger", 1).text(str(source))
    stream = (with_clock(stream) if clocked else stream).select(*columns, F.col("value"))
    query = (
        stream.writeStream.foreachBatch(batch)
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / name / "checkpoint"))
        .start()
    )
    query.awaitTermination(120)
    return seen, compiled


def test_in_a_stream_the_clock_is_the_batch_time_and_compiles_nothing_after_the_first_batches(spark, tmp_path):
    ours, ours_compiled = compiled_per_batch(spark, tmp_path, "clock", clock_columns(), clocked=True)
    spark_rows, spark_compiled = compiled_per_batch(spark, tmp_path, "spark", spark_clock_columns())
    assert len(ours) == len(spark_rows) == 2 * BATCHES
    for row in ours:
        assert row.micros // 1000 == row.millis and row.micros // 1_000_000 == row.seconds
        assert row.timestamp.timestamp() * 1_000_000 == pytest.approx(row.micros, abs=1)
    offsets = tmp_path / "clock" / "checkpoint" / "offsets"
    batch_times = {
        json.loads(f.read_text().splitlines()[1])["batchTimestampMs"] * 1000
        for f in offsets.iterdir()
        if f.name.isdigit()
    }
    assert {row.micros for row in ours} == batch_times and len(batch_times) == BATCHES  # each batch's own time
    assert sum(ours_compiled[2:]) == 0
    assert all(n > 0 for n in spark_compiled[2:])  # the control: Spark's literal changes the code every batch


def projections_outside_codegen(plan) -> list:
    """The physical plan's projections that whole-stage code generation left out (Spark then
    writes their Java source again in every task)."""
    found, pending = [], [(plan, False)]
    while pending:
        node, in_codegen = pending.pop()
        kind = node.getClass().getSimpleName()
        if kind == "ProjectExec" and not in_codegen:
            found.append(node)
        inside = (in_codegen or kind == "WholeStageCodegenExec") and kind != "InputAdapter"
        children = node.children()
        pending.extend((children.apply(i), inside) for i in range(children.size()))
    return found


def computed_names(project) -> list[str]:
    """The names of a projection's outputs that are not a column passed through."""
    outputs = project.projectList()
    items = [outputs.apply(i) for i in range(outputs.size())]
    return [e.name() for e in items if e.getClass().getSimpleName() != "AttributeReference"]


@pytest.mark.guard  # walks Spark's physical plan: a projection outside code generation costs every row
def test_the_plan_reads_the_clock_in_one_small_projection_and_generates_code_for_the_rest(spark):
    from adapters.spark.metrics import accounting_metrics
    from adapters.spark.output import accounted_records
    from adapters.spark.stream import DedupPlan
    from domain import DedupRule, RuleSet, TimeBasis

    rules = RuleSet({"APP": DedupRule("APP", 30), "WEB": DedupRule("WEB", 600, time_basis=TimeBasis.PROCESSING_TIME)})
    records = spark.createDataFrame(
        [
            (b'{"id":"e1","uniqueValue":"u","type":"APP","timestamp":1700000000}', None, "in", 0, 0, 0, 0),
            (b'{"id":"e2","uniqueValue":"u","type":"WEB","timestamp":99999999999}', None, "in", 0, 1, 1, 0),
            (b"not json", None, "in", 0, 2, 2, 0),
        ],
        "value binary, kafka_key binary, source string, partition int, offset long, ord long, file_time long",
    )
    plan = DedupPlan(rules)
    judged = plan.operator_input(records).withColumns(
        {
            "verdict": F.when(F.col("judged"), "emit").otherwise("pass"),
            "repeats_time": F.lit(None).cast("long"),
            "repeats_owner": F.lit(None).cast("string"),
        }
    )
    written = accounted_records(accounting_metrics(plan.verdicts(judged), rules.rules), "out", "dead")
    left_out = projections_outside_codegen(written._jdf.queryExecution().executedPlan())
    assert [computed_names(p) for p in left_out] == [[CLOCK]]
    assert sorted(r.bucket for r in written.collect()) == ["dead_lettered", "out", "out"]
