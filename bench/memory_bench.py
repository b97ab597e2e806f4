"""Throughput and memory of the in-memory engine on a generated JSONL stream.

    .venv/bin/python bench/memory_bench.py --events 1000000
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from app.cli import run_engine  # noqa: E402
from app.generator import StreamSpec, generate  # noqa: E402
from app.settings import load_settings  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=500_000, help="unique events")
    parser.add_argument("--batch-size", type=int, default=5000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "in.jsonl"
        records, expected = generate(StreamSpec(uniques=args.events))
        source.write_bytes(b"".join(r + b"\n" for r in records))
        del records
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        settings = load_settings(source=f"file:{source}", sink=f"file:{tmp}/out.jsonl", dlq=f"file:{tmp}/dlq.jsonl",
                                 batch_size=args.batch_size)
        started = time.perf_counter()
        totals = run_engine(settings)
        elapsed = time.perf_counter() - started
    figures = {"records": totals.records_in, "seconds": round(elapsed, 2),
               "events_per_s": round(totals.records_in / elapsed),
               "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
               "rss_before_run_mb": round(rss_before / 1024),
               "counts_match": totals.as_dict() | expected.as_accounting() == totals.as_dict()}
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
