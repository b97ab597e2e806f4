"""Throughput of the Spark engine's plan vs Spark's bare native dropDuplicatesWithinWatermark.

Both run in the same process on the same synthetic stream (Spark's rate-micro-batch source,
no Kafka, sink ``noop``), RocksDB state with changelog checkpointing, local[2]:

* ``native``: key → withWatermark(600 s) → dropDuplicatesWithinWatermark(key). Not the
  domain's semantics (see docs/design/spark.md); the reference for raw operator speed.
* ``engine``: JSON bytes → the engine's parse + validation + DedupPlan (the JVM
  WindowDedup operator) + accounting observation — everything but the source and sinks.

Row ``i`` has key ``i mod keys``: the first ``keys`` rows are new, every later row repeats
a key seen ``keys`` rows before (dup ratio 1 - keys/total). 30% of keys are APP (30 s),
the rest WEB (10 min); event time advances ``--advance-s`` per micro-batch.

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python bench/spark_bench.py --rows-per-batch 1000000 --batches 12 --keys 6000000
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from pyspark.sql import DataFrame  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from adapters.spark import stop_after_running_batch  # noqa: E402
from adapters.spark.metrics import accounting_metrics  # noqa: E402
from adapters.spark.runtime import build_session, state_store_conf  # noqa: E402
from adapters.spark.stream import DedupPlan, state_row_counter  # noqa: E402
from domain import RuleSet  # noqa: E402

T0 = 1_700_000_000


def rate(spark, args) -> DataFrame:
    src = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", args.rows_per_batch)
        .option("numPartitions", 2)
        .option("startTimestamp", T0 * 1000)
        .option("advanceMillisPerBatch", args.advance_s * 1000)
        .load()
    )
    key = F.pmod(F.col("value"), F.lit(args.keys))
    type_ = F.when(F.pmod(F.xxhash64(key), F.lit(10)) < 3, "APP").otherwise("WEB")
    return src.select(key.cast("string").alias("k"), type_.alias("type"), "timestamp", "value")


def native_plan(spark, args) -> DataFrame:
    rows = rate(spark, args).select(F.concat_ws("\x1f", "type", "k").alias("key"), "timestamp")
    return rows.withWatermark("timestamp", "600 seconds").dropDuplicatesWithinWatermark(["key"])


def engine_plan(spark, args) -> DataFrame:
    rows = rate(spark, args)
    doc = F.to_json(
        F.struct(
            F.concat(F.lit("e"), F.col("value").cast("string")).alias("id"),
            F.col("k").alias("uniqueValue"),
            "type",
            F.unix_seconds("timestamp").alias("timestamp"),
        )
    )
    records = rows.select(
        doc.cast("binary").alias("value"),
        F.lit(None).cast("binary").alias("kafka_key"),
        F.lit("rate").alias("source"),
        F.lit(0).alias("partition"),
        F.col("value").alias("offset"),
        F.col("value").alias("ord"),
    )
    return accounting_metrics(operator_plan(spark).with_verdicts(records))


def operator_plan(spark) -> DedupPlan:
    """The engine's plan with the operator's accumulators and horizons, and no watermark files."""
    package = spark._jvm.streamdedup.stream
    newest = package.NewestTimes()
    spark.sparkContext._jsc.sc().register(newest, "streamdedup.newest_times")
    marks = SimpleNamespace(horizons=package.RuleHorizons.none(), newest=newest)
    return DedupPlan(RuleSet(), state_rows=state_row_counter(spark), watermarks=marks)


def measure(spark, name: str, plan: DataFrame, args) -> dict:
    checkpoint = tempfile.mkdtemp(prefix=f"bench-{name}-")
    query = (
        plan.writeStream.format("noop")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="0 seconds")
        .start()
    )
    progress = []
    while len(progress) < args.batches:
        time.sleep(0.5)
        progress = query.recentProgress
    stop_after_running_batch(query)
    batches = [_batch(p) for p in progress[: args.batches]]
    for b in batches:
        print(
            f"  {name} batch {b['batch']}: {b['rows']} rows in {b['ms']} ms, state rows {b['state_rows']}", flush=True
        )
    steady = batches[args.warmup :]
    durations = sorted(b["ms"] for b in steady)
    return {
        "mode": name,
        "events_per_s": round(sum(b["rows"] for b in steady) / (sum(durations) / 1000)),
        "batch_ms_p50": statistics.median(durations),
        "batch_ms_p99": durations[min(len(durations) - 1, int(0.99 * len(durations)))],
        "state_rows": batches[-1]["state_rows"],
        "state_memory_bytes": batches[-1]["state_bytes"],
        "batches": batches,
    }


def _batch(p) -> dict:
    state = p["stateOperators"][0] if p["stateOperators"] else {}
    return {
        "batch": p["batchId"],
        "rows": p["numInputRows"],
        "ms": p["durationMs"].get("triggerExecution", 0),
        "state_rows": state.get("numRowsTotal", 0),
        "state_bytes": state.get("memoryUsedBytes", 0),
        "observed": _observed(p),
    }


def _observed(p) -> dict:
    row = (p.get("observedMetrics") or {}).get("accounting")
    return row.asDict() if hasattr(row, "asDict") else dict(row or {})


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows-per-batch", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2, help="first batches left out of the figures")
    parser.add_argument("--keys", type=int, default=5_000_000)
    parser.add_argument("--advance-s", type=int, default=10)
    parser.add_argument("--modes", default="native,engine")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "spark_bench.json"))
    args = parser.parse_args(argv)
    spark = build_session("local[2]", "streamdedup-bench", {"spark.driver.memory": "6g"})
    spark.sparkContext.setLogLevel("ERROR")
    for key, value in state_store_conf("rocksdb").items():
        spark.conf.set(key, value)
    plans = {"native": native_plan, "engine": engine_plan}
    results = [measure(spark, mode, plans[mode](spark, args), args) for mode in args.modes.split(",")]
    for r in results:
        print(
            f"{r['mode']:>7}: {r['events_per_s']:>9,} events/s  batch p50 {r['batch_ms_p50']} ms  "
            f"p99 {r['batch_ms_p99']} ms  state rows {r['state_rows']:,}"
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"args": vars(args), "results": results}, indent=2))


if __name__ == "__main__":
    main()
