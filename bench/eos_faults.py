"""Full-size exactly-once fault run of the Spark engine, and exactly-once vs at-least-once throughput.

    .venv/bin/python bench/eos_faults.py [--uniques 700000] [--per-batch 100000] [--kills 3]
                                         [--state rocksdb|redis] [--no-throughput]
                                         [--seed 11] [--json bench/results/eos_faults.json]

Starts a Kafka broker of its own (``deploy/local/services``), then:

1. the fault run of ``tests/support/faults/harness.py`` at full size (``--uniques 700000`` gives
   about 1,000,000 records): the driver killed with kill -9 ``--kills`` times at random
   points and restarted from its checkpoint, the broker killed and restarted once; the
   verifier's counts are printed; with ``--state redis`` the engine keeps its state in a
   redis-server of its own, which is restarted once as well;
2. throughput, in the same run: two bounded runs over the same input topic, one per
   delivery guarantee, each with a fresh checkpoint and output topics; records/s over the
   whole run, JVM start included.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from deploy.local import services  # noqa: E402
from tests.support.faults.harness import FaultPlan, FaultRun, Topics, timed_run  # noqa: E402


def main() -> int:
    args = parse_args()
    with tempfile.TemporaryDirectory(prefix="eos-faults-") as tmp:
        workdir = Path(tmp)
        broker = services.KafkaBroker(workdir / "kafka", heap="1g")
        broker.start(timeout=180)
        redis = services.RedisServer(workdir / "redis", appendonly=True) if args.state == "redis" else None
        try:
            if redis is not None:
                redis.start()
            results = run(args, broker, workdir, redis)
        finally:
            broker.stop()
            if redis is not None:
                redis.stop()
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if results["fault_run"]["ok"] else 1


def run(args, broker, workdir: Path, redis=None) -> dict:
    plan = FaultPlan(
        uniques=args.uniques,
        per_batch=args.per_batch,
        kills=args.kills,
        seed=args.seed,
        timeout=args.timeout,
        restart_redis=redis is not None,
    )
    fault_run = FaultRun(plan, broker, workdir / "faults", redis=redis, say=lambda line: print(line, flush=True))
    (workdir / "faults").mkdir()
    report = fault_run.run()
    print("\n".join(report.lines()), flush=True)
    summary = {"state": args.state, "fault_run": {**report.__dict__, "ok": report.ok, "balanced": report.balanced}}
    if args.no_throughput:
        return summary
    throughput = [
        timed_run(
            Topics(broker.bootstrap, output=f"{mode}-out", dead_letters=f"{mode}-dead"),
            workdir / mode,
            args.per_batch,
            mode,
        )
        for mode in ("at-least-once", "exactly-once")
    ]
    for result in throughput:
        print(
            f"{result['delivery']:>14}: {result['summary'].get('in', 0):,} records in {result['seconds']:.1f}s "
            f"= {result['events_per_second']:,} records/s (exit {result['exit']})",
            flush=True,
        )
    return {**summary, "throughput": throughput}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uniques", type=int, default=700_000)
    parser.add_argument("--per-batch", type=int, default=100_000)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--state", choices=["rocksdb", "redis"], default="rocksdb")
    parser.add_argument("--no-throughput", action="store_true", help="only the fault run")
    parser.add_argument("--timeout", type=float, default=900, help="seconds allowed per step of the fault run")
    parser.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "eos_faults.json")
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(main())
