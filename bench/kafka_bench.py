"""Throughput and memory of the kafka engine over a preloaded backlog, beside the ceiling.

    .venv/bin/python bench/kafka_bench.py [--events 1000000] [--dup-ratio 0.3] [--states memory,redis]
                                          [--partitions 2] [--exactly-once] [--batch-size 2000]
                                          [--no-passthrough] [--profile DIR] [--json FILE] [--instances N]
                                          [--duplicates] [--rounds N] [--cli [--cli-batch-sizes 1000,2000]]

Starts a local Kafka broker and redis-server (``deploy/local/services``) unless
``--bootstrap`` / ``--redis`` (or ``DEDUP_TEST_KAFKA`` / ``DEDUP_TEST_REDIS``) name running
ones. Generates a stream of about ``--events`` records with known duplicates (the project's
generator: duplicates, out-of-order copies, repeats a window later, invalid and late
records), preloads it into a topic of ``--partitions`` partitions keyed by ``uniqueValue``,
then runs the engine once per state store, each run in a process of its own from the
committed start of the topic to its end: events/s over the whole run (group join included),
the CPU time per record (the process's, its main thread's alone, and the Redis server's: on
a shared machine these vary far less than the rate, so they are what compares two codes), the
run's peak RSS, the state's key count at the end, and whether the accounting matches the
generator's expected counts.

The ceiling is measured in the same run: a bare confluent-kafka process that consumes the
topic with batch ``consume()`` and produces every record to another topic with the engine's
producer settings (``passthrough``), and the same with ``json.loads`` of every value
(``passthrough+json``). Each engine row gives its share of the passthrough's rate: on a
shared machine only ratios measured in one run compare. ``--profile DIR`` writes a cProfile
of each engine run there.

``--instances N`` (N > 1) adds a run of N engine processes in one consumer group with Redis
state: the rate is the topic's records over the time from their start until the group has
committed the whole topic (their stop not included); the counts are the processes' sums.

``--rounds N`` runs every row N times, interleaved (the passthroughs, then each state, then
again): each run's shares are of its own round's ceilings, and a last table lists each row's
share of the passthrough+json and its main thread's CPU per record over the rounds.

``--cli`` adds, per state, a run of ``dedup run --engine kafka`` as a user runs it (its
defaults: batches of ``domain.DEFAULT_BATCH_SIZE``; ``--cli-batch-sizes 1000,2000`` runs it once
per size): its rate includes the program's start-up and its CPU is the whole process's (its
peak RSS is not measured).

``--duplicates`` runs each state twice, without and with the duplicates output (a report of
every duplicate to a topic, ``domain._duplicates``): the cost of the reports, in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from app import StreamSpec, generate  # noqa: E402
from deploy.local import services as local_services  # noqa: E402


def main() -> None:
    args = parse_args()
    if args.child:
        print(json.dumps(passthrough(args) if args.passthrough else run_engine(args)))
        return
    with tempfile.TemporaryDirectory(prefix="kafka-bench-") as workdir, Services(args, Path(workdir)) as services:
        records, expected = stream(args.events, args.dup_ratio)
        topic = f"bench-in-{uuid.uuid4().hex[:6]}"
        services.create_topics(topic, partitions=args.partitions)
        seconds = preload(services.bootstrap, topic, records)
        print(
            f"preloaded {len(records):,} records into {topic} in {seconds:.1f}s "
            f"({expected.duplicates:,} duplicates, {expected.dead_lettered:,} dead letters expected)",
            file=sys.stderr,
        )
        del records
        rows: list[dict] = []
        for round_ in range(1, args.rounds + 1):  # interleaved: each round runs every row once, in order
            if args.rounds > 1:
                print(f"round {round_} of {args.rounds}", file=sys.stderr)
            round_rows = (
                [] if args.no_passthrough else [run_passthrough(args, services, topic, p) for p in (False, True)]
            )
            round_rows += [
                run_child(args, services, topic, state, expected.as_accounting(), reports)
                for state in args.states
                for reports in ((False, True) if args.duplicates else (False,))
            ]
            if args.instances > 1:
                round_rows.append(run_group(args, services, topic, expected.as_accounting()))
            if args.cli:
                round_rows += [
                    run_cli(args, services, topic, state, expected.as_accounting(), Path(workdir), size)
                    for state in args.states
                    for size in args.cli_batch_sizes or (None,)
                ]
            rows += [dict(row, round=round_) for row in round_rows]
    report(rows, args.json)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=1_000_000, help="records in the backlog (about)")
    p.add_argument("--dup-ratio", type=float, default=0.3, help="share of events that get a duplicate copy")
    p.add_argument("--states", type=lambda s: s.split(","), default=["memory", "redis"])
    p.add_argument("--exactly-once", action="store_true", help="Kafka transactions per batch")
    p.add_argument("--batch-size", type=int, default=2000)
    p.add_argument("--partitions", type=int, default=2, help="partitions of the input topic")
    p.add_argument("--no-passthrough", action="store_true", help="skip the bare consume -> produce ceiling")
    p.add_argument("--profile", type=Path, help="write a cProfile of each engine run into this directory")
    p.add_argument("--bootstrap", default=os.environ.get("DEDUP_TEST_KAFKA"))
    p.add_argument("--redis", default=os.environ.get("DEDUP_TEST_REDIS"))
    p.add_argument("--json", type=Path, help="also write the figures here")
    p.add_argument("--instances", type=int, default=1, help="also run N processes in one group (Redis state)")
    p.add_argument("--duplicates", action="store_true", help="run each state also with the duplicates output")
    p.add_argument("--rounds", type=int, default=1, help="run every row this many times, interleaved")
    p.add_argument("--cli", action="store_true", help="also run each state through `dedup run --engine kafka`")
    p.add_argument(
        "--cli-batch-sizes",
        type=lambda text: [int(size) for size in text.split(",")],
        help="with --cli: one run per size (DEDUP_BATCH_SIZE), e.g. 1000,2000; default: the program's default",
    )
    p.add_argument("--report-duplicates", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--group", help=argparse.SUPPRESS)
    p.add_argument("--run", default="", help=argparse.SUPPRESS)
    p.add_argument("--follow", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--topic", help=argparse.SUPPRESS)
    p.add_argument("--state", help=argparse.SUPPRESS)
    p.add_argument("--passthrough", choices=["plain", "json"], help=argparse.SUPPRESS)
    return p.parse_args()


def stream(events: int, dup_ratio: float):
    """About ``events`` records: each unique brings 4/3 * dup_ratio copies and 5 % repeats on average."""
    uniques = max(1, round(events / (1 + dup_ratio * 4 / 3 + StreamSpec.repeat_ratio)))
    spec = StreamSpec(uniques=uniques, dup_ratio=dup_ratio)
    started = time.perf_counter()
    records, expected = generate(spec)
    print(f"generated {len(records):,} records in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    return records, expected


def preload(bootstrap: str, topic: str, records: list[bytes]) -> float:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "compression.type": "lz4",
        }
    )
    started = time.perf_counter()
    for value in records:
        key = unique_value(value)
        while True:
            try:
                producer.produce(topic, value, key)
                break
            except BufferError:
                producer.poll(0.1)
    if producer.flush(300):
        raise SystemExit("preloading did not finish")
    return time.perf_counter() - started


def unique_value(value: bytes) -> bytes | None:
    """The record's ``uniqueValue`` as its Kafka key, as producers key these topics (None if unreadable)."""
    try:
        found = json.loads(value).get("uniqueValue")
    except (ValueError, AttributeError, RecursionError):
        return None
    return found.encode("utf-8", "replace") if isinstance(found, str) else None


