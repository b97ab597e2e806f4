"""The Spark engine's Kafka write alone: Spark's Kafka writer, the executor-side writer, and a
Python writer over Arrow batches (issue 19).

    .venv/bin/python bench/kafka_writer_bench.py --records 2000000 --rounds 3

Starts a local Kafka broker (``deploy/local/services``) unless ``--bootstrap`` (or
``DEDUP_TEST_KAFKA``) names a running one. Builds, local[2], one judged micro-batch of
``--records`` rows as ``output._spark_writer.accounted_records`` leaves it (``topic, key, value, headers,
bucket, input``; ``--partitions`` partitions): a ~140-byte JSON event keyed by its id,
``--dup-share`` duplicates (topic null: counted, not written), ``--dead-share`` dead letters
with their ``dedup.*`` headers to a second topic, the rest unique events. The batch is cached
and counted before anything is timed, so each mode times the write alone, to a fresh pair of
topics (``--topic-partitions`` each):

* ``spark-defaults``: Spark's Kafka writer (a topic per row, rows without a topic left out), no producer option: the Kafka
  client's defaults (acks=all, idempotence, linger.ms 0, batch.size 16 KB, no compression);
* ``spark-linger``, ``spark-batch-size``, ``spark-lz4``: one of the engine's ``BATCHING``
  settings (``output._executor_writer``) alone; ``spark-batching``: all three, as the engine's
  at-least-once delivery writes;
* ``executor-alo``: the executor-side writer (``ExecutorWriter``, the JVM's
  ``KafkaBatchWriter``) without a transactional id: at-least-once, ``PRODUCER_DEFAULTS``
  without the transaction timeout; ``executor-alo-defaults``: the same with only acks=all and
  idempotence (the client's defaults otherwise, as ``spark-defaults``);
* ``executor-eos``: the executor-side writer with transactions and commit markers, as the
  engine's exactly-once delivery writes: one transactional id for the run and the pass number
  as batch id, so each pass is the next micro-batch of the same query (producers reused);
* ``python-arrow``: the write in the Python workers instead of the JVM: ``mapInArrow`` with
  ``ArrowPartitionWriter``, one confluent-kafka producer per partition (task) with
  ``executor-alo``'s settings (the same names in librdkafka), built per write;
  ``python-arrow-eos``: the same with ``PRODUCER_DEFAULTS`` and one transaction per partition
  (``init_transactions``, begin, commit; no commit marker).

One unmeasured warm-up pass of every mode, then ``--rounds`` rounds, the modes in turn within
a round, the order rotated by one each round. Spark's writer and the executor writer keep their
producers between writes, so each of their measured writes finds its producers started; the
Python writer starts its producers in every write (their start is in its time). Each write is
checked: the topics' high watermarks must add up to the records expected (plus, with
transactions, one commit marker per task and topic partition), else the run stops. Reported
per mode: median seconds of the write, records written per second, the ratio to
``--baseline`` (``spark-defaults`` unless given), CPU seconds during the write of the Spark
JVM (driver and executors: local mode), of its Python workers (``pyspark.daemon`` and the
workers it forks: the JVM's Python descendants) and of the broker, and the bytes the topics'
log segments take (a local broker only). Figures go to ``bench/results/kafka_writer_bench.json``
unless ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src"), str(ROOT / "bench")]

from adapters.spark.output import BATCHING, PRODUCER_DEFAULTS  # noqa: E402
from spark_kafka_bench import Broker  # noqa: E402

T0 = 1_689_019_717
EVENTS, LETTERS = "events", "dead-letters"  # the cached batch's topics, renamed per write
IDEMPOTENT = {"acks": "all", "enable.idempotence": "true"}


@dataclass(frozen=True)
class Mode:
    """One way of writing: ``writer`` ``spark``, ``executor`` or ``python``, producer ``settings``
    (Java client names, which librdkafka takes too) over that writer's own defaults."""

    name: str
    writer: str
    settings: dict[str, str] = field(default_factory=dict)
    transactional: bool = False


