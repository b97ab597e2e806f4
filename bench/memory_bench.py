"""Throughput and memory of the in-memory engine on a generated JSONL stream.

    .venv/bin/python bench/memory_bench.py --events 1000000
    .venv/bin/python bench/memory_bench.py --duplicates   # also with the duplicates output, same run

With ``--duplicates`` the stream runs twice in this process, without and then with the duplicate
reports (``--duplicates file:…``); peak memory is the process's, so only the first run's is its own.
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

from app import StreamSpec, generate, load_settings, run_engine


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=500_000, help="unique events")
    parser.add_argument("--batch-size", type=int, default=5000)
    parser.add_argument("--duplicates", action="store_true", help="run again with the duplicates output on")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "in.jsonl"
        records, expected = generate(StreamSpec(uniques=args.events))
        source.write_bytes(b"".join(r + b"\n" for r in records))
        del records
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        runs = {}
        for reports in (False, True) if args.duplicates else (False,):
            name = "with duplicates output" if reports else "without duplicates output"
            extra = {"duplicates": f"file:{tmp}/dups-{len(runs)}.jsonl"} if reports else {}
            settings = load_settings(
                source=f"file:{source}",
                sink=f"file:{tmp}/out-{len(runs)}.jsonl",
                dlq=f"file:{tmp}/dlq-{len(runs)}.jsonl",
                batch_size=args.batch_size,
                **extra,
            )
            started = time.perf_counter()
            totals = run_engine(settings)
            elapsed = time.perf_counter() - started
            runs[name] = {
                "records": totals.records_in,
                "seconds": round(elapsed, 2),
                "events_per_s": round(totals.records_in / elapsed),
                "counts_match": totals.as_dict() | expected.as_accounting() == totals.as_dict(),
            }
            if reports:
                written = sum(1 for _ in open(extra["duplicates"].removeprefix("file:"), "rb"))
                runs[name]["reports"] = written
                runs[name]["reports_match"] = written == totals.duplicates
    figures = {
        "runs": runs,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "rss_before_run_mb": round(rss_before / 1024),
    }
    if len(runs) == 2:
        off, on = (r["events_per_s"] for r in runs.values())
        figures["cost_of_duplicates_output"] = f"{1 - on / off:.0%}"
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
