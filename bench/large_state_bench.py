"""The Spark engine at a large, steady state: keys expiring continuously as event time moves on.

    .venv/bin/python bench/large_state_bench.py --live-keys 30000000 [--retentions 2] [--json FILE]

Writes a keyed stream whose event time advances with the data: every record a new WEB key
(retention 1,200 s: the default window 600 s plus lateness 600 s), ``--live-keys / 1,200``
records per second of event time, so once one retention has passed the state holds
``--live-keys`` keys and as many expire as arrive; one record in ``--repeat-every`` repeats
the key of a record ~300 s of event time before it (itself no repeat: a duplicate). The stream covers
``1 + --retentions`` retentions, as JSONL files of ``--batch`` records, and after the
second and then every ``--probe-every`` of them ``--probes`` small files of ``--probe`` records
(live-sized micro-batches). All files are written before the engine starts, so the generator takes no
CPU from it.

The engine runs as ``dedup run --engine spark`` builds it (``build_spark_engine``, ``local[2]``,
two state partitions, RocksDB with changelog checkpointing, the engine's defaults; JSONL
source and sinks), one file a micro-batch, in a process of its own. Per micro-batch it prints
the records, the live keys (the operator's ``state_rows`` gauge), the batch's duration and
rate, the bytes written to the checkpoint's state, the PSS of the driver (the JVM, which is
also the executor in local mode, RocksDB's native memory included, and Python), and the JVM's
memory outside the heap it has committed (its PSS less ``Runtime.totalMemory``: RocksDB's
native memory, the JVM's own off-heap, malloc's arenas), which a pod's ``memoryOverhead``
must hold; ``--json`` keeps per micro-batch what RocksDB accounts for besides (the state
operator's ``memoryUsedBytes``, its pinned blocks) and its flushes, compactions and stalls. At
``--kill-at`` of the files the process is killed (``kill -9`` of it and its JVM) and a
new one resumes on the checkpoint: the time from its start to its first committed micro-batch
is the restart at full state. At the end it checks the sinks against the stream: as many
unique events as keys, the same ids (their numbers' sum), no dead letter and prints the summary: the probe batches' and
the large batches' time and rate at about 1 M live keys against the steady state (a process's first
micro-batch left out: its time is the JVM's warm-up or a restart's state load).

``--kafka DELIVERY`` runs the same stream Kafka to Kafka instead, as ``dedup run`` with
``kafka.delivery=DELIVERY`` (``at-least-once`` or ``exactly-once``): a local broker
(``deploy/local/services``) is started for the run, the records are produced to a topic of
``--partitions`` partitions keyed by ``uniqueValue`` before the engine starts, and each micro-batch
reads ``--batch`` of them (``maxOffsetsPerTrigger``; no probe batches: a Kafka source's batches
are all one size). The unique events are read back from the output topic (``read_committed``):
exactly-once must hold every key once; at-least-once every key at least once, and the bench
prints how many were written twice (a micro-batch replayed after the kill).
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src"), str(ROOT / "bench")]

T0 = 1_700_000_000
RETENTION = 1200  # the default WEB rule: window 600 s + lateness 600 s
REPEAT_BACK = 300  # s of event time between a repeat and the record it repeats (inside the 600 s window)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--live-keys", type=int, default=30_000_000)
    p.add_argument("--retentions", type=float, default=2.0, help="retentions of steady expiry after the first")
    p.add_argument("--batch", type=int, default=500_000, help="records per large micro-batch")
    p.add_argument("--probe", type=int, default=5_000, help="records per probe (live-sized) micro-batch")
    p.add_argument("--probes", type=int, default=3, help="probe micro-batches in a row")
    p.add_argument("--probe-every", type=int, default=10, help="large micro-batches between probe groups")
    p.add_argument("--repeat-every", type=int, default=100)
    p.add_argument(
        "--window",
        type=int,
        default=600,
        help="the WEB rule's window in s (lateness the same); one longer than the stream keeps every key: no expiry",
    )
    p.add_argument(
        "--alert",
        action="store_true",
        help="check the DedupStateGrowingUnbounded alert against the run's state rows and input, "
        "a micro-batch at the wall time a live stream would reach its last event time (promtool)",
    )
    p.add_argument(
        "--kill-at",
        type=float,
        default=0.9,
        help="fraction of the files (of the micro-batches over Kafka) after which the driver is killed and restarted (0: never)",
    )
    p.add_argument("--driver-memory", default="6g")
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting over the engine's defaults (repeatable), e.g. "
        "spark.sql.streaming.stateStore.rocksdb.writeBufferSizeMB=128",
    )
    p.add_argument(
        "--work",
        type=Path,
        help="where the stream and the checkpoint go (default: a temporary directory, removed at the end)",
    )
    p.add_argument("--json", type=Path, help="also write the figures here")
    p.add_argument(
        "--kafka",
        choices=("at-least-once", "exactly-once"),
        help="Kafka to Kafka with this delivery instead of JSONL files (a local broker is started)",
    )
    p.add_argument("--partitions", type=int, default=2, help="the input topic's partitions (--kafka)")
    p.add_argument("--phase", help=argparse.SUPPRESS)
    p.add_argument("--bootstrap", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.phase:
        run_engine(args)
        return
    if args.work:
        args.work.mkdir(parents=True, exist_ok=True)
        bench(args, args.work)
    else:
        with tempfile.TemporaryDirectory(prefix="large-state-") as work:
            bench(args, Path(work))


def bench(args, work: Path) -> None:
    started = time.perf_counter()
    if not args.kafka:
        run_bench(args, work, write_stream(args, work / "in"), started)
        return
    from deploy.local import services

    broker = services.KafkaBroker(work / "kafka", heap="1g").start()
    try:
        args.bootstrap = broker.bootstrap
        services.create_topics(broker.bootstrap, "in", partitions=args.partitions, timeout=60)
        services.create_topics(broker.bootstrap, "out", "dlq", partitions=args.partitions, timeout=60)
        run_bench(args, work, produce_stream(args, broker.bootstrap), started)
    finally:
        broker.stop()


def run_bench(args, work: Path, stream: tuple[int, dict, list[int]], started: float) -> None:
    """Runs the engine over ``stream`` (written or produced since ``started``), with the kill and
    restart, and reports."""
    parts, expected, ends = stream
    print(
        f"stream: {expected['records']:,} records in {parts} {'micro-batches' if args.kafka else 'files'} "
        f"({expected['out']:,} keys), {args.live_keys // RETENTION:,} records per second of event time, "
        f"ready in {time.perf_counter() - started:.0f} s",
        flush=True,
    )
    print(
        f"{'batch':>5} {'records':>9} {'live keys':>12} {'batch s':>8} {'rec/s':>9} {'written MB':>10} "
        f"{'driver MB':>9} {'off-heap MB':>11}",
        flush=True,
    )
    kill_after = int(parts * args.kill_at) if args.kill_at else None
    first = child(args, work, kill_after)
    batches = first["batches"]
    restart = None
    if first["killed"]:
        begun = time.perf_counter()
        second = child(args, work, None)
        resumed = second["batches"][0] if second["batches"] else None
        restart = {
            "after_batch": batches[-1]["batch"] if batches else None,
            "first_commit_s": round(second["first_commit_at"] - begun, 1) if second["first_commit_at"] else None,
            "first_batch_s": resumed["seconds"] if resumed else None,
            "live_keys": resumed["live_keys"] if resumed else None,
        }
        batches += second["batches"]
    counts = read_topics(args) if args.kafka else read_output(work)
    alert = state_alert(batches, ends, max(args.live_keys // RETENTION, 1)) if args.alert else None
    report(args, batches, restart, counts, expected, alert)


def record_sizes(args) -> list[int]:
    """The records of each micro-batch: ``--batch`` each, with the probe groups between them
    (none over Kafka)."""
    per_second = max(args.live_keys // RETENTION, 1)
    total = int(per_second * RETENTION * (1 + args.retentions))
    if args.kafka:
        return [args.batch] * (total // args.batch) + ([total % args.batch] if total % args.batch else [])
    sizes, written, large = [], 0, 0  # large: how many files of args.batch records so far
    while written < total:
        if sizes and sizes[-1] == args.batch and (large == 2 or large % args.probe_every == 0):
            sizes += [args.probe] * args.probes
            large += args.probes if args.probe == args.batch else 0
        else:
            sizes.append(args.batch)
            large += 1
        written += sizes[-1]
    return sizes


def records(args, start: int, count: int, tally: dict) -> list[tuple[str, str]]:
    """Records ``start`` to ``start + count`` of the stream, as (uniqueValue, JSON line); ``tally``
    counts the repeats and sums the ids of the records that are not."""
    per_second = max(args.live_keys // RETENTION, 1)
    lines = []
    for i in range(start, start + count):
        t = T0 + i // per_second
        if i % args.repeat_every == args.repeat_every - 1 and i > REPEAT_BACK * per_second:
            key = i - REPEAT_BACK * per_second - 1  # a record that is not itself a repeat
            tally["repeats"] += 1
        else:
            key = i
            tally["id_sum"] += i
        unique = f"k{key:012d}"
        lines.append((unique, f'{{"id":"e{i}","uniqueValue":"{unique}","type":"WEB","timestamp":{t}}}'))
    return lines


def expected_counts(index: int, tally: dict) -> dict:
    return {"records": index, "out": index - tally["repeats"], "out_id_sum": tally["id_sum"], "dead_letters": 0}


def write_stream(args, directory: Path) -> tuple[int, dict, list[int]]:
    """Writes the stream's files, in the order the engine reads them; returns how many, the
    counts the engine must give, and the records written up to the end of each file."""
    directory.mkdir(parents=True, exist_ok=True)
    sizes = record_sizes(args)
    index, tally = 0, {"repeats": 0, "id_sum": 0}
    for number, size in enumerate(sizes):
        path = directory / f"{number:06d}.jsonl"
        path.write_text("".join(line + "\n" for _, line in records(args, index, size, tally)))
        os.utime(path, (1_000_000 + number, 1_000_000 + number))  # the file source reads them in this order
        index += size
    return len(sizes), expected_counts(index, tally), list(itertools.accumulate(sizes))


def produce_stream(args, bootstrap: str) -> tuple[int, dict, list[int]]:
    """Produces the stream to the topic ``in``, keyed by ``uniqueValue`` (each partition in
    event-time order); returns its micro-batches, the counts and the records up to each."""
    sizes = record_sizes(args)
    tally = {"repeats": 0, "id_sum": 0}
    starts = [0, *itertools.accumulate(sizes)][:-1]
    produce_keyed(bootstrap, (r for start, size in zip(starts, sizes) for r in records(args, start, size, tally)))
    return len(sizes), expected_counts(sum(sizes), tally), list(itertools.accumulate(sizes))


def produce_keyed(bootstrap: str, keyed_lines) -> None:
    """Produces ``(uniqueValue, JSON line)`` pairs to the topic ``in``, each keyed by its ``uniqueValue``."""
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1 << 20, "enable.idempotence": True}
    )
    for key, line in keyed_lines:
        while True:
            try:
                producer.produce("in", line.encode(), key.encode())
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    if producer.flush(120) != 0:
        raise SystemExit("the stream could not be produced to Kafka")


def read_topics(args) -> dict:
    """What the output topics hold at the end (``read_committed``): the unique events, how
    many of them are distinct, the sum of the distinct ids' numbers, and the dead letters."""
    import re

    from tests.support.kafka_io import consume_to_end

    number = re.compile(rb'"id":"e(\d+)"')
    out, ids = 0, set()
    for message in consume_to_end(args.bootstrap, "out", timeout=3600):
        out += 1
        ids.add(int(number.search(message.value()).group(1)))
    dead_letters = sum(1 for _ in consume_to_end(args.bootstrap, "dlq", timeout=3600))
    return {"out": out, "distinct": len(ids), "out_id_sum": sum(ids), "dead_letters": dead_letters}


