"""End-to-end latency of an engine at a fixed rate: produce time of each unique event to its
arrival at a ``read_committed`` consumer of the output topic.

    .venv/bin/python bench/latency_bench.py --engine kafka --rate 200 --duration 20
    .venv/bin/python bench/latency_bench.py --engine kafka --delivery exactly-once --state redis --rate 200,5000
    .venv/bin/python bench/latency_bench.py --engine spark --rate 200 --duration 40 --set spark.trigger=200ms
        [--partitions 4] [--master local[2]] [--warmup 5] [--drain 30] [--json FILE] [--plot FILE.svg]

Starts a local Kafka broker (KRaft) and, for Redis state, a redis-server
(``deploy/local/services``) unless ``--bootstrap`` / ``--redis`` (or ``DEDUP_TEST_KAFKA`` /
``DEDUP_TEST_REDIS``) name running ones. Each configuration (every combination of
``--engine``, ``--delivery``, ``--state`` and ``--rate``) gets topics of its own (input,
output, dead letters; ``--partitions`` each) and runs the engine as a user would: ``dedup
run`` in a process of its own, unbounded, its settings from the command line, ``--config``
and ``--set KEY=VALUE`` (given to it as ``DEDUP_KEY``, dots as ``__``: ``--set
spark.trigger=200ms`` is ``DEDUP_SPARK__TRIGGER=200ms``; no other ``DEDUP_*`` variable of
this environment reaches it), stopped with SIGTERM at the end. Then:

1. start-up: a probe event per partition every half second until one of each partition
   came out (the engine consumes and emits; ``--start-timeout``);
2. warm-up: ``--warmup`` seconds at the rate (counted in the accounting, not in the latencies);
3. measured: ``--duration`` seconds at the rate; the latency of every unique event sent then;
4. drain: until every expected event and dead letter came out (then one second more, for
   copies), at most ``--drain`` seconds.

The load (``latency_model.LoadStream``): JSON events keyed by ``uniqueValue``, event time =
the wall clock, ~18 % repeats of a key first sent in the last 5 s (duplicates), 0.5 % late
(an hour behind a time their partition already showed: dead letters ``late``) and 0.5 %
invalid (``not_json``, ``missing_field``). It is sent on an absolute schedule in 5 ms ticks;
a generator more than ``--max-behind`` seconds late, or reaching less than ``--min-share``
of the rate, ends the bench (exit 3): it would measure itself. A consumer in a process of
its own reads the output and dead-letter topics (``read_committed``) and stamps each arrival
with the wall clock; the generator stamped each send (the record's CreateTime).

Reported per configuration: p50, p90, p99, p99.9 and max latency (nearest rank) of the
measured unique events, the rate reached, the time the engine took to start emitting,
events missing (expected, never seen), doubled (seen more than once), unexpected (seen, not
expected: a duplicate, late or invalid record let through) and dead letters by reason against
the expected, and the CPU share of every process on the machine (``cpu_shares``: the engine's
process and its Spark JVM, that JVM's threads by kind, JIT compilers and garbage collector
included, the broker, the generator, the output reader, the rest, idle) over the warm-up and
the measured seconds (and, in ``--json``, per minute of them). A table on stdout; ``--json
FILE`` all figures; ``--plot FILE.svg|png`` the percentiles per configuration. Exit 0: every configuration exact; 1: one was not (missing,
doubled, unexpected or dead letters off); 3: the generator fell behind; 4: an engine did not
start or died (the tail of its log is shown; ``--logs DIR`` keeps the logs); 5: the bench's
own producer or reader failed. An engine that does not exit 0 after SIGTERM is reported.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import os
import queue
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from bench.cpu_shares import CpuShares, CpuTimeline, spark_jvm_under  # noqa: E402
from bench.latency_model import (  # noqa: E402
    TYPES,
    Drain,
    GeneratorBehind,
    LoadStream,
    Mix,
    account,
    latencies,
    pace,
    phase_of,
    summarize,
    timeline,
)
from deploy.local import services as local_services  # noqa: E402

STATES = {"kafka": ("memory", "redis"), "spark": ("checkpoint", "redis")}
EXIT_INEXACT, EXIT_BEHIND, EXIT_ENGINE, EXIT_BENCH = 1, 3, 4, 5


class EngineFailed(Exception):
    """The engine did not start emitting in time, or exited while it should run."""


@dataclass(frozen=True)
class Config:
    engine: str
    delivery: str
    state: str
    rate: float

    @property
    def label(self) -> str:
        return f"{self.engine} {self.delivery} {self.state} {self.rate:g}/s"


# --- arguments -----------------------------------------------------------------------------


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--engine", type=names("kafka", "spark"), default=["kafka"], help="kafka, spark or both: kafka,spark"
    )
    p.add_argument("--delivery", type=names("at-least-once", "exactly-once"), default=["at-least-once"])
    p.add_argument(
        "--state",
        type=names("memory", "redis", "checkpoint"),
        help="memory or redis (kafka engine), checkpoint or redis (spark engine); default memory / checkpoint",
    )
    p.add_argument("--rate", type=rates, action="extend", help="events/s, repeatable or comma-separated (default 200)")
    p.add_argument("--duration", type=float, default=30, help="seconds measured per configuration")
    p.add_argument("--warmup", type=float, default=5, help="seconds at the rate before the measured phase")
    p.add_argument("--drain", type=float, default=30, help="at most this long for the last events to come out")
    p.add_argument("--start-timeout", type=float, default=180, help="for the engine to emit its first events")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--master", default="local[2]", help="the Spark engine's master")
    p.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        type=setting,
        metavar="KEY=VALUE",
        help="an engine setting, given as DEDUP_KEY (dots as __), repeatable",
    )
    p.add_argument("--config", type=Path, help="a settings file for the engine (dedup run --config)")
    load = p.add_argument_group("load")
    load.add_argument("--repeat-share", type=float, default=Mix.repeat_share)
    load.add_argument("--late-share", type=float, default=Mix.late_share)
    load.add_argument("--invalid-share", type=float, default=Mix.invalid_share)
    load.add_argument("--tick", type=float, default=0.005, help="seconds between sends")
    load.add_argument("--min-share", type=float, default=0.97, help="of the rate the generator must reach")
    load.add_argument("--max-behind", type=float, default=1.0, help="seconds the generator may fall behind")
    load.add_argument("--seed", type=int, default=7)
    p.add_argument("--bootstrap", default=os.environ.get("DEDUP_TEST_KAFKA"))
    p.add_argument("--redis", default=os.environ.get("DEDUP_TEST_REDIS"))
    p.add_argument("--json", type=Path, help="write every figure here")
    p.add_argument("--plot", type=Path, help="plot the percentiles per configuration (.svg or .png)")
    p.add_argument("--logs", type=Path, help="keep the engines' logs in this directory")
    args = p.parse_args(argv)
    args.rate = args.rate or [200.0]
    args.configs = configs(p, args)
    return args


def names(*allowed: str):
    def parse(text: str) -> list[str]:
        given = [name.strip() for name in text.split(",") if name.strip()]
        wrong = [name for name in given if name not in allowed]
        if wrong or not given:
            raise argparse.ArgumentTypeError(f"expected {' or '.join(allowed)} (comma-separated), got {text!r}")
        return given

    return parse


def rates(text: str) -> list[float]:
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive events/s, comma-separated, got {text!r}")
    return values


def setting(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` as the environment variable the engine reads: ``DEDUP_KEY`` (dots as ``__``)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return "DEDUP_" + key.strip().replace(".", "__").upper(), value


VOLATILE_STATES = ("memory",)  # lost in a crash: no engine runs exactly-once on them


def configs(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[Config]:
    out = []
    for engine, delivery, rate in itertools.product(args.engine, args.delivery, args.rate):
        for state in args.state or STATES[engine][:1]:
            if state not in STATES[engine]:
                parser.error(
                    f"--state {state} is not a state of the {engine} engine (choose from {', '.join(STATES[engine])})"
                )
            if delivery == "exactly-once" and state in VOLATILE_STATES:
                print(
                    f"latency_bench: skipping {engine} {delivery} {state}: exactly-once needs a state that "
                    "survives a crash (the engine refuses it)",
                    file=sys.stderr,
                )
                continue
            out.append(Config(engine, delivery, state, rate))
    if not out:
        parser.error("no configuration to run: exactly-once needs --state redis or checkpoint")
    return out


# --- services, the engine, the reader --------------------------------------------------------


class Services:
    """The broker and redis-server named on the command line, or local ones started here."""

    def __init__(self, args: argparse.Namespace, workdir: Path):
        self.args, self.workdir, self.started = args, workdir, []
        self.bootstrap, self.redis_url = args.bootstrap, args.redis
        self.pids: dict[str, int | None] = {}  # the services started here, for CpuShares

    def __enter__(self) -> Services:
        if not self.bootstrap:
            broker = local_services.KafkaBroker(self.workdir / "kafka", heap="1g").start()
            self.started.append(broker)
            self.bootstrap = broker.bootstrap
            self.pids["kafka broker"] = broker.pid
        if any(c.state == "redis" for c in self.args.configs) and not self.redis_url:
            redis = local_services.RedisServer(self.workdir / "redis").start()
            self.started.append(redis)
            self.redis_url = redis.url
            self.pids["redis-server"] = redis.pid
        return self

    def __exit__(self, *exc) -> None:
        for service in reversed(self.started):
            service.stop()

    def topics(self, prefix: str, partitions: int) -> tuple[str, str, str]:
        names = (f"{prefix}-in", f"{prefix}-out", f"{prefix}-dead")
        local_services.create_topics(self.bootstrap, *names, partitions=partitions, timeout=60)
        return names


class EngineProcess:
    """``dedup run`` in a process group of its own (a SIGKILL, the last resort, reaches the Spark
    JVM too); its stdout and stderr go to ``log``. ``check`` raises ``EngineFailed`` once it exited."""

    def __init__(self, command: list[str], env: dict[str, str], log: Path):
        self.command, self.env, self.log = command, env, log

    def start(self) -> EngineProcess:
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                self.command,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.log.parent,
                start_new_session=True,
            )
        return self

    def check(self) -> None:
        if self.process.poll() is not None:
            raise EngineFailed(f"the engine exited with {self.process.returncode}:\n{self.tail()}")

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM to ``dedup`` alone, as a supervisor sends it (the running batch finishes, then the
        Spark engine stops its JVM itself); SIGKILL to the whole group after ``timeout`` s. The exit code."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        return self.process.returncode

    def tail(self, lines: int = 20, width: int = 400) -> str:
        """The log's last ``lines`` lines, each cut to ``width`` characters (Spark's plans are long)."""
        text = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return (
            "\n".join("    " + (line if len(line) <= width else line[:width] + " …") for line in text[-lines:])
            + f"\n    (the whole log: {self.log}, kept with --logs DIR)"
        )


def engine_process(
    config: Config, args, services: Services, topics: tuple[str, str, str], run: str, workdir: Path
) -> EngineProcess:
    source, sink, dead = (f"kafka://{services.bootstrap}/{topic}" for topic in topics)
    state = services.redis_url if config.state == "redis" else config.state
    command = [
        str(dedup_command()),
        "run",
        "--engine",
        config.engine,
        "--source",
        f"{source}?group=latency-{run}",
        "--sink",
        sink,
        "--dlq",
        dead,
        "--state",
        state,
        "--no-progress",
    ]
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("DEDUP_")}
    env["DEDUP_KAFKA__DELIVERY"] = config.delivery
    if config.engine == "spark":
        command += ["--master", args.master]
        env.update(
            DEDUP_SPARK__CHECKPOINT=str(workdir / f"checkpoint-{run}"),
            DEDUP_SPARK__LOG_FILE=str(workdir / f"spark-{run}.log"),
        )
    if args.config:
        command += ["--config", str(args.config.resolve())]
    env.update(dict(args.settings))
    return EngineProcess(command, env, workdir / f"engine-{run}.log")


def dedup_command() -> Path:
    beside = Path(sys.executable).with_name("dedup")
    return beside if beside.exists() else ROOT / ".venv" / "bin" / "dedup"


def read_outputs(bootstrap: str, topics: tuple[str, str], partitions: int, control, probes, results) -> None:
    """The reader process: every record of the output and dead-letter topics (``read_committed``),
    each output id with the wall time it arrived; probe ids are posted to ``probes`` as they
    arrive. Stops once ``control`` gave it a ``Drain`` that is over; posts
    ``(arrivals, dead letters by reason)`` to ``results``."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"latency-reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 10,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for topic in topics for p in range(partitions)])
    arrivals, dead, drain = defaultdict(list), Counter(), None
    while drain is None or not drain.over(sum(dead.values()), time.time()):
        message = consumer.poll(0.05)
        now = time.time()
        if message is not None and message.error() is None:
            if message.topic() == topics[0]:
                id_ = output_id(message.value())
                arrivals[id_].append(now)
                if drain is not None:
                    drain.seen(id_)
                elif phase_of(id_) == "probe":
                    probes.put(id_)
            else:
                dead[dict(message.headers() or ()).get("dedup.reason", b"?").decode()] += 1
        if drain is None:
            drain = take(control)
            if drain is not None:
                drain.outstanding.difference_update(arrivals.keys())
    consumer.close()
    results.put((dict(arrivals), dict(dead)))


