"""Where a Spark micro-batch's time goes, at a fixed input rate, and the latency it gives.

    .venv/bin/python bench/spark_batch_phases.py --rates 200,5000 --deliveries at-least-once,exactly-once

Starts a local Kafka broker (``deploy.local.services``) unless ``--bootstrap`` (or
``DEDUP_TEST_KAFKA``) names one, then for each delivery and rate: a producer thread puts
``rate`` events/s (``--dup-share`` of them repeating an earlier ``uniqueValue``) on a fresh
2-partition topic, the engine (``build_spark_engine`` as ``dedup run`` builds it, local[2],
operator state in the checkpoint, ``--trigger``) deduplicates it to Kafka, and a
``read_committed`` consumer of the output measures each unique event's latency: the time it
is read minus the time it was produced (``sent_ms``, a field the producer adds to the event:
the output record carries the event's bytes, not the input record's timestamp). After ``--warmup``
seconds, ``--seconds`` are measured. Printed per run:

* Spark's phases (``durationMs`` of every progress in the window: mean and p50/p90 in ms,
  ``triggerExecution`` the whole batch, ``addBatch`` the ``foreachBatch`` call);
* the engine's own phases inside ``foreachBatch`` (``adapters.spark.metrics._timings``:
  ``lease``, ``watermarks``, ``write``: the Spark job(s) with the writer and its markers), the
  whole Python callback (PySpark's wrapping included) and what ``addBatch`` spends outside it
  (the JVM's ``ForeachBatchSink`` making the batch's RDD);
* the state store's commit (``stateOperators[0].commitTimeMs``);
* the query's Spark jobs (Spark's status store): each from submission to completion, and each
  of its stages (the first: the source and the shuffle write; the last: the operator and the
  writer): its time, its tasks' run time and their number;
* per batch: classes compiled by Spark's code generator (``CodegenMetrics``) and their time,
  Spark jobs (the query's job group, ``statusTracker``), py4j calls made by
  ``foreachBatch``'s thread, and the wait between batches (trigger interval minus the batch);
* the end-to-end latency p50/p90/p99/max and the input and output rates;
* with ``--rules``, Spark's metering of its analyzer and optimizer rules over the measured
  window (``RuleExecutor``): all rules' time per batch, the costliest, and whether a rule the
  session leaves out (``UNUSED_OPTIMIZER_RULES``) would have changed a plan (put them back with
  ``--conf spark.sql.optimizer.excludedRules=`` to see);
* the CPU share of every process on the machine over the measured window (``CpuShares``): this
  process (the PySpark driver's Python side, the generator, the output consumer), the Spark JVM,
  the Kafka broker, the rest, and the idle share; the Spark JVM's part split by thread kind (the
  JIT compilers, the garbage collector, executor tasks, the stream execution thread).

Figures go to ``--out`` (JSON). On a shared 2-core machine, expect run-to-run noise of ±20%.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from adapters.spark.runtime import UNUSED_OPTIMIZER_RULES, reset_rule_metering, rule_metering  # noqa: E402
from bench.cpu_shares import CpuShares  # noqa: E402
from deploy.local import services as local_services  # noqa: E402

SPARK_PHASES = (
    "latestOffset",
    "queryPlanning",
    "getBatch",
    "walCommit",
    "addBatch",
    "commitOffsets",
    "triggerExecution",
)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rates", default="200,5000", help="events/s, comma-separated")
    p.add_argument("--deliveries", default="at-least-once,exactly-once")
    p.add_argument("--trigger", default=None, help="spark.trigger (default: the engine's)")
    p.add_argument("--prime", type=float, default=30.0, help="seconds of an unmeasured first run (0: none)")
    p.add_argument("--warmup", type=float, default=10.0)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--dup-share", type=float, default=0.2)
    p.add_argument("--partitions", type=int, default=2)
    p.add_argument(
        "--source-tasks", type=int, help="spark.source_tasks: most tasks the source is read in (default: the engine's)"
    )
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting over the engine's defaults (repeatable)",
    )
    p.add_argument(
        "--rules",
        action="store_true",
        help="also Spark's metering of its analyzer and optimizer rules over the measured window, per batch",
    )
    p.add_argument("--bootstrap", default=os.environ.get("DEDUP_TEST_KAFKA"))
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "spark_batch_phases.json")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="spark-phases-") as workdir:
        broker = None
        if not args.bootstrap:
            broker = local_services.KafkaBroker(Path(workdir) / "kafka", heap="512m").start()
            args.bootstrap = broker.bootstrap
        args.broker_pid = broker.pid if broker is not None else None
        try:
            from adapters.spark.runtime import build_session

            spark = build_session(
                "local[2]", "streamdedup-batch-phases", dict(item.split("=", 1) for item in args.conf)
            )
            spark.sparkContext.setLogLevel("ERROR")
            calls = count_py4j_calls()
            time_callbacks()
            if args.prime:  # the JVM's first batches (JIT, RocksDB, Kafka clients) are not measured
                measure(
                    spark,
                    argparse.Namespace(**{**vars(args), "warmup": args.prime, "seconds": 1}),
                    args.deliveries.split(",")[0],
                    200,
                    Path(workdir),
                    calls,
                )
            results = [
                measure(spark, args, delivery, int(rate), Path(workdir), calls)
                for delivery in args.deliveries.split(",")
                for rate in args.rates.split(",")
            ]
            spark.stop()
        finally:
            if broker is not None:
                broker.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {"args": {k: str(v) for k, v in vars(args).items()}, "load_average": os.getloadavg(), "results": results},
            indent=2,
        )
    )
    print(f"figures: {args.out}")


def measure(spark, args, delivery: str, rate: int, workdir: Path, calls: Py4jCalls) -> dict:
    from adapters.spark import build_spark_engine
    from domain import Policies, RuleSet

    name = f"{delivery}-{rate}-{uuid.uuid4().hex[:6]}"
    topics = {role: f"phases-{name}-{role}" for role in ("in", "out", "dlq")}
    local_services.create_topics(args.bootstrap, *topics.values(), partitions=args.partitions, timeout=60)
    kafka = f"kafka://{args.bootstrap}"
    query = {"trigger": args.trigger} if args.trigger else {}
    if args.source_tasks:
        query["source_tasks"] = args.source_tasks
    engine = build_spark_engine(
        RuleSet(),
        Policies(),
        source=f"{kafka}/{topics['in']}",
        sink=f"{kafka}/{topics['out']}",
        dead_letters=f"{kafka}/{topics['dlq']}",
        checkpoint=str(workdir / f"checkpoint-{name}"),
        available_now=False,
        spark=spark,
        delivery=delivery,
        shuffle_partitions=2,
        **query,
    )
    engine.timings.counters = lambda: {"py4j": calls.on_this_thread()}
    stop, done = threading.Event(), threading.Event()
    latencies = Latencies(args.bootstrap, topics["out"])
    feeder = threading.Thread(target=feed, args=(args.bootstrap, topics["in"], rate, args.dup_share, done), daemon=True)
    runner = threading.Thread(target=engine.run, args=(stop,), daemon=True)
    latencies.start()
    feeder.start()
    runner.start()
    time.sleep(args.warmup)
    jvm = _jvm_pid(spark)
    cpu = CpuShares(
        {"python (driver, generator, consumer)": os.getpid(), "spark jvm": jvm, "kafka broker": args.broker_pid},
        {"  of it, the generator thread": feeder.ident, "  of it, the output consumer": latencies.thread_ident},
        jvm=jvm,
    )
    cpu_before = cpu.sample()
    started_ms = time.time() * 1000
    first_batch = engine.timings.batches[-1].batch_id + 1 if engine.timings.batches else 0
    latencies.measuring_from(started_ms)
    compiles = codegen_compiles(spark)
    if args.rules:
        reset_rule_metering(spark)
    time.sleep(args.seconds)
    metering = rule_metering(spark) if args.rules else {}
    compiles = [after - before for before, after in zip(compiles, codegen_compiles(spark))]
    cpu_shares = cpu.shares(cpu_before, cpu.sample())
    ended_ms = time.time() * 1000
    active = [q for q in spark.streams.active if q.name and q.name.startswith("streamdedup-")]
    progress = [
        p
        for q in active
        for p in q.recentProgress
        if p["numInputRows"] > 0 and started_ms <= iso_ms(p["timestamp"]) <= ended_ms
    ]
    job_ids = list(spark.sparkContext.statusTracker().getJobIdsForGroup(str(active[0].runId))) if active else []
    jobs = len(job_ids)
    # every batch of the run (ids count from 0: a fresh checkpoint), not ``recentProgress``, which
    # keeps only the last 100 progresses: past 100 batches the ratio read too many jobs per batch
    batches_run = engine.timings.batches[-1].batch_id + 1 if engine.timings.batches else 0
    stop.set()
    runner.join(60)
    done.set()
    latencies.stop()
    timed = [b for b in engine.timings.batches if b.batch_id >= first_batch][: len(progress)]
    result = summarize(delivery, rate, progress, timed, latencies.values, jobs / max(1, batches_run), args)
    result["codegen_per_batch"] = {
        "compilations": round(compiles[0] / max(1, len(progress)), 1),
        "ms": round(compiles[1] / max(1, len(progress))),
    }
    result["cpu_share_percent"] = cpu_shares
    result["spark_job_ms"] = job_stages(spark, job_ids, started_ms, ended_ms)
    if metering:
        result["rules"] = rules_per_batch(metering, max(1, len(progress)))
    print_result(result)
    return result


def summarize(delivery, rate, progress, timed, latencies, jobs_per_batch, args) -> dict:
    spark_phases = defaultdict(list)
    for p in progress:
        for phase, ms in p["durationMs"].items():
            spark_phases[phase].append(ms)
        if p.get("stateOperators"):
            state = p["stateOperators"][0]
            spark_phases["state commit"].append(state.get("commitTimeMs", 0))
            for name, value in (state.get("customMetrics") or {}).items():
                if name.startswith("rocksdbCommit"):  # the commit's own phases, in ms
                    spark_phases[
                        "state " + name[len("rocksdbCommit") :].removesuffix("Ms").removesuffix("Latency").lower()
                    ].append(value)
    ours = defaultdict(list)
    add_batch = {p["batchId"]: p["durationMs"].get("addBatch", 0) for p in progress}
    for batch in timed:
        for phase, seconds in batch.phases.items():
            ours[phase].append(seconds * 1000)
        if batch.batch_id in CALLBACKS:
            ours["python callback"].append(CALLBACKS[batch.batch_id] * 1000)
            if batch.batch_id in add_batch:
                ours["addBatch outside callback"].append(add_batch[batch.batch_id] - CALLBACKS[batch.batch_id] * 1000)
        for counter, count in batch.counted.items():
            ours[counter].append(count)
    starts = sorted(iso_ms(p["timestamp"]) for p in progress)
    gaps = [
        b - a - p["durationMs"].get("triggerExecution", 0)
        for a, b, p in zip(starts, starts[1:], sorted(progress, key=lambda p: iso_ms(p["timestamp"])))
    ]
    rows = sum(p["numInputRows"] for p in progress)
    return {
        "delivery": delivery,
        "rate": rate,
        "trigger": args.trigger or "engine default",
        "batches": len(progress),
        "rows_per_batch": round(rows / max(1, len(progress))),
        "spark_ms": {k: stats(v) for k, v in spark_phases.items()},
        "engine_ms": {k: stats(v) for k, v in ours.items()},
        "jobs_per_batch": round(jobs_per_batch, 2),
        "idle_between_batches_ms": stats(gaps),
        "latency_ms": stats(latencies, (50, 90, 99, 100)),
        "output_per_s": round(len(latencies) / args.seconds),
    }


def job_stages(spark, job_ids: list[int], started_ms: float, ended_ms: float) -> dict:
    """The query's Spark jobs submitted in the window, from Spark's status store: the job from
    submission to completion, and each of its stages in order (the first reads the source and
    writes the shuffle; the last reads it, runs the operator and the writer): from submission to
    completion, and their tasks' run time (the executors' time, over every task)."""
    store = spark.sparkContext._jsc.sc().statusStore()
    figures = defaultdict(list)
    for job_id in job_ids:
        job = store.job(job_id)
        if not (job.submissionTime().isDefined() and job.completionTime().isDefined()):
            continue
        submitted = job.submissionTime().get().getTime()
        if not started_ms <= submitted <= ended_ms:
            continue
        figures["job"].append(job.completionTime().get().getTime() - submitted)
        stage_ids = sorted(job.stageIds().apply(i) for i in range(job.stageIds().size()))
        ran = []
        for stage_id in stage_ids:
            try:
                stage = store.lastStageAttempt(stage_id)
            except Exception:  # a stage skipped (its shuffle output reused) has no attempt
                continue
            if stage.submissionTime().isDefined() and stage.completionTime().isDefined():
                ran.append(stage)
        for position, stage in enumerate(ran):
            name = "first stage" if position == 0 else "last stage" if position == len(ran) - 1 else "middle stage"
            took = stage.completionTime().get().getTime() - stage.submissionTime().get().getTime()
            figures[name].append(took)
            figures[f"{name}, tasks' run time"].append(stage.executorRunTime())
            figures[f"{name}, tasks"].append(stage.numTasks())
    return {name: stats(values) for name, values in figures.items()}


def rules_per_batch(metering: dict, batches: int, top: int = 12) -> dict:
    """Spark's rule metering over the window: all rules' ms per batch, the ``top`` costliest rules'
    (their effective runs among their runs), and the session's left-out rules that changed a plan
    (none unless they were put back, e.g. ``--conf spark.sql.optimizer.excludedRules=``)."""
    costliest = sorted(metering.items(), key=lambda item: -item[1].total_ns)[:top]
    return {
        "ms_per_batch": round(sum(r.total_ns for r in metering.values()) / 1e6 / batches, 1),
        "top": {
            name.rsplit(".", 1)[-1]: [round(r.total_ns / 1e6 / batches, 2), r.effective, r.runs]
            for name, r in costliest
        },
        "left_out_but_effective": sorted(
            name for name in UNUSED_OPTIMIZER_RULES if name in metering and metering[name].effective
        ),
        # a rule Spark also runs outside the optimizer's batches (OptimizeUpdateFields) still runs there
        "left_out_that_ran": sorted(name.rsplit(".", 1)[-1] for name in UNUSED_OPTIMIZER_RULES if name in metering),
    }


def codegen_compiles(spark) -> tuple[int, float]:
    """Spark's code generator so far in this JVM: classes compiled, and their compile time in ms
    (count x mean of ``CodegenMetrics``' histogram: its reservoir's mean, an estimate)."""
    histogram = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    return int(histogram.getCount()), float(histogram.getCount() * histogram.getSnapshot().getMean())


def stats(values, percentiles=(50, 90)) -> dict:
    if not values:
        return {}
    ordered = sorted(values)
    figures = {"mean": round(statistics.fmean(ordered), 1)}
    for q in percentiles:
        figures[f"p{q}"] = round(ordered[min(len(ordered) - 1, int(len(ordered) * q / 100))], 1)
    return figures


def print_result(r: dict) -> None:
    print(
        f"\n== {r['delivery']} at {r['rate']:,} events/s, trigger {r['trigger']}: {r['batches']} batches of "
        f"~{r['rows_per_batch']:,} records, {r['jobs_per_batch']} Spark jobs per batch =="
    )
    print(f"{'phase':<28}{'mean ms':>10}{'p50':>10}{'p90':>10}")
    for group, figures in (("spark", r["spark_ms"]), ("engine", r["engine_ms"])):
        for phase, s in figures.items():
            print(f"{group + ' ' + phase:<28}{s['mean']:>10}{s['p50']:>10}{s['p90']:>10}")
    for name, s in (r.get("spark_job_ms") or {}).items():
        print(f"{'spark ' + name:<28}{s['mean']:>10}{s['p50']:>10}{s['p90']:>10}")
    print(
        f"{'codegen classes compiled':<28}{r['codegen_per_batch']['compilations']:>10} per batch, "
        f"~{r['codegen_per_batch']['ms']} ms"
    )
    idle = r["idle_between_batches_ms"]
    if idle:
        print(f"{'idle between batches':<28}{idle['mean']:>10}{idle['p50']:>10}{idle['p90']:>10}")
    shares = r.get("cpu_share_percent") or {}
    if shares:
        print(f"CPU, % of the machine's {os.cpu_count()} cores over the measured window:")
        for name, share in shares.items():
            print(f"  {name:<40}{share:>6}")
    rules = r.get("rules")
    if rules:
        print(
            f"analyzer and optimizer rules: {rules['ms_per_batch']} ms per batch; the costliest (ms, effective/runs):"
        )
        for name, (ms, effective, runs) in rules["top"].items():
            print(f"  {name:<48}{ms:>8} {effective:>6}/{runs}")
        print(
            f"  of the {len(UNUSED_OPTIMIZER_RULES)} rules the session leaves out, ran: "
            f"{', '.join(rules['left_out_that_ran']) or 'none'}; changed a plan: "
            f"{', '.join(rules['left_out_but_effective']) or 'none'}"
        )
    lat = r["latency_ms"]
    if lat:
        print(
            f"latency ms: p50 {lat['p50']}, p90 {lat['p90']}, p99 {lat['p99']}, max {lat['p100']} "
            f"({r['output_per_s']:,} unique events/s out)",
            flush=True,
        )


def _jvm_pid(spark) -> int | None:
    """The Spark JVM PySpark started (None when it was not started from this process)."""
    proc = getattr(spark.sparkContext._gateway, "proc", None)  # PySpark keeps the process it launched there
    return getattr(proc, "pid", None)


def iso_ms(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000


def feed(bootstrap: str, topic: str, rate: int, dup_share: float, done: threading.Event) -> None:
    """``rate`` events/s in 10 ms ticks, keyed by ``uniqueValue``; ``dup_share`` repeat a recent one."""
    import random

    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    rng, recent, sent, started = random.Random(7), [], 0, time.monotonic()
    while not done.is_set():
        due = int((time.monotonic() - started) * rate)
        while sent < due:
            if recent and rng.random() < dup_share:
                unique = rng.choice(recent)
            else:
                unique = uuid.uuid4().hex
                recent = (recent + [unique])[-1000:]
            event = {
                "id": uuid.uuid4().hex,
                "uniqueValue": unique,
                "type": "WEB",
                "timestamp": int(time.time()),
                "sent_ms": time.time() * 1000,
            }  # the output carries the event's bytes, not its timestamp
            producer.produce(topic, json.dumps(event).encode(), unique.encode())
            sent += 1
        producer.poll(0)
        time.sleep(0.01)
    producer.flush(10)


class Latencies:
    """A ``read_committed`` consumer of the output: now minus each record's input timestamp, in ms."""

    def __init__(self, bootstrap: str, topic: str):
        from confluent_kafka import Consumer

        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"phases-{uuid.uuid4().hex}",
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
            }
        )
        self.consumer.subscribe([topic])
        self.values: list[float] = []
        self.since = float("inf")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def measuring_from(self, ms: float) -> None:
        self.since = ms

    @property
    def thread_ident(self) -> int | None:
        """The reading thread's ident (its CPU clock: ``CpuShares``)."""
        return self._thread.ident

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()

    def _read(self) -> None:
        while not self._stop.is_set():
            for message in self.consumer.consume(1000, 0.05):
                if message.error() is None:
                    now = time.time() * 1000
                    produced = json.loads(message.value())["sent_ms"]
                    if produced >= self.since:
                        self.values.append(now - produced)