def read_output(work: Path) -> dict:
    """What the sinks hold at the end, over every run (a micro-batch run again after the kill is
    written once): the unique events, the sum of their ids' numbers (a lost event and a doubled
    one do not cancel out unless their ids are equal), and the dead letters."""
    import re

    number = re.compile(rb'"id":"e(\d+)"')
    out, id_sum = 0, 0
    for path in sorted((work / "out").glob("batch=*/part-*")):
        with open(path, "rb") as lines:
            for line in lines:
                if line.strip():
                    out += 1
                    id_sum += int(number.search(line).group(1))
    dead = sum(1 for path in (work / "dlq").glob("batch=*/part-*") for line in open(path, "rb") if line.strip())
    return {"out": out, "out_id_sum": id_sum, "dead_letters": dead}


def child(args, work: Path, kill_after: int | None) -> dict:
    """Runs the engine in a process of its own until its input is done or ``kill_after`` files
    were committed (then ``kill -9`` of its process group); returns its micro-batches."""
    command = [
        sys.executable,
        __file__,
        "--phase",
        "run",
        "--work",
        str(work),
        "--driver-memory",
        args.driver_memory,
        "--window",
        str(args.window),
        "--batch",
        str(args.batch),
        *(f"--conf={setting}" for setting in args.conf),
        *(["--kafka", args.kafka, "--bootstrap", args.bootstrap] if args.kafka else []),
    ]
    began = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, start_new_session=True)
    batches, counts, killed, first_commit_at = [], None, False, None
    for line in process.stdout:
        if not line.startswith("{"):  # the JVM shares the child's stdout: a fatal error's report, say
            print(f"engine process: {line.rstrip()}", file=sys.stderr, flush=True)
            continue
        message = json.loads(line)
        if "counts" in message:
            counts = message["counts"]
            continue
        first_commit_at = first_commit_at or time.perf_counter()
        message["cold"] = not batches  # a process's first: the JVM's warm-up, or a restart's state load
        batches.append(message)
        print(
            f"{message['batch']:>5} {message['records']:>9,} {int(message['live_keys']):>12,} "
            f"{message['seconds']:>8.2f} {message['rate']:>9,.0f} {message['written'] / 2**20:>10.1f} "
            f"{message['driver_mb']:>9,} {message['off_heap_mb']:>11,}",
            flush=True,
        )
        if kill_after is not None and message["files_done"] >= kill_after:
            time.sleep(message["seconds"] / 2)  # into the next micro-batch
            for pid in [process.pid, *descendants(process.pid)]:  # Python and its JVM (another process group)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            killed = True
            print(
                f"killed the driver (kill -9) {time.perf_counter() - began:.0f} s after its start, in the "
                f"micro-batch after {message['batch']}",
                flush=True,
            )
            break
    process.wait()
    if not killed and process.returncode != 0:
        raise SystemExit(f"the engine's process failed ({process.returncode})")
    return {"batches": batches, "counts": counts, "killed": killed, "first_commit_at": first_commit_at}


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (pyspark starts the driver's JVM in a process group of its own)."""
    from spark_bench_report import children

    found = []
    for child_pid in children(pid):
        found += [child_pid, *descendants(child_pid)]
    return found


def run_engine(args) -> None:
    """In the child: the engine over the stream, one file (or ``--batch`` records of the topic) a
    micro-batch; a JSON line per batch."""
    from adapters.spark import build_spark_engine
    from adapters.spark.runtime import build_session, stop_session
    from checkpoint_cost_bench import CheckpointBytes
    from domain import DedupRule, Policies, RuleSet
    from spark_bench_report import children, pss_mb, thread_cpu

    work = args.work
    spark = build_session(
        "local[2]",
        "large-state-bench",
        {
            "spark.driver.memory": args.driver_memory,
            "spark.sql.streaming.numRecentProgressUpdates": "100000",
            **dict(setting.split("=", 1) for setting in args.conf),
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    jvm = int(spark._jvm.java.lang.ProcessHandle.current().pid())
    runtime = spark._jvm.java.lang.Runtime.getRuntime()  # the heap the JVM has committed
    looks = CheckpointBytes()
    if args.kafka:
        kafka = f"kafka://{args.bootstrap}"
        ends = {"source": f"{kafka}/in", "sink": f"{kafka}/out", "dead_letters": f"{kafka}/dlq"}
        ends.update(delivery=args.kafka, max_offsets_per_trigger=args.batch)
    else:
        ends = {
            "source": f"jsonl:{work / 'in'}?maxFilesPerTrigger=1",
            "sink": str(work / "out"),
            "dead_letters": str(work / "dlq"),
        }
    engine = build_spark_engine(
        RuleSet({"WEB": DedupRule("WEB", args.window)}),
        Policies(),
        checkpoint=str(work / "checkpoint"),
        spark=spark,
        metrics=looks,
        available_now=True,
        **ends,
    )
    out = sys.stdout
    done = threading.Event()

    def watch() -> None:
        try:
            report_batches()
        except Exception as exc:  # a bench's reporting thread: say why it stopped
            print(f"the batch reports stopped: {exc!r}", file=sys.stderr, flush=True)
            raise

    def report_batches() -> None:
        """Reports each micro-batch once the engine's listener has had its progress: the i-th
        progress of this process (over its queries, in order) is ``looks.per_batch[i]``, so its
        bytes written and live keys are the batch's own, never the one before's."""
        queries, reported = {}, 0
        while True:
            ended = done.wait(0.5)
            queries.update((query.id, query) for query in spark.streams.active)  # kept once it ends
            progresses = [progress for query in queries.values() for progress in query.recentProgress]
            deadline = time.monotonic() + 30
            while ended and len(looks.per_batch) < len(progresses) and time.monotonic() < deadline:
                time.sleep(0.1)  # the last progress events on their way to the listener
            for progress in progresses[reported : len(looks.per_batch)]:
                written, _, rows = looks.per_batch[reported]
                reported += 1
                if progress.numInputRows == 0:
                    continue
                ms = progress.durationMs.get("triggerExecution", 0)
                line = {
                    "batch": progress.batchId,
                    "records": progress.numInputRows,
                    "seconds": ms / 1000,
                    "rate": progress.numInputRows / max(ms / 1000, 1e-3),
                    "live_keys": rows,
                    "written": written,
                    "files_done": progress.batchId + 1 if args.kafka else files_done(progress),
                    "driver_mb": round(sum(map(pss_mb, [jvm, os.getpid(), *children(jvm)]))),
                    "off_heap_mb": round(pss_mb(jvm) - runtime.totalMemory() / 2**20),
                    "cpu": thread_cpu(jvm),
                    "operator": operator_metrics(progress),
                }
                out.write(json.dumps(line) + "\n")
                out.flush()
            if ended:
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    with contextlib.redirect_stdout(sys.stderr):
        counts = engine.run().as_dict()
    done.set()  # the watcher reads the ended query's last micro-batches, then stops
    watcher.join()
    out.write(json.dumps({"counts": counts}) + "\n")
    out.flush()
    stop_session(spark)  # the state stores closed before the JVM exits (their RocksDB threads crashed it)


# The state operator's figures of a micro-batch kept in --json: where its time goes (its
# timers, its updates, its commit) and what RocksDB did for it (reads, the block cache, the
# iterator's bytes: the timers' scan, compaction, flushes and the writes they stalled, the
# memory RocksDB accounts for: memtables, block cache and pinned blocks).
OPERATOR_METRICS = (
    "numExpiredTimers",
    "timerProcessingTimeMs",
    "rocksdbGetCount",
    "rocksdbGetLatency",
    "rocksdbPutCount",
    "rocksdbReadBlockCacheHitCount",
    "rocksdbReadBlockCacheMissCount",
    "rocksdbTotalBytesRead",
    "rocksdbTotalBytesReadThroughIterator",
    "rocksdbTotalCompactionLatencyMs",
    "rocksdbTotalBytesWrittenByCompaction",
    "rocksdbSstFileSize",
    "rocksdbTotalBytesWrittenByFlush",
    "rocksdbWriterStallLatencyMs",
    "rocksdbPinnedBlocksMemoryUsage",
)
# Those the summary gives the median of over the steady large micro-batches.
OPERATOR_SUMMARY = ("timerProcessingTimeMs", "allUpdatesTimeMs", "rocksdbGetCount", "rocksdbReadBlockCacheMissCount")
# Those it gives the median of over the steady probes. A probe's timer phase with few or no
# timers due is Spark's scan of its timer index from the start (TransformWithStateExec.processTimers
# passes no lower bound), past the deletion markers of fired timers RocksDB has not yet
# compacted away (docs/design/operator.md, Eviction).
PROBE_SUMMARY = ("timerProcessingTimeMs", "numExpiredTimers", "allUpdatesTimeMs")


def operator_metrics(progress) -> dict[str, int]:
    """The stateful operator's time and RocksDB figures in one micro-batch's progress (summed
    over its state operators; none when the query keeps no state)."""
    totals: dict[str, int] = {}
    for operator in progress.stateOperators:
        figures = {
            "allUpdatesTimeMs": operator.allUpdatesTimeMs,
            "commitTimeMs": operator.commitTimeMs,
            "memoryUsedBytes": operator.memoryUsedBytes,  # what RocksDB accounts for, its share of the bound
            **{name: operator.customMetrics.get(name, 0) for name in OPERATOR_METRICS},
        }
        for name, value in figures.items():
            totals[name] = totals.get(name, 0) + int(value)
    return totals


def files_done(progress) -> int:
    """How many files the query has read once this micro-batch is done (the file source's log offset + 1)."""
    end = progress.sources[0].endOffset
    return int(json.loads(end)["logOffset"]) + 1 if end else 0


ALERT = "DedupStateGrowingUnbounded"
STEP = 300  # s between the samples given to promtool, as a Prometheus scraping every 5 minutes would keep


def state_alert(batches: list[dict], ends: list[int], per_second: int) -> dict[str, bool]:
    """Whether ``ALERT`` (deploy/prometheus/alerts.yml) fires, by ``promtool test rules``, at each
    hour of the run from its third on, when the run's series are what a live stream would show.

    A live stream at this rate reaches a file's last event time that many seconds after the
    first: each micro-batch's ``dedup_state_rows`` (its live keys) and ``dedup_records_in_total``
    (the records read) are sampled every ``STEP`` s of that time line, a sample holding the
    last micro-batch done by then (a scrape reads the gauge the last batch set). Returns
    ``{"3h": fired, ...}``."""
    import subprocess
    import tempfile

    done = [(ends[b["files_done"] - 1] / per_second, b["live_keys"], ends[b["files_done"] - 1]) for b in batches]
    done.sort()
    length = int(done[-1][0])
    rows, records = [], []
    times = [d[0] for d in done]
    for at in range(0, length + 1, STEP):
        seen = bisect.bisect_right(times, at)  # the micro-batches done by then
        rows.append(done[seen - 1][1] if seen else 0)
        records.append(done[seen - 1][2] if seen else 0)
    labels = '{job="streamdedup", instance="bench", engine="spark"}'
    hours = list(range(3, length // 3600 + 1))
    if not hours:
        raise SystemExit(f"the alert needs 3 hours of the stream's time; this one has {length / 3600:.1f}")
    verdicts = {}
    for hour in hours:
        test = {
            "rule_files": [str(ROOT / "deploy/prometheus/alerts.yml")],
            "evaluation_interval": "1m",
            "tests": [
                {
                    "interval": f"{STEP}s",
                    "input_series": [
                        {"series": f"dedup_state_rows{labels}", "values": " ".join(map(str, rows))},
                        {"series": f"dedup_records_in_total{labels}", "values": " ".join(map(str, records))},
                    ],
                    "alert_rule_test": [{"eval_time": f"{hour}h", "alertname": ALERT, "exp_alerts": []}],
                }
            ],
        }
        with tempfile.NamedTemporaryFile("w", suffix=".yml") as file:
            json.dump(test, file)  # YAML reads JSON
            file.flush()
            result = subprocess.run(["promtool", "test", "rules", file.name], capture_output=True, text=True)
        if result.returncode not in (0, 1) or (result.returncode == 1 and ALERT not in result.stdout + result.stderr):
            raise SystemExit(f"promtool could not test the rule: {result.stdout}{result.stderr}")
        verdicts[f"{hour}h"] = result.returncode == 1  # it expected no alert: a failure is the alert firing
    print(f"{ALERT} over the run's time line (fired?): {verdicts}", flush=True)
    return verdicts


def accounting_holds(args, counts: dict, expected: dict) -> bool:
    """Every key out once (at least once at-least-once: a micro-batch replayed after the kill
    writes its events again), the same ids, no dead letter."""
    if args.kafka == "at-least-once":
        return (counts["distinct"], counts["out_id_sum"], counts["dead_letters"]) == (
            expected["out"],
            expected["out_id_sum"],
            expected["dead_letters"],
        )
    same = all(counts[k] == expected[k] for k in ("out", "out_id_sum", "dead_letters"))
    return same and counts.get("distinct", counts["out"]) == counts["out"]


def report(
    args, batches: list[dict], restart: dict | None, counts: dict | None, expected: dict, alert: dict | None = None
) -> None:
    """Prints the run's summary (``summarize``), writes it with every batch to ``--json``, and
    exits non-zero when the accounting does not hold."""
    summary = summarize(args, batches, restart, counts, expected, alert)
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(
            json.dumps(
                {"args": {k: str(v) for k, v in vars(args).items()}, "summary": summary, "batches": batches}, indent=2
            )
        )
    if not summary["accounting_holds"]:
        raise SystemExit("the accounting does not hold: see counts against expected")


def summarize(
    args, batches: list[dict], restart: dict | None, counts: dict | None, expected: dict, alert: dict | None = None
) -> dict:
    """The run's figures: medians of the large and probe micro-batches near 1 M live keys and at
    the steady state (within 10% of the peak), their ratios, memory, CPU and the accounting.
    A process's first micro-batch (``cold``) is left out of the medians: its time is the JVM's
    warm-up (or a restart's state load, reported as the restart), not the state's size."""
    large = [b for b in batches if b["records"] == args.batch and not b.get("cold")]
    probes = [b for b in batches if b["records"] == args.probe and not b.get("cold")]
    peak = max((b["live_keys"] for b in batches), default=0)

    def near(rows: list[dict], low: float, high: float) -> list[dict]:
        return [b for b in rows if low <= b["live_keys"] <= high]

    def median(values: list[float]) -> float | None:
        values = sorted(values)
        return values[len(values) // 2] if values else None

    steady = [b for b in batches if b["live_keys"] >= 0.9 * peak]

    def thirds(values: list[float]) -> list[float | None]:
        """The median of each third of ``values`` (in the order of the run): whether they level off."""
        return [median(values[i * len(values) // 3 : (i + 1) * len(values) // 3]) for i in range(3)]

    small = {
        "at ~1M keys": median([b["seconds"] for b in near(probes, 0.5e6, 2e6)]),
        "at the steady state": median([b["seconds"] for b in near(probes, 0.9 * peak, peak)]),
    }
    rates = {
        "at ~1M keys": median([b["rate"] for b in near(large, 0.5e6, 2e6)]),
        "at the steady state": median([b["rate"] for b in near(large, 0.9 * peak, peak)]),
    }
    keys = [b["live_keys"] for b in steady]
    steady_large = [b for b in steady if b["records"] == args.batch]
    steady_probes = [b for b in steady if b["records"] == args.probe and b.get("operator")]

    def cpu_shares(rows: list[dict]) -> dict[str, float] | None:
        """CPU seconds per group over ``rows`` (consecutive micro-batches of one process), per
        second of the Spark tasks' CPU."""
        rows = [b for b in rows if "cpu" in b]
        runs = [
            (a, b)
            for a, b in itertools.pairwise(rows)
            if b["batch"] == a["batch"] + 1 and b["cpu"]["tasks"] >= a["cpu"]["tasks"]
        ]
        used = {g: sum(b["cpu"][g] - a["cpu"][g] for a, b in runs) for g in (rows[0]["cpu"] if rows else {})}
        return {g: round(v / used["tasks"], 3) for g, v in used.items()} if used.get("tasks") else None

    return {
        "peak_live_keys": peak,
        "steady_batches": len(steady),
        "steady_live_keys_range": [min(keys), max(keys)] if keys else None,
        "probe_batch_s": small,
        "large_batch_rate": rates,
        "probe_ratio": small["at the steady state"] / small["at ~1M keys"]
        if small["at ~1M keys"] and small["at the steady state"]
        else None,
        "rate_ratio": rates["at the steady state"] / rates["at ~1M keys"]
        if rates["at ~1M keys"] and rates["at the steady state"]
        else None,
        "driver_mb_steady": [min(b["driver_mb"] for b in steady), max(b["driver_mb"] for b in steady)]
        if steady
        else None,
        "off_heap_mb_steady": [min(b["off_heap_mb"] for b in steady), max(b["off_heap_mb"] for b in steady)]
        if steady
        else None,
        "off_heap_mb_steady_by_thirds": thirds([b["off_heap_mb"] for b in steady]),
        "rocksdb_mb_steady_by_thirds": thirds(
            [round(b["operator"].get("memoryUsedBytes", 0) / 2**20) for b in steady if b.get("operator")]
        ),
        "cpu_per_task_second": {
            "at ~1M keys": cpu_shares([b for b in batches if 0.5e6 <= b["live_keys"] <= 2e6]),
            "at the steady state": cpu_shares(steady),
        },
        "written_mb_per_large_batch_steady": median([b["written"] / 2**20 for b in steady_large]),
        "operator_per_large_batch_steady": {
            name: median([b["operator"][name] for b in steady_large if b.get("operator")]) for name in OPERATOR_SUMMARY
        },
        "operator_per_probe_batch_steady": {
            name: median([b["operator"].get(name, 0) for b in steady_probes]) for name in PROBE_SUMMARY
        },
        "restart": restart,
        "state_alert_fired": alert,
        "counts": counts,
        "expected": expected,
        "accounting_holds": accounting_holds(args, counts, expected),
    }


if __name__ == "__main__":
    main()