def output_id(value: bytes) -> str:
    """The ``id`` of an output record; a record without one (an invalid record let through) gets
    a made-up id, which counts as unexpected."""
    try:
        return str(json.loads(value)["id"])
    except (ValueError, TypeError, KeyError):
        return f"(no id) {value[:60]!r}"


def take(channel):
    try:
        return channel.get_nowait()
    except queue.Empty:
        return None


class OutputReader:
    """``read_outputs`` in a process of its own (spawned: no Kafka client crosses a fork), so
    the generator's work never delays an arrival's time stamp."""

    def __init__(self, bootstrap: str, topics: tuple[str, str], partitions: int):
        context = multiprocessing.get_context("spawn")
        self.control, self.probes, self.results = context.Queue(), context.Queue(), context.Queue()
        self.process = context.Process(
            target=read_outputs,
            daemon=True,
            args=(bootstrap, topics, partitions, self.control, self.probes, self.results),
        )

    def start(self) -> OutputReader:
        self.process.start()
        return self

    def arrived_probes(self, wait: float) -> list[str]:
        found = []
        try:
            found.append(self.probes.get(timeout=wait))
            while True:
                found.append(self.probes.get_nowait())
        except queue.Empty:
            return found

    def finish(self, drain: Drain) -> tuple[dict[str, list[float]], dict[str, int]]:
        self.control.put(drain)
        try:
            result = self.results.get(timeout=max(0.0, drain.deadline - time.time()) + drain.grace + 60)
        except queue.Empty:
            raise RuntimeError(f"the output reader did not report (exit code {self.process.exitcode})") from None
        self.process.join(10)
        return result

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()