class Services:
    """The broker and redis-server named on the command line, or local ones started here."""

    def __init__(self, args: argparse.Namespace, workdir: Path):
        self.args, self.workdir = args, workdir
        self.broker = self.redis = None
        self.bootstrap, self.redis_url = args.bootstrap, args.redis

    def __enter__(self) -> Services:
        if not self.bootstrap:
            self.broker = local_services.KafkaBroker(self.workdir / "kafka", heap="1g").start()
            self.bootstrap = self.broker.bootstrap
        if "redis" in self.args.states and not self.redis_url:
            self.redis = local_services.RedisServer(self.workdir / "redis").start()
            self.redis_url = self.redis.url
        return self

    def __exit__(self, *exc) -> None:
        for service in (self.broker, self.redis):
            if service is not None:
                service.stop()

    def create_topics(self, *names: str, partitions: int = 1) -> None:
        local_services.create_topics(self.bootstrap, *names, partitions=partitions, timeout=60)


def run_passthrough(args, services: Services, topic: str, parse: bool) -> dict:
    kind = "json" if parse else "plain"
    services.create_topics(f"{topic}-pass-{kind}")
    command = [
        sys.executable,
        __file__,
        "--child",
        f"--bootstrap={services.bootstrap}",
        f"--topic={topic}",
        f"--passthrough={kind}",
        f"--batch-size={args.batch_size}",
        f"--partitions={args.partitions}",
    ]
    print(f"running the passthrough ({kind}) ...", file=sys.stderr)
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True)
    return {
        "state": "-",
        "delivery": "passthrough" + ("+json" if parse else ""),
        **json.loads(done.stdout.strip().splitlines()[-1]),
    }