AT_LEAST_ONCE = {k: v for k, v in PRODUCER_DEFAULTS.items() if k != "transaction.timeout.ms"}
MODES = (
    Mode("spark-defaults", "spark"),
    Mode("spark-linger", "spark", {"linger.ms": BATCHING["linger.ms"]}),
    Mode("spark-batch-size", "spark", {"batch.size": BATCHING["batch.size"]}),
    Mode("spark-lz4", "spark", {"compression.type": BATCHING["compression.type"]}),
    Mode("spark-batching", "spark", BATCHING),
    Mode("executor-alo", "executor", AT_LEAST_ONCE),
    Mode("executor-alo-defaults", "executor", IDEMPOTENT),
    Mode("executor-eos", "executor", PRODUCER_DEFAULTS, transactional=True),
    Mode("python-arrow", "python", AT_LEAST_ONCE),
    Mode("python-arrow-eos", "python", PRODUCER_DEFAULTS, transactional=True),
)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=2_000_000, help="rows of the judged batch")
    p.add_argument("--dup-share", type=float, default=0.15, help="share of duplicates (not written)")
    p.add_argument("--dead-share", type=float, default=0.01, help="share of dead letters")
    p.add_argument("--partitions", type=int, default=2, help="of the batch: the writing tasks")
    p.add_argument("--topic-partitions", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--modes", default=",".join(m.name for m in MODES), help="of: " + ", ".join(m.name for m in MODES))
    p.add_argument("--baseline", default="spark-defaults", help="the mode the others' records/s are compared to")
    p.add_argument("--driver-memory", default="4g")
    p.add_argument("--bootstrap", default=os.environ.get("DEDUP_TEST_KAFKA"))
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "kafka_writer_bench.json")
    args = p.parse_args(argv)
    known = {m.name: m for m in MODES}
    unknown = set(args.modes.split(",")) - known.keys()
    if unknown:
        p.error(f"unknown --modes {', '.join(sorted(unknown))}")
    args.modes = [known[name] for name in args.modes.split(",")]
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    topics = argparse.Namespace(bootstrap=args.bootstrap, partitions=args.topic_partitions)
    with tempfile.TemporaryDirectory(prefix="kafka-writer-bench-") as workdir, Broker(topics, Path(workdir)) as broker:
        from adapters.spark.runtime import build_session

        spark = build_session("local[2]", "streamdedup-kafka-writer-bench", {"spark.driver.memory": args.driver_memory})
        spark.sparkContext.setLogLevel("ERROR")
        bench = WriteBench(spark, broker, args)
        print(f"cached {args.records:,} rows in {args.partitions} partitions: {bench.expected}", flush=True)
        bench.run_pass(0, measured=False)
        for round_ in range(1, args.rounds + 1):
            bench.run_pass(round_)
        bench.close()
        spark.stop()
    report(bench.results, bench.expected.get(EVENTS, 0) + bench.expected.get(LETTERS, 0), args)


