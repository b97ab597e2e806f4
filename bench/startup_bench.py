"""Start-up of a local Spark driver with and without its class-data archive: the wall time of a
bounded ``dedup run --engine spark`` over a small generated JSONL stream, from the command to its
exit, rounds interleaved (archive on, off, on, off, …) so both see the same machine.

    .venv/bin/python bench/startup_bench.py [--rounds 4] [--events 200] [--json FILE]

The archive is the one ``scripts/bootstrap`` writes (``python -m app.spark_class_archive``); a
round without it runs with ``STREAMDEDUP_CLASS_ARCHIVE=off``. Each run is a process of its own,
started as the tests start one (``tests.adapters.spark.processes.DedupProcess``: ``local[2]``, a
fresh checkpoint, the stream in one file), and every run's counts must equal the generator's. Prints every round, the medians, their ratio and the machine's load
average at the end (nothing else should run meanwhile).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from adapters.spark.runtime import ARCHIVE_MODE, local_class_archive  # noqa: E402
from app import StreamSpec, generate  # noqa: E402
from tests.adapters.spark.processes import DedupProcess, FileFeed  # noqa: E402

COUNTS = ("in", "out", "duplicates", "dead_lettered")


def run_once(work: Path, records: list[bytes], archive: bool, run: int) -> tuple[float, dict]:
    """One bounded run over ``records``; its wall time (command to exit) and its summary."""
    dedup = DedupProcess(work / f"run-{run}", env={} if archive else {ARCHIVE_MODE: "off"})
    FileFeed(dedup.root / "in", [records]).rest()
    started = time.monotonic()
    code = dedup.start(bounded=True).wait()
    took = time.monotonic() - started
    if code != 0:
        raise SystemExit(f"run {run} failed ({code}): {dedup.output()[-2000:]}")
    return took, dedup.summary()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="pairs of runs, one with and one without (default 4)")
    parser.add_argument("--events", type=int, default=200, help="unique events in the stream (default 200)")
    parser.add_argument("--json", type=Path, help="write the figures to this file too")
    args = parser.parse_args()
    archive = local_class_archive()
    if not archive.is_file():
        raise SystemExit(
            f"no class-data archive at {archive}: run scripts/bootstrap (or python -m app.spark_class_archive)"
        )
    records, expected = generate(StreamSpec(uniques=args.events, seed=5))
    want = {k: expected.as_accounting()[k] for k in COUNTS}
    times: dict[str, list[float]] = {"with": [], "without": []}
    with tempfile.TemporaryDirectory(prefix="startup-bench-") as work:
        print(f"{len(records)} records; archive {archive}")
        for round_ in range(args.rounds):
            for name in ("with", "without"):
                took, summary = run_once(
                    Path(work), records, name == "with", len(times["with"]) + len(times["without"])
                )
                got = {k: summary[k] for k in COUNTS}
                if got != want:
                    raise SystemExit(f"round {round_ + 1} {name} the archive: counts {got}, expected {want}")
                times[name].append(took)
                print(f"round {round_ + 1}  {name:>7} the archive  {took:6.2f} s")
                time.sleep(2)  # the previous driver's JVM exits after its Python process
    medians = {name: statistics.median(values) for name, values in times.items()}
    figures = {
        "records": len(records),
        "seconds": times,
        "median_with": round(medians["with"], 2),
        "median_without": round(medians["without"], 2),
        "ratio": round(medians["with"] / medians["without"], 3),
        "load_average": os.getloadavg(),
    }
    print(
        f"median {medians['with']:.2f} s with the archive, {medians['without']:.2f} s without "
        f"(ratio {figures['ratio']:.2f}); load average {figures['load_average'][0]:.2f}"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