def passthrough(args: argparse.Namespace) -> dict:
    """The child: consume the whole topic in batches and produce every record to ``TOPIC-pass-KIND``
    with the engine's producer settings; offsets committed per batch, as the engine does."""
    from confluent_kafka import Consumer, KafkaError, Producer

    from adapters.kafka import parse_kafka_uri, producer_config

    parse = args.passthrough == "json"
    out = f"{args.topic}-pass-{args.passthrough}"
    endpoint = parse_kafka_uri(f"kafka://{args.bootstrap}/{out}", "sink")
    producer = Producer({k: v for k, v in producer_config(endpoint, {}).items() if k != "logger"})
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": f"bench-pass-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([args.topic])
    cpu = CpuMeter()
    started, count, at_end = time.perf_counter(), 0, set()
    while len(at_end) < args.partitions:
        messages = consumer.consume(args.batch_size, 1.0)
        for message in messages:
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                continue
            at_end.discard(message.partition())
            value = message.value()
            if parse:
                try:
                    json.loads(value)
                except ValueError:
                    pass
            while True:
                try:
                    producer.produce(out, value, message.key())
                    break
                except BufferError:
                    producer.poll(0.05)
            count += 1
        producer.poll(0)
        if messages:
            producer.flush()
            consumer.commit(asynchronous=False)
    elapsed = time.perf_counter() - started
    consumer.close()
    return {
        "records": count,
        "seconds": round(elapsed, 2),
        "events_per_s": round(count / elapsed),
        **cpu.per_record(count),
        "peak_rss_mb": peak_rss_mb(),
        "state_keys": 0,
        "counts_match": None,
    }


