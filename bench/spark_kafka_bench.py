"""The Spark engine over a Kafka backlog, Kafka → Kafka, vs the bare native operator in the same run.

    .venv/bin/python bench/spark_kafka_bench.py --events 14000000 --dup-ratio 0.25 --batch 2000000

Starts a local Kafka broker (``deploy/local/services``) unless ``--bootstrap`` (or
``DEDUP_TEST_KAFKA``) names a running one, preloads a 2-partition topic with ``--events``
records written by Spark itself, primes every mode with an unmeasured pass over a small
topic of the same shape (``--prime`` records; without it the first mode pays the JVM's
warm-up: 10–15% in trials), then runs each mode over the whole backlog (``availableNow``,
``--batch`` records per micro-batch), local[2], RocksDB state:

* ``native``: ``from_json`` of key and time → ``withWatermark(600 s)`` →
  ``dropDuplicatesWithinWatermark(key)`` → the record's bytes to a Kafka topic. Not the
  domain's semantics (docs/design/spark.md); the reference for raw operator speed.
* ``engine``: ``SparkEngine`` as ``dedup run --engine spark`` runs it: parse, rules, the
  JVM WindowDedup operator, accounting, unique events and dead letters to Kafka topics.
  RocksDB's row count is off (the default: ``trackTotalNumberOfRows=false``, no read before
  each write); the operator counts its keys for the state-rows gauge, and the bench checks
  that gauge against the keys counted from the checkpoint (Spark's state data source).
* ``engine-eos``: the same with ``kafka.delivery=exactly-once``: each output partition written
  by its task in one Kafka transaction (``adapters.spark.output._executor_writer``).
* ``engine-spark-writer``: at-least-once written by Spark's own Kafka writer
  (``df.write.format("kafka")``, with the same producer settings) instead of the executor
  writer without transactions: what the engine did before.
* ``engine-tracked``: the same with RocksDB's row count on (Spark's own default).
* ``engine-duplicates``: ``engine`` with the duplicates output on: a report of every duplicate
  to a third Kafka topic (``--duplicates``).

Record ``i`` (event time ``T0 + i * spread / events``) has key ``i`` for the first
``keys = events * (1 - dup_ratio)`` records, then repeats a key spread over all keys;
``--app-share`` of the keys are APP (30 s), the rest WEB (10 min); ``--invalid-share`` of the
records have a string timestamp (dead-lettered as wrong_type). Reported per mode: sustained
events/s (steady batches: records / summed batch durations, the first ``--warmup`` left
out) and over the whole run, batch duration p50/p99, state rows and bytes, peak memory
(PSS) of the driver JVM + Python (sampled every half second), the JVM heap, and the state
checkpoint on disk. State bytes are RocksDB's memory (pinned blocks; memoryUsedBytes reads
0 with bounded memory). Figures go to ``bench/results/spark_kafka_bench.json`` and a PNG
plot over time next to it.

On a standalone cluster (client mode), for scaling runs:

    .venv/bin/python bench/spark_kafka_bench.py --workers 2 --events 3000000 --batch 500000 --modes engine,engine-eos

``--workers N`` starts a ``SparkCluster`` of N workers (``--worker-cores`` each,
``--worker-memory``) on loopback for the run and stops it afterwards; ``--master spark://…``
uses a running cluster instead (e.g. 8 workers on a 16-core machine). Executors get
``--executor-memory``; the topic gets ``--partitions`` partitions and the state
``--shuffle-partitions`` partitions (both default to the cluster's cores, at least 2), so
every core has a share of each. Memory is reported per process: the driver (JVM + Python,
as above) and each executor JVM with its Python workers (PSS, sampled every half second;
the executors of a ``--master`` cluster only when they run on this machine).
Executors on other machines must reach the broker: give ``--bootstrap`` one they reach (the
broker started here listens on loopback). Figures of a run: docs/operations/scaling-and-sizing.md, "Scaling on a
standalone cluster".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src"), str(ROOT / "bench")]

from deploy.local import services as local_services  # noqa: E402
from deploy.local.services.spark_cluster import EXECUTOR_CLASS  # noqa: E402
from spark_bench_report import Sampler, plot, summarize  # noqa: E402

T0 = 1_700_000_000
MODES = ("engine", "engine-eos", "engine-spark-writer", "engine-tracked", "engine-duplicates", "native")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, default=2_000_000)
    p.add_argument("--dup-ratio", type=float, default=0.25, help="share of records repeating an earlier key")
    p.add_argument("--app-share", type=float, default=0.3, help="share of keys of type APP (others WEB)")
    p.add_argument("--spread-s", type=int, default=600, help="event-time spread of the whole backlog (s)")
    p.add_argument("--invalid-share", type=float, default=0.001)
    p.add_argument("--batch", type=int, default=1_000_000, help="maxOffsetsPerTrigger")
    p.add_argument("--warmup", type=int, default=1, help="first batches left out of the sustained rate")
    p.add_argument(
        "--prime",
        type=int,
        default=1_000_000,
        help="records of an unmeasured first pass of every mode (0: none; the first mode then pays the JVM's warm-up)",
    )
    p.add_argument("--modes", default="engine,engine-eos,native", help="run in this order, in one driver")
    p.add_argument("--driver-memory", default="4g")
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        type=spark_setting,
        help="a Spark setting over the engine's defaults, for both modes (repeatable)",
    )
    p.add_argument(
        "--workers", type=int, default=0, help="start a Spark standalone cluster of N workers for the run (0: local[2])"
    )
    p.add_argument("--master", help="a running cluster's spark://HOST:PORT (instead of --workers)")
    p.add_argument("--worker-cores", type=int, default=1)
    p.add_argument("--worker-memory", default="4g")
    p.add_argument("--executor-memory", default="3g")
    p.add_argument("--partitions", type=int, help="of the topic (default: the cluster's cores, at least 2)")
    p.add_argument("--shuffle-partitions", type=int, help="state partitions (default: the cluster's cores, at least 2)")
    p.add_argument(
        "--source-tasks", type=int, help="spark.source_tasks: most tasks the source is read in (default: the engine's)"
    )
    p.add_argument("--bootstrap", default=os.environ.get("DEDUP_TEST_KAFKA"))
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "spark_kafka_bench.json")
    args = p.parse_args(argv)
    unknown = set(args.modes.split(",")) - set(MODES)
    if unknown:
        p.error(f"unknown --modes {', '.join(sorted(unknown))} (choose from {', '.join(MODES)})")
    if args.workers and args.master:
        p.error("--workers starts a cluster, --master names a running one: give one of them")
    cores = max(2, args.workers * args.worker_cores)
    args.partitions = args.partitions or cores
    args.shuffle_partitions = args.shuffle_partitions or cores
    return args


def spark_setting(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def main(argv=None) -> None:
    args = parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="spark-kafka-bench-") as workdir,
        Broker(args, Path(workdir)) as broker,
        Cluster(args, Path(workdir)) as cluster,
    ):
        from adapters.spark.runtime import build_session

        spark = build_session(
            cluster.master,
            "streamdedup-kafka-bench",
            {
                "spark.driver.memory": args.driver_memory,
                "spark.sql.streaming.numRecentProgressUpdates": "100000",
                **cluster.conf(),
                **dict(args.conf),
            },
        )
        spark.sparkContext.setLogLevel("ERROR")
        args.executors = cluster.executor_pids
        topic = f"bench-{uuid.uuid4().hex[:6]}"
        broker.create(topic)
        seconds = preload(spark, broker.bootstrap, topic, args)
        print(
            f"preloaded {args.events:,} records into {topic} ({args.partitions} partitions) in {seconds:.0f} s "
            f"on {cluster.master}",
            flush=True,
        )
        modes = {
            "native": run_native,
            "engine": run_engine,
            "engine-eos": run_engine_eos,
            "engine-spark-writer": run_engine_spark_writer,
            "engine-tracked": run_engine_tracked,
            "engine-duplicates": run_engine_duplicates,
        }
        if args.prime:
            prime(spark, broker, topic, args, [modes[mode] for mode in args.modes.split(",")], Path(workdir))
        results = [
            measure(spark, mode, modes[mode], broker, topic, args, Path(workdir)) for mode in args.modes.split(",")
        ]
        spark.stop()
    report(results, args)


def preload(spark, bootstrap: str, topic: str, args, events: int | None = None) -> float:
    """Writes the backlog with Spark's Kafka writer (see the module docstring for its shape)."""
    from pyspark.sql import functions as F

    events = events or args.events
    keys = max(1, int(events * (1 - args.dup_ratio)))
    i = F.col("id")
    key = F.when(i < keys, i).otherwise(F.pmod(i * F.lit(2_654_435_761), F.lit(keys)))
    digest = F.md5(key.cast("string"))
    type_ = F.when(F.pmod(F.xxhash64(key), F.lit(10_000)) < int(args.app_share * 10_000), "APP").otherwise("WEB")
    t = F.lit(T0) + (i * F.lit(args.spread_s) / F.lit(events)).cast("long")
    invalid = F.pmod(F.xxhash64(i, F.lit(7)), F.lit(1_000_000)) < int(args.invalid_share * 1_000_000)
    fields = [
        F.md5(i.cast("string")).alias("id"),
        F.concat_ws("-", digest.substr(1, 8), digest.substr(9, 4), key.cast("string")).alias("uniqueValue"),
        type_.alias("type"),
    ]
    doc = F.when(invalid, F.to_json(F.struct(*fields, t.cast("string").alias("timestamp")))).otherwise(
        F.to_json(F.struct(*fields, t.alias("timestamp")))
    )
    started = time.perf_counter()
    # one writing task, blocks of 1,000 records taking the partitions in turn: each partition
    # is in event-time order and a micro-batch's share of each covers the same times
    partition = F.pmod((i / 1000).cast("long"), F.lit(args.partitions)).cast("int")
    spark.range(events, numPartitions=1).select(doc.alias("value"), partition.alias("partition")).write.format(
        "kafka"
    ).option("kafka.bootstrap.servers", bootstrap).option("topic", topic).option("kafka.linger.ms", "50").option(
        "kafka.batch.size", str(1 << 20)
    ).save()
    return time.perf_counter() - started


