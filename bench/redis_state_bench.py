"""Redis state at a large, steady size: keys expiring continuously as event time moves on.

    .venv/bin/python bench/redis_state_bench.py --stored-keys 10000000 [--retentions 1] [--json FILE]

Drives ``RedisStateStore.check_and_set_many`` (the store every engine with ``--state redis://``
uses: the memory and kafka engines, the Spark engine's Redis judge) with batches of
``--batch`` claims of the default WEB rule (window 600 s, retention 1,200 s: a key is kept
until 2,400 s of event time after its emission). Every claim a new key, ``--stored-keys /
2,400`` of them per second of event time, so once 2,400 s have passed the store holds
``--stored-keys`` keys and as many expire as arrive; one claim in ``--repeat-every`` repeats
a key ~300 s of event time older (a duplicate: it must be refused). Keys are shaped as the
product's ``uniqueValue`` (24 characters), owners as positions in 8 partitions. A batch's
watermark is its first claim's time. The stream covers 2,400 s of event time and then ``--retentions``
more of 2,400 s each, steady.

Redis is a redis-server of its own (``noeviction``, no persistence), on loopback. Every
``--report-every`` batches it prints: claims so far, the keys stored (``DBSIZE`` less the
expiry index's keys), Redis ``used_memory`` and bytes per stored key, the claims per second
of that stretch, and the CPU share of Redis and of this (the client's) process over it. At
the end: the rate near 1 M stored keys against the steady state, the stored keys' and
memory's range over the steady part, and the verdicts checked (every new key granted, every
repeat refused).

This is the store, not a whole engine: the engine's own per-record cost (parsing, Kafka)
does not depend on the keys stored; ``bench/kafka_bench.py`` measures it.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from bench.cpu_shares import process_cpu  # noqa: E402

T0 = 1_700_000_000
WINDOW, RETENTION = 600, 1200
KEPT = 2 * RETENTION  # a key is kept one retention after its emission expires
REPEAT_BACK = 300
PARTITIONS = 8  # the claims' owners: positions in 8 partitions of a topic


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stored-keys", type=int, default=10_000_000)
    p.add_argument("--retentions", type=float, default=1.0, help="spans of 2,400 s of steady expiry after the first")
    p.add_argument("--batch", type=int, default=20_000, help="claims per call")
    p.add_argument("--repeat-every", type=int, default=100)
    p.add_argument("--report-every", type=int, default=50, help="batches between reports")
    p.add_argument("--json", type=Path, help="write the reports and summary here")
    args = p.parse_args()

    import redis

    from adapters.redis import RedisStateStore
    from deploy.local import services
    from domain import Claim

    per_second = args.stored_keys / KEPT
    total = int(args.stored_keys * (1 + args.retentions))
    with tempfile.TemporaryDirectory(prefix="redis-state-bench-") as tmp:
        server = services.RedisServer(Path(tmp) / "redis")
        server.start()
        try:
            store, raw = RedisStateStore(server.url, key_prefix="b:"), redis.Redis.from_url(server.url)
            redis_pid = int(raw.info("server")["process_id"])
            reports, wrong = [], 0
            mark = _mark(redis_pid)
            done = batches = 0
            print(
                f"{total:,} claims, {per_second:,.0f} new keys per second of event time, batches of {args.batch:,}",
                flush=True,
            )
            while done < total:
                claims, repeats = [], []
                for i in range(done, min(done + args.batch, total)):
                    t = T0 + int(i / per_second)
                    if i % args.repeat_every == args.repeat_every - 1 and i > per_second * REPEAT_BACK:
                        j = i - int(per_second * REPEAT_BACK)
                        repeats.append(len(claims))
                        key = _key(j - j % args.repeat_every)  # a key claimed as new
                    else:
                        key = _key(i)
                    claims.append(Claim(key, t, WINDOW, t + RETENTION, 0, f"events:{i % PARTITIONS}:{i // PARTITIONS}"))
                now = claims[0].time
                for c in claims:
                    c.now = now
                judged = store.check_and_set_many(claims)
                refused = {k for k, j in enumerate(judged) if not j.granted}
                wrong += len(refused.symmetric_difference(repeats))
                done += len(claims)
                batches += 1
                if batches % args.report_every == 0 or done >= total:
                    # the expiry index's keys start with the prefix and \x1f (adapters.redis._expiry)
                    index_keys = sum(1 for _ in raw.scan_iter(match="b:\x1f*", count=10_000))
                    stored = raw.dbsize() - index_keys
                    used = int(raw.info("memory")["used_memory"])
                    seconds, redis_cpu, own_cpu = _since(mark, redis_pid)
                    mark = _mark(redis_pid)
                    report = {
                        "claims": done,
                        "event_time": now - T0,
                        "stored_keys": stored,
                        "used_memory": used,
                        "bytes_per_key": used / max(stored, 1),
                        "claims_per_s": args.report_every * args.batch / seconds if seconds else 0,
                        "redis_cpu": redis_cpu,
                        "client_cpu": own_cpu,
                        "wrong_verdicts": wrong,
                    }
                    reports.append(report)
                    print(
                        f"claims {done:>12,}  event time {now - T0:>6,} s  stored {stored:>11,}  "
                        f"memory {used / 2**20:>8,.0f} MiB ({report['bytes_per_key']:.0f} B/key)  "
                        f"{report['claims_per_s']:>8,.0f} claims/s  cpu redis {redis_cpu:.0%} client {own_cpu:.0%}",
                        flush=True,
                    )
            store.close()
            raw.close()
        finally:
            server.stop()
    summary = _summary(reports, args.stored_keys)
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(
            json.dumps(
                {"args": vars(args) | {"json": str(args.json)}, "reports": reports, "summary": summary}, indent=2
            )
        )


def _key(i: int) -> str:
    """The WEB state key of the ``i``-th new event: a ``uniqueValue`` shaped as the product's
    (``656b4183-282c-1689019596``: 24 characters, whatever ``i``)."""
    return f"WEB\x1f{i:08x}-{(i * 2_654_435_761) % 65_536:04x}-{T0 + i % 1_000_000_000}"


def _mark(redis_pid: int) -> tuple[float, float, float]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return time.monotonic(), process_cpu(redis_pid), usage.ru_utime + usage.ru_stime


def _since(mark: tuple[float, float, float], redis_pid: int) -> tuple[float, float, float]:
    start, redis_start, own_start = mark
    now, redis_cpu, own_usage = time.monotonic(), process_cpu(redis_pid), resource.getrusage(resource.RUSAGE_SELF)
    seconds = now - start
    own = own_usage.ru_utime + own_usage.ru_stime - own_start
    return seconds, (redis_cpu - redis_start) / seconds, own / seconds


def _summary(reports: list[dict], stored_keys: int) -> dict:
    steady = [r for r in reports if r["event_time"] >= KEPT + RETENTION // 4]
    near_million = min(reports, key=lambda r: abs(r["stored_keys"] - 1_000_000))
    summary = {
        "wrong_verdicts": reports[-1]["wrong_verdicts"] if reports else None,
        "near_1M": {k: near_million[k] for k in ("stored_keys", "claims_per_s", "bytes_per_key")},
    }
    if steady:
        keys = [r["stored_keys"] for r in steady]
        memory = [r["used_memory"] for r in steady]
        rates = sorted(r["claims_per_s"] for r in steady)
        summary["steady"] = {
            "reports": len(steady),
            "stored_keys": [min(keys), max(keys)],
            "stored_vs_target": [min(keys) / stored_keys, max(keys) / stored_keys],
            "used_memory_mib": [min(memory) / 2**20, max(memory) / 2**20],
            "bytes_per_key": [min(r["bytes_per_key"] for r in steady), max(r["bytes_per_key"] for r in steady)],
            "claims_per_s_median": rates[len(rates) // 2],
            "rate_vs_1M": rates[len(rates) // 2] / near_million["claims_per_s"],
        }
    return summary


if __name__ == "__main__":
    main()