def run_child(args, services: Services, topic: str, state: str, expected: dict, reports: bool = False) -> dict:
    outputs = [f"{topic}-{state}-{kind}" for kind in ("out", "dlq", "dups")]
    services.create_topics(*outputs)
    state_uri = services.redis_url if state == "redis" else "memory"
    command = [
        sys.executable,
        __file__,
        "--child",
        f"--bootstrap={services.bootstrap}",
        f"--topic={topic}",
        f"--state={state_uri}",
        f"--batch-size={args.batch_size}",
        f"--run={uuid.uuid4().hex[:6]}",  # each run its own consumer group and Redis keys: every round reads it all
    ] + (["--exactly-once"] * args.exactly_once)
    command += ["--report-duplicates"] * reports
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
        command.append(f"--profile={args.profile / f'{state}.prof'}")
    print(
        f"running the kafka engine with {state} state{' and duplicate reports' if reports else ''} ...", file=sys.stderr
    )
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    counts = result.pop("counts")
    result["counts_match"] = {k: counts[k] for k in expected} == expected
    delivery = ("exactly-once" if args.exactly_once else "at-least-once") + (" +dups" if reports else "")
    return {"state": state, "delivery": delivery, **result}


def run_group(args, services: Services, topic: str, expected: dict) -> dict:
    """``--instances`` engine processes in one group until it has committed the whole topic."""
    from confluent_kafka import Consumer, TopicPartition

    label = f"redis x{args.instances}"
    services.create_topics(f"{topic}-group-out", f"{topic}-group-dlq")
    group = f"bench-group-{uuid.uuid4().hex[:6]}"
    command = [
        sys.executable,
        __file__,
        "--child",
        f"--bootstrap={services.bootstrap}",
        f"--topic={topic}",
        f"--state={services.redis_url}",
        f"--batch-size={args.batch_size}",
        f"--group={group}",
        "--follow",
    ]
    command += ["--exactly-once"] * args.exactly_once
    print(f"running {args.instances} kafka engines in one group with redis state ...", file=sys.stderr)
    reader = Consumer({"bootstrap.servers": services.bootstrap, "group.id": group, "enable.auto.commit": False})
    partitions = [TopicPartition(topic, p) for p in range(args.partitions)]
    ends = [reader.get_watermark_offsets(tp, timeout=10)[1] for tp in partitions]
    started = time.perf_counter()
    children = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(args.instances)]
    while [tp.offset for tp in reader.committed(partitions, timeout=10)] != ends:
        if any(child.poll() is not None for child in children):
            raise SystemExit("an engine of the group exited early")
        time.sleep(0.2)
    elapsed = time.perf_counter() - started
    reader.close()
    totals: dict = {}
    for child in children:
        child.terminate()
        out = json.loads(child.communicate(timeout=120)[0].strip().splitlines()[-1])
        for name, value in out["counts"].items():
            totals[name] = totals.get(name, 0) + value
    records = sum(ends)
    return {
        "state": label,
        "delivery": "exactly-once" if args.exactly_once else "at-least-once",
        "records": records,
        "seconds": round(elapsed, 2),
        "events_per_s": round(records / elapsed),
        "peak_rss_mb": 0,
        "state_keys": 0,
        "counts_match": {k: totals[k] for k in expected} == expected,
    }


def run_cli(
    args, services: Services, topic: str, state: str, expected: dict, workdir: Path, batch_size: int | None
) -> dict:
    """``dedup run --engine kafka`` as a user runs it (its defaults, a bounded run of the whole
    topic from a new group): the rate over the process's whole life, start-up included, and its
    CPU per record (``RUSAGE_CHILDREN``: every thread of the process); ``batch_size`` given as
    ``DEDUP_BATCH_SIZE`` unless None."""
    run = uuid.uuid4().hex[:6]
    out, dlq = f"{topic}-cli-{run}-out", f"{topic}-cli-{run}-dlq"
    services.create_topics(out, dlq)
    summary = workdir / f"cli-{run}.json"
    command = [str(Path(sys.executable).with_name("dedup")), "run", "--engine", "kafka", "--no-progress"]
    command += ["--source", f"kafka://{services.bootstrap}/{topic}?group=bench-cli-{run}&stop_at_end=true"]
    command += ["--sink", f"kafka://{services.bootstrap}/{out}", "--dlq", f"kafka://{services.bootstrap}/{dlq}"]
    command += ["--summary-json", str(summary)]
    if state == "redis":
        import redis

        db = f"{services.redis_url.rsplit('/', 1)[0]}/1"  # a database of its own, emptied first
        redis.Redis.from_url(db).flushdb()
        command += ["--state", db]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEDUP_")}  # as a user's shell has it
    if batch_size is not None:
        env["DEDUP_BATCH_SIZE"] = str(batch_size)
    env["DEDUP_KAFKA__DELIVERY"] = "exactly-once" if args.exactly_once else "at-least-once"
    print(f"running dedup run --engine kafka with {state} state ...", file=sys.stderr)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    counts = json.loads(summary.read_text())  # Accounting.as_dict: "in" and the buckets
    records = counts["in"]
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {
        "state": state,
        "delivery": "dedup run" if batch_size is None else f"dedup run b{batch_size}",
        "records": records,
        "seconds": round(elapsed, 2),
        "events_per_s": round(records / elapsed),
        "process_cpu_us": round(cpu / records * 1e6, 2),
        "peak_rss_mb": None,  # RUSAGE_CHILDREN's peak is of any child so far, not this one's
        "state_keys": None,
        "counts_match": {k: counts[k] for k in expected} == expected,
    }