# --- the load --------------------------------------------------------------------------------


class Load:
    """Sends ``LoadStream`` records to the input topic, keyed and on their partition; ``sent``:
    id -> wall time of the send (the record's CreateTime)."""

    def __init__(self, bootstrap: str, topic: str, stream: LoadStream):
        from confluent_kafka import Producer

        self.topic, self.stream, self.sent = topic, stream, {}
        self.probe_partition: dict[str, int] = {}
        failures = self.failures = []  # the callback holds the list, not the Load: no cycle keeps the producer
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": 1,
                "acks": "all",
                "enable.idempotence": True,
                "on_delivery": lambda error, _message: error and failures.append(error.str()),
            }
        )

    def send(self, phase: str) -> None:
        now = time.time()
        self._produce(self.stream.next(phase, now), now)

    def probe(self, partition: int, type_: str) -> None:
        now = time.time()
        record = self.stream.probe(partition, type_, now)
        self.probe_partition[record.id] = partition
        self._produce(record, now)

    def _produce(self, record, now: float) -> None:
        while True:
            try:
                self.producer.produce(self.topic, record.value, record.key, partition=record.partition)
                break
            except BufferError:
                self.producer.poll(0.01)
        self.sent[record.id] = now

    def flush(self) -> None:
        """Waits for every send to be acknowledged; raises ``RuntimeError`` when one was not (it
        would count as missing)."""
        left = self.producer.flush(30)
        if left or self.failures:
            raise RuntimeError(
                f"the load was not all written: {left} unacknowledged, {len(self.failures)} refused "
                f"({self.failures[:1]})"
            )