class WriteBench:
    """The cached batch, and each write of it to fresh topics: timed, checked, measured."""

    def __init__(self, spark, broker: Broker, args):
        from adapters.kafka import KafkaEndpoint
        from adapters.spark.output import CommitLog

        self.spark, self.broker, self.args = spark, broker, args
        self.run = f"kwb-{uuid.uuid4().hex[:6]}"
        self.markers = f"{self.run}.commits"
        CommitLog(KafkaEndpoint(broker.bootstrap, self.markers)).ensure()
        self.records = accounted_batch(spark, args).cache()
        self.expected = {topic or "none": n for topic, n in self.records.groupBy("topic").count().collect()}
        self.jvm_pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())
        self.results: dict[str, list[dict]] = {mode.name: [] for mode in args.modes}

    def run_pass(self, number: int, measured: bool = True) -> None:
        """Every mode once, the order rotated by ``number``; ``measured``: kept for the report."""
        shift = number % len(self.args.modes)
        modes = self.args.modes[shift:] + self.args.modes[:shift]
        print(f"{'round ' + str(number) if measured else 'warm-up'}: {', '.join(m.name for m in modes)}", flush=True)
        for mode in modes:
            result = self.write_once(mode, number)
            print(
                f"  {mode.name:>22}: {result['seconds']:6.2f} s  JVM CPU {result['jvm_cpu_s']:6.1f} s  "
                f"Python CPU {result['python_cpu_s']:5.1f} s  broker CPU {result['broker_cpu_s'] or 0:5.1f} s  "
                f"{(result['bytes'] or 0) / 1e6:6.1f} MB",
                flush=True,
            )
            if measured:
                self.results[mode.name].append(result)

    def write_once(self, mode: Mode, number: int) -> dict:
        events, letters = (self.broker.create(f"{self.run}-{mode.name}-{number}-{kind}") for kind in ("out", "dlq"))
        rows = addressed(self.records, events, letters)
        jvm, python, broker = self.cpu()
        started = time.perf_counter()
        self.write(mode, rows, events, letters, number)
        seconds = time.perf_counter() - started
        jvm_cpu, python_cpu, broker_cpu = (after - before for after, before in zip(self.cpu(), (jvm, python, broker)))
        self.check(mode, events, letters)
        return {
            "seconds": round(seconds, 3),
            "jvm_cpu_s": round(jvm_cpu, 2),
            "python_cpu_s": round(python_cpu, 2),
            "broker_cpu_s": round(broker_cpu, 2) if self.broker_pid() else None,
            "bytes": self.log_bytes(events, letters),
        }

    def cpu(self) -> tuple[float, float, float]:
        """CPU seconds so far of the Spark JVM, of its Python workers, and of the broker."""
        return cpu_seconds(self.jvm_pid), python_descendants_cpu(self.jvm_pid), cpu_seconds(self.broker_pid())

    def write(self, mode: Mode, rows, events: str, letters: str, number: int) -> None:
        from pyspark.sql import functions as F

        from adapters.spark.output import ExecutorWriter

        bootstrap = self.broker.bootstrap
        if mode.writer == "spark":  # Spark's Kafka writer with a topic per row (the engine writes one topic per write)
            writer = (
                rows.filter(F.col("topic").isNotNull())
                .select("topic", "key", "value", "headers")
                .write.format("kafka")
                .option("kafka.bootstrap.servers", bootstrap)
            )
            for key, value in mode.settings.items():
                writer = writer.option(f"kafka.{key}", value)
            writer.save()
            return
        if mode.writer == "python":
            self.write_python(mode, rows, {EVENTS: events, LETTERS: letters})
            return
        writer = ExecutorWriter(
            {**mode.settings, "bootstrap.servers": bootstrap}, {"bootstrap.servers": bootstrap}, self.markers
        )
        writer.write(rows, number, self.run if mode.transactional else None, self.run)

    def write_python(self, mode: Mode, rows, topics: dict[str, str]) -> None:
        """``ArrowPartitionWriter`` in the Python workers; the driver collects one line of counts per
        task and stops the run unless they add up to the batch's records per topic."""
        writer = ArrowPartitionWriter(
            self.broker.bootstrap, mode.settings, f"{self.run}-py" if mode.transactional else None
        )
        counts = Counter()
        for line in rows.mapInArrow(writer, ArrowPartitionWriter.SCHEMA).collect():
            counts.update(json.loads(line["counts"]))
        for name, topic in topics.items():
            if counts[f"sent:{topic}"] != self.expected.get(name, 0):
                raise RuntimeError(
                    f"{mode.name}: sent {counts[f'sent:{topic}']:,} records to {topic}, expected "
                    f"{self.expected.get(name, 0):,}"
                )

    def check(self, mode: Mode, events: str, letters: str) -> None:
        """The topics hold what was written: offsets are records, plus one commit marker per
        transaction (task) and topic partition it wrote to."""
        markers = self.args.partitions * self.args.topic_partitions if mode.transactional else 0
        for topic, name in ((events, EVENTS), (letters, LETTERS)):
            found, expected = end_offsets(self.broker.bootstrap, topic), self.expected.get(name, 0) + markers
            if found != expected:
                raise RuntimeError(f"{mode.name}: {topic} ends at {found:,} offsets, expected {expected:,}")

    def broker_pid(self) -> int | None:
        return self.broker.local.pid if self.broker.local is not None else None

    def log_bytes(self, *topics: str) -> int | None:
        """The topics' log segments on the local broker's disk (None: a broker elsewhere)."""
        if self.broker.local is None:
            return None
        return sum(f.stat().st_size for topic in topics for f in self.broker.local.data_dir.glob(f"{topic}-*/*.log"))

    def close(self) -> None:
        from adapters.spark.output import ExecutorWriter

        ExecutorWriter.close(self.spark)
        self.records.unpersist()


