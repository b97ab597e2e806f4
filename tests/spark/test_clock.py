"""The micro-batch's time read without compiling it into Spark's generated code
(``adapters.spark.clock``): the same values as ``current_timestamp()``, on a static and
a streaming DataFrame, and a streaming query that reads it compiles no new class per batch."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from adapters.spark.clock import batch_micros, batch_millis, batch_seconds, batch_timestamp

pytestmark = pytest.mark.spark

BATCHES = 4


def clock_columns():
    return [batch_micros().alias("micros"), batch_millis().alias("millis"), batch_seconds().alias("seconds"),
            batch_timestamp().alias("timestamp")]


def spark_clock_columns():
    now = F.current_timestamp()
    return [F.unix_micros(now).alias("micros"), F.unix_millis(now).alias("millis"),
            F.unix_seconds(now).alias("seconds"), now.alias("timestamp")]


def test_on_a_static_dataframe_the_clock_is_current_timestamp(spark):
    rows = spark.range(3).select(*clock_columns(), *[c.alias("spark_" + n) for c, n in
                                                      zip(spark_clock_columns(), ("micros", "millis", "seconds",
                                                                                  "timestamp"))]).collect()
    for row in rows:
        assert (row.micros, row.millis, row.seconds, row.timestamp) == \
            (row.spark_micros, row.spark_millis, row.spark_seconds, row.spark_timestamp)


def compiled_per_batch(spark, tmp_path, name, columns):
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

    stream = spark.readStream.option("maxFilesPerTrigger", 1).text(str(source)) \
        .select(*columns, F.col("value"))
    query = stream.writeStream.foreachBatch(batch).trigger(availableNow=True) \
        .option("checkpointLocation", str(tmp_path / name / "checkpoint")).start()
    query.awaitTermination(120)
    return seen, compiled


def test_in_a_stream_the_clock_is_the_batch_time_and_compiles_nothing_after_the_first_batches(spark, tmp_path):
    ours, ours_compiled = compiled_per_batch(spark, tmp_path, "clock", clock_columns())
    spark_rows, spark_compiled = compiled_per_batch(spark, tmp_path, "spark", spark_clock_columns())
    assert len(ours) == len(spark_rows) == 2 * BATCHES
    for row in ours:
        assert row.micros // 1000 == row.millis and row.micros // 1_000_000 == row.seconds
        assert row.timestamp.timestamp() * 1_000_000 == pytest.approx(row.micros, abs=1)
    offsets = tmp_path / "clock" / "checkpoint" / "offsets"
    batch_times = {json.loads(f.read_text().splitlines()[1])["batchTimestampMs"] * 1000
                   for f in offsets.iterdir() if f.name.isdigit()}
    assert {row.micros for row in ours} == batch_times and len(batch_times) == BATCHES  # each batch's own time
    assert sum(ours_compiled[2:]) == 0
    assert all(n > 0 for n in spark_compiled[2:])  # the control: Spark's literal changes the code every batch
