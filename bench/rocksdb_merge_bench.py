"""RocksDB's string-append merge operator by the number of operands a key holds.

    .venv/bin/python bench/rocksdb_merge_bench.py [--operands 500000] [--per-key 781,3125,12500,25000] [--rounds 2]

The Spark engine's expiry queues are Spark list states: each entry is a RocksDB merge operand
under the queue's key, and RocksDB folds a key's operands pairwise as it flushes (and compacts),
copying the growing value each time. This runs ``bench/java/MergeOperands.java`` against the
rocksdbjni that PySpark ships (compiled with ``javac`` into a temporary directory), one JVM per
measurement: ``--operands`` appends of ``--bytes`` bytes, ``--per-key`` of them to a key, one
flush, a read of every key; the settings of ``--per-key`` interleaved over ``--rounds``. It prints
each measurement and the median flush time per operand by operands per key: what a moment's
queue costs its state store as it flushes, by how many keys join it (docs/design/operator.md).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "java" / "MergeOperands.java"


def rocksdb_jar() -> Path:
    import pyspark

    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("rocksdbjni-*.jar"))
    if not jars:
        raise SystemExit("no rocksdbjni jar among PySpark's jars")
    return jars[-1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--operands", type=int, default=500_000)
    p.add_argument("--per-key", default="781,3125,12500,25000", help="operands per key, comma-separated")
    p.add_argument("--bytes", type=int, default=40, help="bytes per operand")
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    per_key = [int(n) for n in args.per_key.split(",")]
    jar = rocksdb_jar()
    with tempfile.TemporaryDirectory(prefix="merge-bench-") as classes:
        subprocess.run(["javac", "-cp", str(jar), "-d", classes, str(SOURCE)], check=True)
        flush_ms: dict[int, list[float]] = {n: [] for n in per_key}
        print("round  per key     keys  merges ms  flush ms  get ms   flush µs/operand", flush=True)
        for round_ in range(args.rounds):
            for n in per_key:
                line = subprocess.run(
                    ["java", "-cp", f"{jar}:{classes}", "MergeOperands", str(args.operands), str(n), str(args.bytes)],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout.split()
                _, keys, merges, flush, gets, read = line
                if int(read) != args.operands * args.bytes:
                    raise SystemExit(f"read back {read} bytes of {args.operands * args.bytes}")
                flush_ms[n].append(float(flush))
                print(
                    f"{round_ + 1:>5} {n:>8,} {int(keys):>8,} {float(merges):>10,.0f} {float(flush):>9,.0f}"
                    f" {float(gets):>7,.0f} {float(flush) * 1000 / args.operands:>18.2f}",
                    flush=True,
                )
    print("\nmedian flush time by operands per key (the same operands in all):")
    for n in per_key:
        median = statistics.median(flush_ms[n])
        print(f"  {n:>8,} a key: {median:>9,.0f} ms, {median * 1000 / args.operands:.2f} µs an operand")


if __name__ == "__main__":
    sys.exit(main())