def start_up(load: Load, reader: OutputReader, engine: EngineProcess, partitions: int, timeout: float) -> float:
    """Probes every partition each half second until a probe of each came out; the seconds it took.
    Raises ``EngineFailed`` when the engine exits or ``timeout`` passes first."""
    started, waiting, round_ = time.monotonic(), set(range(partitions)), 0
    while waiting:
        engine.check()
        if time.monotonic() - started > timeout:
            raise EngineFailed(f"no output from partitions {sorted(waiting)} within {timeout:g} s:\n{engine.tail()}")
        for partition in range(partitions):
            load.probe(partition, TYPES[round_ % len(TYPES)])
        load.producer.poll(0)
        round_ += 1
        until = time.monotonic() + 0.5
        while waiting and time.monotonic() < until:
            waiting -= {load.probe_partition[id_] for id_ in reader.arrived_probes(0.05)}
    return time.monotonic() - started


def paced(load: Load, phase: str, rate: float, seconds: float, args, on_tick=lambda: None):
    """``seconds`` of ``phase`` at ``rate``; ``GeneratorBehind`` (naming the phase) when it cannot.
    ``on_tick`` runs once a tick, after the producer's poll."""
    try:
        sent = pace(
            rate,
            seconds,
            lambda: load.send(phase),
            time.monotonic,
            time.sleep,
            tick=args.tick,
            max_behind=args.max_behind,
            on_tick=lambda: (load.producer.poll(0), on_tick()),
        )
        return sent.check(args.min_share)
    except GeneratorBehind as exc:
        raise GeneratorBehind(f"{phase}: {exc}") from None


