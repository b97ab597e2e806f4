"""The kafka engine with Redis state at a large, steady size: keys expiring continuously as event time moves on.

    .venv/bin/python bench/redis_engine_bench.py --stored-keys 10000000 [--retentions 0.5]
        [--delivery at-least-once|exactly-once] [--kill-at 0.8] [--json FILE]

The stream is ``bench/large_state_bench.py``'s (every record a new WEB key, one in
``--repeat-every`` a repeat of a key ~300 s of event time older: a duplicate), sized for Redis
state: the store keeps a WEB key 2,400 s of event time (its retention, 1,200 s, after its
emission expires: ``bench/redis_state_bench.py``), so ``--stored-keys / 2,400`` records per
second of event time make the store hold ``--stored-keys`` keys once 2,400 s have passed, and
as many expire as arrive. The stream covers those 2,400 s and then ``--retentions`` more spans
of 2,400 s, steady.

A local broker and a redis-server of their own (``noeviction``, no persistence) are started on
loopback; the stream is produced to a topic of ``--partitions`` partitions keyed by
``uniqueValue`` before the engine starts (the generator takes no CPU from it). The engine runs
as ``dedup run --engine kafka --state redis://…`` builds it (``build_kafka_engine``, its
default batch size; static membership, as docs/engines/kafka.md advises) in a process of its
own, until the topic's end. Every ``--report-every``
s it prints: records judged, the keys Redis holds (``DBSIZE``: the state keys and the expiry
index's few), Redis ``used_memory`` and bytes per key, the records per second of that stretch,
the engine's and Redis's RSS, and the CPU share of the engine, Redis and the broker. At
``--kill-at`` of the stream the engine is killed (``kill -9``) and a new one resumes: the time
from its start to its first committed batch is the restart at full state. At the end it reads
the output back (``read_committed``): every key once under exactly-once, at least once under
at-least-once (a batch replayed after the kill), no dead letter; and prints the rate near 1 M
stored keys against the steady state, and the keys', memory's and RSS's range over the
steady part.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src"), str(ROOT / "bench")]

from cpu_shares import process_cpu  # noqa: E402
from large_state_bench import RETENTION, accounting_holds, expected_counts, produce_keyed, read_topics, records  # noqa: E402

KEPT = 2 * RETENTION  # s of event time a WEB key stays in Redis: one retention after its emission
# expires (bench/redis_state_bench.py); 8.0 M keys held at 3,333 records a second (2026-12-07)
GROUP = "bench"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stored-keys", type=int, default=10_000_000)
    p.add_argument("--retentions", type=float, default=0.5, help="spans of 2,400 s of steady expiry after the first")
    p.add_argument("--delivery", choices=("at-least-once", "exactly-once"), default="at-least-once")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--repeat-every", type=int, default=100)
    p.add_argument(
        "--kill-at", type=float, default=0.8, help="fraction of the stream judged when the engine is killed (0: never)"
    )
    p.add_argument("--report-every", type=float, default=20.0, help="s between reports")
    p.add_argument("--json", type=Path, help="also write the reports and summary here")
    p.add_argument("--phase", help=argparse.SUPPRESS)
    p.add_argument("--bootstrap", help=argparse.SUPPRESS)
    p.add_argument("--redis", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.phase:
        run_engine(args)
        return
    with tempfile.TemporaryDirectory(prefix="redis-engine-bench-") as work:
        bench(args, Path(work))


def bench(args, work: Path) -> None:
    import redis

    from deploy.local import services

    per_second = max(args.stored_keys // KEPT, 1)
    total = int(per_second * KEPT * (1 + args.retentions))
    broker = services.KafkaBroker(work / "kafka", heap="1g").start()
    server = services.RedisServer(work / "redis")
    server.start()
    try:
        args.bootstrap, args.redis = broker.bootstrap, server.url
        services.create_topics(broker.bootstrap, "in", partitions=args.partitions, timeout=60)
        services.create_topics(broker.bootstrap, "out", "dlq", partitions=args.partitions, timeout=60)
        began = time.perf_counter()
        expected = produce(args, per_second, total)
        print(
            f"stream: {total:,} records ({expected['out']:,} keys), {per_second:,} records per second of event "
            f"time, produced in {time.perf_counter() - began:.0f} s; {args.delivery}",
            flush=True,
        )
        raw = redis.Redis.from_url(server.url)
        pids = {"redis": int(raw.info("server")["process_id"]), "broker": broker.pid}
        print(
            f"{'records':>12} {'stored keys':>12} {'Redis MiB':>9} {'B/key':>6} {'rec/s':>8} {'engine MB':>9} "
            f"{'Redis MB':>8}  cpu engine/redis/broker",
            flush=True,
        )
        kill_after = int(total * args.kill_at) if args.kill_at else None
        first = child(args, raw, pids, kill_after)
        reports, restart = first["reports"], None
        if first["killed"]:
            begun = time.perf_counter()
            second = child(args, raw, pids, None, judged_before=first["killed"])
            restart = {
                "after_records": first["killed"],
                "first_commit_s": round(second["first_commit_at"] - begun, 1) if second["first_commit_at"] else None,
            }
            reports += second["reports"]
        index_keys = sum(1 for _ in raw.scan_iter(match="dedup:\x1f*", count=10_000))
        raw.close()
        counts = read_topics(args)
    finally:
        server.stop()
        broker.stop()
    summary = summarize(args, reports, restart, counts, expected, index_keys)
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(
            json.dumps(
                {"args": vars(args) | {"json": str(args.json)}, "reports": reports, "summary": summary}, indent=2
            )
        )


def produce(args, per_second: int, total: int) -> dict:
    """Produces the stream to ``in``, keyed by ``uniqueValue``; returns the counts the engine must give."""
    shape = argparse.Namespace(live_keys=per_second * RETENTION, repeat_every=args.repeat_every)
    tally, step = {"repeats": 0, "id_sum": 0}, 100_000
    lines = (r for start in range(0, total, step) for r in records(shape, start, min(step, total - start), tally))
    produce_keyed(args.bootstrap, lines)
    return expected_counts(total, tally)


def child(args, raw, pids: dict, kill_after: int | None, judged_before: int = 0) -> dict:
    """Runs the engine in a process of its own until the topic's end or until it judged
    ``kill_after`` records (then ``kill -9``); returns the reports made while it ran, their
    records counted from the stream's start (``judged_before``: what a killed process judged;
    its last uncommitted batches are judged again, so a resumed run's count is a batch or two high)."""
    command = [
        sys.executable,
        __file__,
        "--phase",
        "run",
        "--bootstrap",
        args.bootstrap,
        "--redis",
        args.redis,
        "--delivery",
        args.delivery,
        "--report-every",
        str(args.report_every),
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    reports, killed, first_commit_at = [], 0, None
    mark = (time.monotonic(), judged_before, *(process_cpu(p) for p in (process.pid, pids["redis"], pids["broker"])))
    for line in process.stdout:
        if not line.startswith("{"):
            print(f"engine process: {line.rstrip()}", file=sys.stderr, flush=True)
            continue
        message = json.loads(line)
        first_commit_at = first_commit_at or time.perf_counter()
        if message.get("first"):
            continue
        now, judged = time.monotonic(), judged_before + message["records"]
        cpu = [process_cpu(p) for p in (process.pid, pids["redis"], pids["broker"])]
        seconds = now - mark[0]
        memory = raw.info("memory")
        stored = raw.dbsize()
        report = {
            "records": judged,
            "stored_keys": stored,
            "used_memory": int(memory["used_memory"]),
            "bytes_per_key": int(memory["used_memory"]) / max(stored, 1),
            "rate": (judged - mark[1]) / seconds if seconds else 0,
            "engine_mb": round(message["rss_mb"]),
            "redis_mb": round(int(memory["used_memory_rss"]) / 2**20),
            "cpu": [round((c - m) / seconds, 2) for c, m in zip(cpu, mark[2:])],
            "cold": not reports,  # a process's first stretch: its start, or a restart's
        }
        mark = (now, judged, *cpu)
        reports.append(report)
        print(
            f"{judged:>12,} {stored:>12,} {report['used_memory'] / 2**20:>9,.0f} {report['bytes_per_key']:>6.0f} "
            f"{report['rate']:>8,.0f} {report['engine_mb']:>9,} {report['redis_mb']:>8,}  "
            + " / ".join(f"{share:.0%}" for share in report["cpu"]),
            flush=True,
        )
        if kill_after is not None and judged >= kill_after:
            process.kill()
            killed = judged
            print(f"killed the engine (kill -9) after {judged:,} records", flush=True)
            break
    process.wait()
    if not killed and process.returncode != 0:
        raise SystemExit(f"the engine's process failed ({process.returncode})")
    return {"reports": reports, "killed": killed, "first_commit_at": first_commit_at}


def run_engine(args) -> None:
    """In the child: the kafka engine with Redis state over the topic, to its end; a JSON line
    after its first committed batch that judged records and then every ``--report-every`` s (records judged so far, RSS)."""
    from adapters import SystemClock
    from adapters.kafka import build_kafka_engine
    from adapters.redis import RedisStateStore
    from domain import Deduplicator, RuleSet

    core = Deduplicator(RuleSet(), RedisStateStore(args.redis), SystemClock())
    kafka = f"kafka://{args.bootstrap}"
    engine = build_kafka_engine(
        core,
        f"{kafka}/in?group={GROUP}&group.instance.id={GROUP}-1",  # static membership, as docs/engines/kafka.md advises
        f"{kafka}/out",
        f"{kafka}/dlq",
        exactly_once=args.delivery == "exactly-once",
        stop_at_end=True,
    )
    state, out = {"next": 0.0, "first": True}, sys.stdout

    def on_batch(totals) -> None:
        now, judged = time.monotonic(), totals.as_dict()["in"]
        if judged and (state["first"] or now >= state["next"]):
            line = {"records": judged, "rss_mb": rss_mb(), "first": state["first"]}
            out.write(json.dumps(line) + "\n")
            out.flush()
            state["first"], state["next"] = False, now + args.report_every

    engine.on_batch = on_batch
    with contextlib.redirect_stdout(sys.stderr):
        engine.run(None)
    core.state.close()


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def summarize(args, reports: list[dict], restart: dict | None, counts: dict, expected: dict, index_keys: int) -> dict:
    per_second = max(args.stored_keys // KEPT, 1)
    warm = [r for r in reports if not r["cold"]]
    steady = [r for r in warm if r["records"] >= per_second * (KEPT + RETENTION // 4)]
    near_million = min(warm, key=lambda r: abs(r["stored_keys"] - 1_000_000)) if warm else None
    summary = {
        "delivery": args.delivery,
        "records": expected["records"],
        "expected_out": expected["out"],
        "read_out": counts["out"],
        "distinct_out": counts["distinct"],
        "doubled": counts["out"] - counts["distinct"],
        "dead_letters": counts["dead_letters"],
        "accounting_holds": accounting_holds(argparse.Namespace(kafka=args.delivery), counts, expected),
        "expiry_index_keys": index_keys,
        "restart": restart,
        "near_1M": {k: near_million[k] for k in ("stored_keys", "rate", "bytes_per_key")} if near_million else None,
    }
    if steady:
        rates = sorted(r["rate"] for r in steady)
        median = rates[len(rates) // 2]
        summary["steady"] = {
            "reports": len(steady),
            "stored_keys": [min(r["stored_keys"] for r in steady), max(r["stored_keys"] for r in steady)],
            "bytes_per_key": [
                round(min(r["bytes_per_key"] for r in steady)),
                round(max(r["bytes_per_key"] for r in steady)),
            ],
            "used_memory_mib": [
                round(min(r["used_memory"] for r in steady) / 2**20),
                round(max(r["used_memory"] for r in steady) / 2**20),
            ],
            "engine_mb": [min(r["engine_mb"] for r in steady), max(r["engine_mb"] for r in steady)],
            "redis_rss_mb": [min(r["redis_mb"] for r in steady), max(r["redis_mb"] for r in steady)],
            "rate_median": round(median),
            "rate_vs_1M": round(median / near_million["rate"], 2) if near_million else None,
        }
    return summary


if __name__ == "__main__":
    main()