def prime(spark, broker: Broker, topic: str, args, runs: list, workdir: Path) -> None:
    """Runs every mode once, unmeasured, over a small topic of the same shape: the JIT and the
    heap are then warm for all of them, not only for the modes after the first."""
    started = time.perf_counter()
    primer = broker.create(f"{topic}-prime")
    preload(spark, broker.bootstrap, primer, args, args.prime)
    small = argparse.Namespace(**{**vars(args), "batch": max(1, args.prime // 4)})
    for i, run in enumerate(runs):
        run(spark, broker, primer, small, workdir / f"prime-{i}")
    print(f"primed every mode on {args.prime:,} records in {time.perf_counter() - started:.0f} s", flush=True)


def run_native(spark, broker: Broker, topic: str, args, checkpoint: Path) -> None:
    from pyspark.sql import functions as F

    from adapters.spark.runtime import TRACK_ROWS, state_store_conf

    for key, value in {
        **state_store_conf("rocksdb"),
        TRACK_ROWS: "true",
        "spark.sql.shuffle.partitions": str(args.shuffle_partitions),
    }.items():
        spark.conf.set(key, value)
    fields = F.from_json(F.col("value").cast("string"), "uniqueValue string, type string, timestamp bigint")
    rows = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", args.batch)
        .load()
        .select(
            "value",
            F.concat_ws("\x1f", fields["type"], fields["uniqueValue"]).alias("key"),
            F.timestamp_seconds(fields["timestamp"]).alias("ts"),
        )
    )
    unique = rows.withWatermark("ts", "600 seconds").dropDuplicatesWithinWatermark(["key"]).select("value")
    out = broker.create(f"{topic}-native-out")
    query = (
        unique.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", out)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def run_engine(
    spark,
    broker: Broker,
    topic: str,
    args,
    checkpoint: Path,
    track_rows: bool = False,
    delivery: str = "at-least-once",
    spark_writer: bool = False,
    duplicates: bool = False,
) -> dict:
    from adapters.spark import build_spark_engine
    from adapters.spark.runtime import TRACK_ROWS
    from domain import Policies, RuleSet

    name = checkpoint.name.removeprefix("checkpoint-")
    out, dlq = broker.create(f"{topic}-{name}-out"), broker.create(f"{topic}-{name}-dlq")
    kafka = f"kafka://{broker.bootstrap}"
    gauges = StateRowsPerBatch()
    reports = {"duplicates": f"{kafka}/{broker.create(f'{topic}-{name}-dups')}"} if duplicates else {}
    engine = build_spark_engine(
        RuleSet(),
        Policies(),
        source=f"{kafka}/{topic}",
        sink=f"{kafka}/{out}",
        dead_letters=f"{kafka}/{dlq}",
        checkpoint=str(checkpoint),
        available_now=True,
        max_offsets_per_trigger=args.batch,
        spark=spark,
        metrics=gauges,
        shuffle_partitions=args.shuffle_partitions,
        source_tasks=args.source_tasks,
        conf={TRACK_ROWS: str(track_rows).lower()},
        delivery=delivery,
        **reports,
    )
    if spark_writer:
        engine.writer = replace(engine.writer, executors=None)
    counts = engine.run()
    print(f"  {name} accounting: {counts.as_dict()}", flush=True)
    if duplicates:
        written = broker.messages(reports["duplicates"].rsplit("/", 1)[1])
        print(
            f"  {name}: {written:,} duplicate reports on the topic, {counts.duplicates:,} duplicates counted",
            flush=True,
        )
    return {"state_rows_gauge": engine.listener.gauges.get("state_rows"), "state_rows_per_batch": gauges.rows}


class StateRowsPerBatch:
    """A ``domain._ports.Metrics`` keeping the engine's ``state_rows`` gauge of every micro-batch
    (Spark's progress reports 0 rows when RocksDB does not count them)."""

    def __init__(self):
        self.rows: list[int] = []

    def increment(self, name: str, amount: int = 1, **labels: str) -> None:
        pass

    def gauge(self, name: str, value: float, **labels: str) -> None:
        if name == "state_rows":
            self.rows.append(int(value))

    def observe(self, name: str, value: float, **labels: str) -> None:
        pass


def run_engine_eos(spark, broker: Broker, topic: str, args, checkpoint: Path) -> dict:
    return run_engine(spark, broker, topic, args, checkpoint, delivery="exactly-once")


def run_engine_spark_writer(spark, broker: Broker, topic: str, args, checkpoint: Path) -> dict:
    return run_engine(spark, broker, topic, args, checkpoint, spark_writer=True)


def run_engine_duplicates(spark, broker: Broker, topic: str, args, checkpoint: Path) -> dict:
    return run_engine(spark, broker, topic, args, checkpoint, duplicates=True)


def run_engine_tracked(spark, broker: Broker, topic: str, args, checkpoint: Path) -> dict:
    return run_engine(spark, broker, topic, args, checkpoint, track_rows=True)


def measure(spark, mode: str, run, broker: Broker, topic: str, args, workdir: Path) -> dict:
    print(f"running {mode} ...", flush=True)
    checkpoint = workdir / f"checkpoint-{mode}"
    with Sampler(spark, executors=args.executors) as sampler:
        started = time.time()
        extra = run(spark, broker, topic, args, checkpoint) or {}
        ended = time.time()
    per_batch = extra.pop("state_rows_per_batch", None)
    result = {**summarize(mode, sampler, started, ended, args.warmup), **extra}
    if per_batch and len(per_batch) == len(result["batches"]):
        for batch, rows in zip(result["batches"], per_batch):
            batch["state_rows"] = rows
    if mode != "native":  # every engine mode, either delivery: the keys its checkpoint holds
        from adapters.spark.checkpoint import read_state

        result["state_rows"] = read_state(spark, str(checkpoint)).count()
        print(
            f"  {mode}: state rows {result['state_rows']:,} in the checkpoint, "
            f"{result['state_rows_gauge'] or 0:,.0f} by the operator's gauge",
            flush=True,
        )
    result["checkpoint_bytes"] = sum(p.stat().st_size for p in checkpoint.rglob("*") if p.is_file())
    print(
        f"  {mode}: {result['events_per_s']:,} events/s sustained, {result['events_per_s_overall']:,} overall, "
        f"batch p50 {result['batch_ms_p50']:,} ms p99 {result['batch_ms_p99']:,} ms, "
        f"state rows {result['state_rows']:,}, peak memory {result['peak_memory_mb']:,} MB"
        f"{executor_memory(result)}",
        flush=True,
    )
    return result


def report(results: list[dict], args) -> None:
    args.out.parent.mkdir(parents=True, exist_ok=True)
    figures = {
        "args": {k: str(v) for k, v in vars(args).items() if k != "executors"},
        "load_average": os.getloadavg(),
        "results": results,
    }
    by_mode = {r["mode"]: r for r in results}
    for mode in ("engine", "engine-eos", "engine-spark-writer", "engine-tracked", "engine-duplicates"):
        if {"native", mode} <= by_mode.keys():
            ratio = by_mode[mode]["events_per_s"] / by_mode["native"]["events_per_s"]
            figures[f"{mode.replace('-', '_')}_to_native"] = round(ratio, 3)
    if {"engine", "engine-eos"} <= by_mode.keys():
        figures["eos_to_at_least_once"] = round(
            by_mode["engine-eos"]["events_per_s"] / by_mode["engine"]["events_per_s"], 3
        )
        print(f"exactly-once / at-least-once: {figures['eos_to_at_least_once']}")
    if {"engine", "engine-spark-writer"} <= by_mode.keys():
        figures["executor_to_spark_writer"] = round(
            by_mode["engine"]["events_per_s"] / by_mode["engine-spark-writer"]["events_per_s"], 3
        )
        print(f"at-least-once, executor writer / Spark's writer: {figures['executor_to_spark_writer']}")
    if {"engine", "engine-duplicates"} <= by_mode.keys():
        figures["duplicates_output_to_without"] = round(
            by_mode["engine-duplicates"]["events_per_s"] / by_mode["engine"]["events_per_s"], 3
        )
        print(f"with the duplicates output / without: {figures['duplicates_output_to_without']}")
    args.out.write_text(json.dumps(figures, indent=2))
    png = args.out.with_suffix(".png")
    plot(results, png)
    print(f"figures: {args.out}\nplot:    {png}")
    for r in results:
        print(
            f"{r['mode']:>7}: {r['events_per_s']:>9,} events/s  batch p50 {r['batch_ms_p50']:,} ms  "
            f"p99 {r['batch_ms_p99']:,} ms  state rows {r['state_rows']:,}  state bytes {r['state_bytes']:,}  "
            f"peak memory {r['peak_memory_mb']:,} MB{executor_memory(r)}"
        )


def executor_memory(result: dict) -> str:
    peaks = result.get("peak_executor_mb") or {}
    if not peaks:
        return ""
    return " (driver); executors " + ", ".join(f"{mb:,}" for mb in peaks.values()) + " MB"


class Cluster:
    """Where the modes run: ``local[2]``; a standalone cluster of ``--workers`` workers started
    (and stopped) here; or the running one ``--master`` names. ``executor_pids()``: the
    executor JVMs of this application that run on this machine."""

    def __init__(self, args, workdir: Path):
        self.args, self.workdir, self.local = args, workdir, None
        self.master = args.master or "local[2]"

    def __enter__(self) -> Cluster:
        if self.args.workers:
            self.local = local_services.SparkCluster(
                self.workdir / "spark",
                workers=self.args.workers,
                cores=self.args.worker_cores,
                memory=self.args.worker_memory,
            ).start()
            self.master = self.local.url
        return self

    def __exit__(self, *exc) -> None:
        if self.local is not None:
            self.local.stop()

    def conf(self) -> dict[str, str]:
        if self.master.startswith("local"):
            return {}
        return {"spark.executor.memory": self.args.executor_memory}

    def executor_pids(self) -> list[int]:
        if self.local is not None:
            return self.local.executor_pids()
        if self.master.startswith("local"):
            return []
        return executors_on_this_machine()


def executors_on_this_machine() -> list[int]:
    """Executor JVMs of this process's Spark application running here (a ``--master`` cluster)."""
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    app = context.applicationId if context is not None else None
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if app and EXECUTOR_CLASS in text and app in text:
            found.append(int(cmdline.parent.name))
    return found


class Broker:
    """The broker named by ``--bootstrap``, or a local one started (and stopped) here."""

    def __init__(self, args, workdir: Path):
        self.bootstrap, self.workdir, self.local = args.bootstrap, workdir, None
        self.partitions = args.partitions

    def __enter__(self) -> Broker:
        if not self.bootstrap:
            self.local = local_services.KafkaBroker(self.workdir / "kafka", heap="1g").start()
            self.bootstrap = self.local.bootstrap
        return self

    def __exit__(self, *exc) -> None:
        if self.local is not None:
            self.local.stop()

    def create(self, name: str) -> str:
        local_services.create_topics(self.bootstrap, name, partitions=self.partitions, timeout=60)
        return name

    def messages(self, topic: str) -> int:
        """The sum of ``topic``'s partitions' end offsets: its records, when written without
        transactions (a transaction's commit marker takes an offset too)."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": "bench-count", "isolation.level": "read_uncommitted"}
        )
        try:
            return sum(
                consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(self.partitions)
            )
        finally:
            consumer.close()


if __name__ == "__main__":
    main()