def run_engine(args: argparse.Namespace) -> dict:
    """The child: one bounded run of the engine; its own peak RSS is the run's."""
    from adapters import SystemClock
    from adapters.json import read_event
    from adapters.kafka import build_kafka_engine
    from adapters.memory import InMemoryStateStore
    from app import long_lived_frozen
    from domain import Deduplicator, RuleSet

    if args.state == "memory":
        store = InMemoryStateStore()
    else:
        from adapters.redis import RedisStateStore

        store = RedisStateStore(
            args.state, key_prefix=f"{args.group or f'bench-{args.run or uuid.uuid4().hex[:6]}'}:"
        )  # a group shares it
    state = "memory" if args.state == "memory" else "redis"
    core = Deduplicator(RuleSet(), store, SystemClock(), read_event=read_event)  # as the container builds it
    bootstrap, topic = args.bootstrap, args.topic
    rss_before = peak_rss_mb()
    cpu = CpuMeter(None if args.state == "memory" else args.state)
    started = time.perf_counter()
    outputs = "group" if args.follow else state
    group = args.group or f"bench-{state}{'-dups' if args.report_duplicates else ''}{args.run}"
    engine = build_kafka_engine(
        core,
        f"kafka://{bootstrap}/{topic}?group={group}",
        f"kafka://{bootstrap}/{topic}-{outputs}-out",
        f"kafka://{bootstrap}/{topic}-{outputs}-dlq",
        exactly_once=args.exactly_once,
        batch_size=args.batch_size,
        stop_at_end=not args.follow,
        duplicates_uri=f"kafka://{bootstrap}/{topic}-{outputs}-dups" if args.report_duplicates else None,
    )
    if args.follow:  # one of a group: until SIGTERM
        import signal
        import threading

        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        with long_lived_frozen():  # as ``dedup run`` runs an engine
            totals = engine.run(stop)
    elif args.profile:
        import cProfile

        with cProfile.Profile() as profile, long_lived_frozen():
            totals = engine.run()
        profile.dump_stats(args.profile)
    else:
        with long_lived_frozen():
            totals = engine.run()
    elapsed = time.perf_counter() - started
    keys = len(store) if state == "memory" else store.key_count()
    extra = {} if state == "memory" else {"redis_used_memory_mb": round(store.memory_bytes() / 2**20, 1)}
    return {
        "records": totals.records_in,
        "seconds": round(elapsed, 2),
        "events_per_s": round(totals.records_in / elapsed),
        **cpu.per_record(totals.records_in),
        "peak_rss_mb": peak_rss_mb(),
        "rss_at_start_mb": rss_before,
        "state_keys": keys,
        **extra,
        "counts": totals.as_dict(),
    }