# --- one configuration -----------------------------------------------------------------------


def run_config(config: Config, args, services: Services, workdir: Path) -> dict:
    run = uuid.uuid4().hex[:8]
    topics = services.topics(f"latency-{run}", args.partitions)
    stream = LoadStream(
        run, args.partitions, Mix(args.repeat_share, args.late_share, args.invalid_share), seed=args.seed
    )
    reader = OutputReader(services.bootstrap, topics[1:], args.partitions).start()
    engine = engine_process(config, args, services, topics, run, workdir).start()
    print(f"{config.label}: engine started (topics latency-{run}-*)", file=sys.stderr, flush=True)
    try:
        load = Load(services.bootstrap, topics[0], stream)
        startup = start_up(load, reader, engine, args.partitions, args.start_timeout)
        print(
            f"{config.label}: emitting after {startup:.1f} s; warm-up {args.warmup:g} s, measuring {args.duration:g} s",
            file=sys.stderr,
            flush=True,
        )
        cpu = cpu_shares(engine, reader, services)
        before_warm = cpu.sample()
        warm = paced(load, "warm", config.rate, args.warmup, args) if args.warmup > 0 else None
        before_measured = cpu.sample()
        minutes = CpuTimeline(cpu, 60)
        measured = paced(load, "measure", config.rate, args.duration, args, minutes.tick)
        shares = {
            "warm-up": cpu.shares(before_warm, before_measured),
            "measured": cpu.shares(before_measured, cpu.sample()),
            "measured, per minute": minutes.windows,
        }
        load.flush()
        engine.check()
        arrivals, dead = reader.finish(Drain(stream.expected, sum(stream.dead.values()), time.time() + args.drain))
    finally:
        reader.kill()
        code = engine.stop()
    return {
        **figures(config, args, stream, load, arrivals, dead, startup, warm, measured, code),
        "cpu_share_percent": shares,
    }