class Py4jCalls:
    """Counts py4j commands sent to the JVM per Python thread (``foreachBatch`` runs on one)."""

    def __init__(self):
        self.counts: dict[int, int] = defaultdict(int)

    def on_this_thread(self) -> int:
        return self.counts[threading.get_ident()]


CALLBACKS: dict[int, float] = {}  # batch id -> seconds in PySpark's foreachBatch callback (wrapping included)


def time_callbacks() -> None:
    """Times PySpark's ``ForeachBatchFunction.call``: the Python side of ``addBatch``."""
    from pyspark.sql import utils

    original = utils.ForeachBatchFunction.call

    def call(self, jdf, batch_id):
        started = time.perf_counter()
        try:
            return original(self, jdf, batch_id)
        finally:
            CALLBACKS[batch_id] = time.perf_counter() - started

    utils.ForeachBatchFunction.call = call


def count_py4j_calls() -> Py4jCalls:
    from py4j import clientserver, java_gateway

    calls = Py4jCalls()
    for cls in (clientserver.JavaClient, java_gateway.GatewayClient):
        original = cls.__dict__.get("send_command")
        if original is None:
            continue

        def counted(self, *a, __original=original, **kw):
            calls.counts[threading.get_ident()] += 1
            return __original(self, *a, **kw)

        cls.send_command = counted
    return calls


if __name__ == "__main__":
    main()