@dataclass(frozen=True)
class ArrowPartitionWriter:
    """The ``python-arrow`` modes' ``mapInArrow`` function, run in the Python workers: one
    ``ProducerChannel`` (confluent-kafka) per partition writes the rows that have a topic
    (queue full: it waits for deliveries) and counts every row (``in``, buckets, ``sent:TOPIC``,
    as the executor writer does). Yields one row: the partition and its counts as JSON.
    ``settings``: librdkafka settings over ``producer_config``'s; ``transactional_id``: the
    partition's transaction is ``<id>-p<partition>``, else at-least-once.

    Failure behaviour: a failed or unacknowledged delivery raises ``SinkUnavailable`` from the
    final flush (at-least-once: after producing the failed records once more), failing the task;
    a transaction is aborted then, so nothing of the partition is committed."""

    bootstrap: str
    settings: dict[str, str]
    transactional_id: str | None = None
    SCHEMA = "partition int, counts string"

    def __call__(self, batches):
        import pyarrow as pa
        from pyspark import TaskContext

        partition = TaskContext.get().partitionId()
        channel = self.channel(partition)
        try:
            counts = self.write(channel, batches)
        finally:
            channel.close()
        yield pa.RecordBatch.from_pydict(
            {"partition": pa.array([partition], pa.int32()), "counts": pa.array([json.dumps(counts)], pa.string())}
        )

    def channel(self, partition: int):
        from adapters.kafka import KafkaEndpoint, ProducerChannel, producer_config

        transactional_id = f"{self.transactional_id}-p{partition}" if self.transactional_id else None
        config = producer_config(KafkaEndpoint(self.bootstrap, "-"), self.settings, transactional_id)
        channel = ProducerChannel(config, f"python-arrow partition {partition}", flush_timeout=120)
        if transactional_id:
            channel.producer.init_transactions(30)
        return channel

    def write(self, channel, batches) -> Counter:
        """Every batch produced and counted, then flushed (and the transaction committed)."""
        counts = Counter()
        if self.transactional_id:
            channel.producer.begin_transaction()
        try:
            for batch in batches:
                counts.update(arrow_counts(batch))
                produce_rows(channel, batch)
            channel.flush()
            if self.transactional_id:
                channel.producer.commit_transaction(30)
        except BaseException:
            if self.transactional_id:
                channel.producer.abort_transaction(30)
            raise
        return counts


def produce_rows(channel, batch) -> None:
    """The rows of an Arrow ``batch`` that have a topic, produced column by column (no per-row
    objects besides the values); a full queue falls back to ``channel.produce``, which waits."""
    import pyarrow.compute as pc

    written = batch.filter(pc.is_valid(batch.column("topic")))
    produce = channel.producer.produce
    columns = (written.column(name).to_pylist() for name in ("topic", "key", "value", "headers"))
    for topic, key, value, headers in zip(*columns):
        headers = headers and [(header["key"], header["value"]) for header in headers]
        try:
            produce(topic, value, key, headers=headers)
        except BufferError:
            channel.produce(topic, value, key, headers)
    channel.producer.poll(0)


def arrow_counts(batch) -> Counter:
    """The rows of an Arrow ``batch``: ``in``, per ``bucket``, and ``sent:TOPIC`` per topic."""
    import pyarrow.compute as pc

    counts = Counter({"in": pc.sum(batch.column("input")).as_py() or 0})
    for column, prefix in (("bucket", ""), ("topic", "sent:")):
        for item in pc.value_counts(batch.column(column)).to_pylist():
            if item["values"] is not None:
                counts[prefix + item["values"]] += item["counts"]
    return counts


def accounted_batch(spark, args):
    """``output._spark_writer.accounted_records`` of a judged batch (verdicts drawn by ``--dup-share`` and
    ``--dead-share``), its topics ``EVENTS`` and ``LETTERS``, counted (materialized)."""
    from pyspark.sql import functions as F

    from adapters.spark.output import accounted_records
    from adapters.spark.stream import DEAD_LETTER, DUPLICATE, EMIT

    i = F.col("id")
    share = F.pmod(F.xxhash64(i), F.lit(10_000))
    verdict = (
        F.when(share < int(args.dup_share * 10_000), DUPLICATE)
        .when(share < int((args.dup_share + args.dead_share) * 10_000), DEAD_LETTER)
        .otherwise(EMIT)
    )
    event_id = uuid_text(F.md5(i.cast("string")))
    unique = F.concat_ws("-", uuid_text(F.md5(F.pmod(i, F.lit(1_000_003)).cast("string"))), i.cast("string"))
    type_ = F.when(F.pmod(F.xxhash64(i, F.lit(3)), F.lit(10)) < 3, "APP").otherwise("WEB")
    value = F.to_json(
        F.struct(
            event_id.alias("id"),
            unique.alias("uniqueValue"),
            type_.alias("type"),
            (F.lit(T0) + F.pmod(i, F.lit(600))).alias("timestamp"),
        )
    )
    judged = spark.range(args.records, numPartitions=args.partitions).select(
        verdict.alias("verdict"),
        event_id.cast("binary").alias("kafka_key"),
        value.cast("binary").alias("value"),
        F.lit("wrong_type").alias("reason"),
        F.lit("timestamp: expected an integer").alias("detail"),
        F.lit("bench-input").alias("source"),
        F.pmod(i, F.lit(2)).alias("partition"),
        i.alias("offset"),
    )
    return accounted_records(judged, EVENTS, LETTERS)