def cpu_shares(engine: EngineProcess, reader: OutputReader, services: Services) -> CpuShares:
    """Every process of a configuration's run, the engine's Spark JVM split by thread kind."""
    jvm = spark_jvm_under(engine.process.pid)
    processes = {
        "engine (dedup run)": engine.process.pid,
        "engine's Spark JVM": jvm,
        **services.pids,
        "bench: generator": os.getpid(),
        "bench: output reader": reader.process.pid,
    }
    return CpuShares({k: v for k, v in processes.items() if k != "engine's Spark JVM" or v is not None}, jvm=jvm)


def figures(
    config: Config, args, stream: LoadStream, load: Load, arrivals, dead, startup: float, warm, measured, code: int
) -> dict:
    outcome = account(stream.expected, arrivals)
    measured_ids = [id_ for id_ in stream.expected if phase_of(id_) == "measure"]
    summary = summarize(latencies(load.sent, arrivals, measured_ids))
    dead_ok = dict(stream.dead) == dead
    label = " ".join([config.label, *(f"{k.removeprefix('DEDUP_').lower()}={v}" for k, v in args.settings)])
    return {
        **asdict(config),
        "label": label,
        "partitions": args.partitions,
        "duration_s": args.duration,
        "settings": dict(args.settings),
        "reached_rate": round(measured.reached, 1),
        "worst_behind_ms": round(measured.worst_behind * 1000, 1),
        "warmup_reached_rate": round(warm.reached, 1) if warm else None,
        "startup_s": round(startup, 2),
        "records_sent": dict(stream.verdicts),
        "measured_sent": measured.sent,
        "expected_out": len(stream.expected),
        "measured_expected": len(measured_ids),
        "latency_ms": in_ms(summary),
        "latency_ms_per_5s": [{"from_s": b["from_s"], **in_ms(b)} for b in timeline(load.sent, arrivals, measured_ids)],
        "missing": len(outcome.missing),
        "doubled": len(outcome.doubled),
        "unexpected": len(outcome.unexpected),
        "examples": {
            "missing": outcome.missing[:10],
            "doubled": dict(list(outcome.doubled.items())[:10]),
            "unexpected": outcome.unexpected[:10],
        },
        "dead_letters": {"expected": dict(stream.dead), "seen": dead, "match": dead_ok},
        "exact": outcome.exact and dead_ok,
        "engine_exit_code": code,
    }


def in_ms(summary: dict) -> dict:
    """``summarize``'s figures in milliseconds (the count as it is)."""
    return {k: v if k == "count" or v is None else round(v * 1000, 1) for k, v in summary.items()}


# --- report ----------------------------------------------------------------------------------

COLUMNS = (
    ("config", 38),
    ("reached/s", 10),
    ("events", 8),
    ("p50 ms", 8),
    ("p90 ms", 8),
    ("p99 ms", 8),
    ("p99.9 ms", 9),
    ("max ms", 8),
    ("missing", 8),
    ("doubled", 8),
    ("unexpected", 11),
    ("dead letters", 13),
    ("exit", 5),
)


def table(results: list[dict]) -> str:
    columns = (("config", max([len(r["label"]) + 2 for r in results] + [38])), *COLUMNS[1:])
    lines = ["".join(f"{name:<{width}}" if i == 0 else f"{name:>{width}}" for i, (name, width) in enumerate(columns))]
    for r in results:
        ms = r["latency_ms"]
        cells = [
            r["label"],
            f"{r['reached_rate']:,.1f}",
            f"{ms['count']:,}",
            *(fmt(ms[k]) for k in ("p50", "p90", "p99", "p99.9", "max")),
            str(r["missing"]),
            str(r["doubled"]),
            str(r["unexpected"]),
            "as expected" if r["dead_letters"]["match"] else "OFF",
            str(r["engine_exit_code"]),
        ]
        lines.append(
            "".join(f"{c:<{w}}" if i == 0 else f"{c:>{w}}" for i, (c, (_, w)) in enumerate(zip(cells, columns)))
        )
    return "\n".join(lines)