class CpuMeter:
    """CPU time spent since it was made, per record: the process's (its Python thread and
    librdkafka's threads), its main thread's alone (the interpreter's work per record), and
    the Redis server's when given its URL. Less disturbed by a busy machine than wall time."""

    def __init__(self, redis_url: str | None = None):
        self.redis = None
        if redis_url:
            import redis

            self.redis = redis.Redis.from_url(redis_url)
        self.start = self._now()

    def _now(self) -> tuple[float, float, float]:
        server = 0.0
        if self.redis is not None:
            info = self.redis.info("cpu")
            server = info["used_cpu_user"] + info["used_cpu_sys"]
        return time.process_time(), time.thread_time(), server

    def per_record(self, records: int) -> dict:
        spent = [end - start for start, end in zip(self.start, self._now())]
        per = [round(s / max(records, 1) * 1e6, 2) for s in spent]
        return {
            "process_cpu_us": per[0],
            "main_thread_cpu_us": per[1],
            "redis_cpu_us": per[2] if self.redis is not None else None,
        }


def peak_rss_mb() -> int:
    """This process's peak RSS since it started (``VmHWM``: ``ru_maxrss`` survives exec, so a
    child would report its parent's peak)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def report(rows: list[dict], path: Path | None) -> None:
    """One line a run; each run's shares are of its own round's passthrough and passthrough+json
    rates. With several rounds, a last table gives each row's shares over the rounds."""
    print(
        f"{'round':>5}  {'state':<10}{'delivery':<18}{'records':>11}{'seconds':>9}{'events/s':>10}{'of pass':>9}"
        f"{'of +json':>10}{'CPU µs/rec':>12}{'main':>7}{'redis':>7}{'peak RSS MB':>13}{'state keys':>12}  counts match"
    )
    for r in rows:
        ceilings = {c["delivery"]: c["events_per_s"] for c in rows if c["round"] == r["round"] and c["state"] == "-"}
        for name, ceiling in (
            ("share_of_passthrough", "passthrough"),
            ("share_of_passthrough_json", "passthrough+json"),
        ):
            r[name] = round(r["events_per_s"] / ceilings[ceiling], 3) if ceiling in ceilings else None
        print(
            f"{r['round']:>5}  {r['state']:<10}{r['delivery']:<18}{r['records']:>11,}{r['seconds']:>9}"
            f"{r['events_per_s']:>10,}{_share(r, 'share_of_passthrough'):>9}{_share(r, 'share_of_passthrough_json'):>10}"
            f"{_figure(r, 'process_cpu_us'):>12}{_figure(r, 'main_thread_cpu_us'):>7}"
            f"{_figure(r, 'redis_cpu_us'):>7}{r['peak_rss_mb'] or '-':>13}{_count(r['state_keys']):>12}  {r['counts_match']}"
        )
    if len({r["round"] for r in rows}) > 1:
        print(
            f"\n{'state':<10}{'delivery':<18}{'of +json, each round':>28}{'main µs/rec, each round':>30}  counts match"
        )
        for state, delivery in dict.fromkeys((r["state"], r["delivery"]) for r in rows):
            runs = [r for r in rows if (r["state"], r["delivery"]) == (state, delivery)]
            shares = " / ".join(_share(r, "share_of_passthrough_json") for r in runs)
            mains = " / ".join(_figure(r, "main_thread_cpu_us") for r in runs)
            print(
                f"{state:<10}{delivery:<18}{shares:>28}{mains:>30}  {all(r['counts_match'] is not False for r in runs)}"
            )
    if path:
        path.write_text(json.dumps(rows, indent=2) + "\n")


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _share(row: dict, name: str) -> str:
    return "-" if row.get(name) is None else f"{row[name]:.0%}"


def _figure(row: dict, name: str) -> str:
    return "-" if row.get(name) is None else f"{row[name]:.1f}"


if __name__ == "__main__":
    main()