def uuid_text(hex32):
    """32 hex digits as a UUID's text (8-4-4-4-12)."""
    from pyspark.sql import functions as F

    return F.concat_ws(
        "-", *(hex32.substr(start, length) for start, length in ((1, 8), (9, 4), (13, 4), (17, 4), (21, 12)))
    )


def addressed(records, events: str, letters: str):
    """``records`` with the fresh topics of one write in place of ``EVENTS`` and ``LETTERS``."""
    from pyspark.sql import functions as F

    topic = F.col("topic")
    return records.withColumn("topic", F.when(topic == EVENTS, F.lit(events)).when(topic == LETTERS, F.lit(letters)))


def end_offsets(bootstrap: str, topic: str) -> int:
    """The high watermarks of ``topic``'s partitions, summed (a fresh topic: its offsets)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafka-writer-bench"})
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in partitions)
    finally:
        consumer.close()


def cpu_seconds(pid: int | None, reaped: bool = False) -> float:
    """User plus system CPU seconds of process ``pid`` so far (0 when None or ended); ``reaped``:
    with those of its children it waited for."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = sum(int(f) for f in fields[11 : 15 if reaped else 13])
    return ticks / os.sysconf("SC_CLK_TCK")


def python_descendants_cpu(pid: int) -> float:
    """CPU seconds so far of the Python processes below ``pid`` (the JVM's ``pyspark.daemon`` and
    the workers it forks), with those of their children that ended (reaped: counted by the
    parent), so a worker that exits between two readings still counts."""
    parents, python = {}, set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            comm, fields = stat.read_text().rsplit(")", 1)
        except OSError:  # the process ended meanwhile
            continue
        child = int(stat.parent.name)
        parents[child] = int(fields.split()[1])
        if "python" in comm.partition("(")[2]:
            python.add(child)
    below = {child for child in python if descends(child, pid, parents)}
    return sum(cpu_seconds(child, reaped=True) for child in below)


def descends(child: int, pid: int, parents: dict[int, int]) -> bool:
    while child in parents and child > 1:
        child = parents[child]
        if child == pid:
            return True
    return False


def report(results: dict[str, list[dict]], written: int, args) -> None:
    """``written``: the records of one write (events and dead letters)."""
    rows = [summary(name, runs, written) for name, runs in results.items()]
    base = next((r for r in rows if r["mode"] == args.baseline), None)
    for row in rows:
        row["to_baseline"] = round(row["records_per_s"] / base["records_per_s"], 2) if base else None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    settings = {k: (str(v) if k != "modes" else [m.name for m in v]) for k, v in vars(args).items()}
    args.out.write_text(json.dumps({"args": settings, "load_average": os.getloadavg(), "modes": rows}, indent=2))
    print(f"figures: {args.out}")
    print(
        f"| mode | median s | records/s | × {args.baseline} | JVM CPU s | Python CPU s | broker CPU s | MB on topics |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        mb = "–" if r["bytes"] is None else f"{r['bytes'] / 1e6:,.0f}"
        print(
            f"| {r['mode']} | {r['seconds']:.2f} | {r['records_per_s']:,} | {r['to_baseline'] or '–'} | "
            f"{r['jvm_cpu_s']:.1f} | {r['python_cpu_s']:.1f} | {r['broker_cpu_s'] or 0:.1f} | {mb} |"
        )


def summary(mode: str, runs: list[dict], written: int) -> dict:
    """Medians over the rounds; records/s counts the ``written`` records."""
    median = {
        key: statistics.median(r[key] for r in runs) if runs[0][key] is not None else None
        for key in ("seconds", "jvm_cpu_s", "python_cpu_s", "broker_cpu_s", "bytes")
    }
    return {"mode": mode, **median, "records_per_s": round(written / median["seconds"]), "runs": runs}


if __name__ == "__main__":
    main()