def markdown(results: list[dict]) -> str:
    """The run as the Latency page's table, with the line that has the site draw it as a chart
    (``scripts/mkdocs_hooks.py``): paste both into the page."""
    lines = [
        "| engine, delivery, state | rate reached | p50 | p90 | p99 | p99.9 | max |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        ms = r["latency_ms"]
        name = ", ".join([r["engine"], r["delivery"], r["state"], *(f"{k}={v}" for k, v in r["settings"].items())])
        cells = [
            name,
            f"{r['reached_rate']:,.1f}/s",
            *(f"{fmt(ms[k])} ms" for k in ("p50", "p90", "p99", "p99.9", "max")),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    chart = "<!-- plot: hbar | p99 end-to-end latency (ms) | engine, delivery, state + rate reached | p99 | ms -->"
    return "\n".join([*lines, "", chart])


def fmt(value) -> str:
    return "-" if value is None else f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


def plot(results: list[dict], path: Path) -> None:
    """One line per configuration over p50, p90, p99, p99.9 and max, log-scaled milliseconds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ("p50", "p90", "p99", "p99.9", "max")
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for r in results:
        points = [(i, r["latency_ms"][name]) for i, name in enumerate(names) if r["latency_ms"][name]]
        axes.plot(*zip(*points), marker="o", label=f"{r['label']} ({r['reached_rate']:,.0f}/s reached)")
    axes.set_xticks(range(len(names)), names)
    axes.set_yscale("log")
    axes.set_ylabel("end-to-end latency (ms)")
    axes.set_title("produce → read_committed consumer of the output")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def cpu_lines(results: list[dict]) -> str:
    """Each configuration's CPU shares over its measured seconds, % of all the machine's cores."""
    lines = [f"CPU over the measured seconds, % of the machine's {os.cpu_count()} cores:"]
    for r in results:
        shares = r["cpu_share_percent"]["measured"]
        jvm = [f"{k.removeprefix('jvm: ')} {v:g}" for k, v in shares.items() if k.startswith("jvm: ")]
        rest = [f"{k} {v:g}" for k, v in shares.items() if not k.startswith("jvm: ")]
        lines.append(f"  {r['label']}: " + ", ".join(rest))
        if jvm:
            lines.append("    of the Spark JVM: " + ", ".join(jvm))
    return "\n".join(lines)


def report(results: list[dict], args) -> None:
    print(table(results))
    print(cpu_lines(results))
    print(f"\n{markdown(results)}\n")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "args": {k: str(v) for k, v in vars(args).items() if k != "configs"},
                    "load_average": os.getloadavg(),
                    "results": results,
                },
                indent=2,
            )
            + "\n"
        )
    if args.plot and results:
        plot(results, args.plot)


def main(argv=None) -> int:
    args = parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="latency-bench-") as tmp, Services(args, Path(tmp)) as services:
        logs = args.logs or Path(tmp)
        logs.mkdir(parents=True, exist_ok=True)
        try:
            for config in args.configs:
                results.append(run_config(config, args, services, logs.resolve()))
        except GeneratorBehind as exc:
            return stop(results, args, f"{exc} ({config.label})", EXIT_BEHIND)
        except EngineFailed as exc:
            return stop(results, args, f"{config.label}: {exc}", EXIT_ENGINE)
        except RuntimeError as exc:  # the bench's own load or reader
            return stop(results, args, f"{config.label}: {exc}", EXIT_BENCH)
    report(results, args)
    for r in results:
        if r["engine_exit_code"] != 0:
            print(
                f"latency_bench: {r['label']}: the engine exited with {r['engine_exit_code']} after SIGTERM "
                "(0 expected: a clean stop)",
                file=sys.stderr,
            )
    inexact = [r["label"] for r in results if not r["exact"]]
    if inexact:
        print(f"latency_bench: not exact: {', '.join(inexact)}", file=sys.stderr)
    return EXIT_INEXACT if inexact else 0


def stop(results: list[dict], args, message: str, code: int) -> int:
    if results:
        report(results, args)
    print(f"latency_bench: FAILED: {message}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
