"""What the Spark engine's state costs per key on disk: checkpoint bytes per million keys.

    .venv/bin/python bench/state_size_bench.py [--keys 500000] [--files 5] [--json FILE]

Writes ``--files`` JSONL files holding ``--keys`` events in all, every event a new key (type
WEB, window 10 min, event times one second apart so none expires), and runs the Spark engine
over them as ``dedup run --engine spark`` builds it (``build_spark_engine``, ``local[2]``, two
state partitions, RocksDB with changelog checkpointing, the engine's defaults), one file a
micro-batch, from a new local checkpoint. Then it prints the state rows, the bytes of the
checkpoint's ``state/`` directory and of the whole checkpoint, and both per million keys; and
per key, what the changelogs took (what a micro-batch uploads for a new key) and what RocksDB's
own files (SSTs) hold, from the snapshot the run made after its first batch.

Run it in two checkouts to compare state formats (e.g. the commit before a format change
and the one after): the script only uses ``build_spark_engine`` and ``Checkpoint``, which both
have. Figures: docs/design/state.md, "What a key costs".
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

T0 = 1_700_000_000


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--keys", type=int, default=500_000)
    p.add_argument("--files", type=int, default=5)
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args()

    from adapters.spark import build_spark_engine
    from adapters.spark.checkpoint import Checkpoint
    from adapters.spark.runtime import build_session
    from domain import Policies, RuleSet

    with tempfile.TemporaryDirectory(prefix="state-size-") as work:
        root = Path(work)
        (root / "in").mkdir()
        per_file = args.keys // args.files
        for f in range(args.files):
            with open(root / "in" / f"{f:04d}.jsonl", "w") as out:
                for i in range(f * per_file, (f + 1) * per_file):
                    out.write(
                        json.dumps(
                            {"id": f"e{i}", "uniqueValue": f"{i:016x}-key", "type": "WEB", "timestamp": T0 + i // 1000}
                        )
                        + "\n"
                    )
        spark = build_session("local[2]", "state-size-bench")
        spark.sparkContext.setLogLevel("ERROR")
        engine = build_spark_engine(
            RuleSet(),
            Policies(),
            source=f"jsonl:{root / 'in'}?maxFilesPerTrigger=1",
            sink=str(root / "out"),
            dead_letters=str(root / "dlq"),
            checkpoint=str(root / "checkpoint"),
            master="local[2]",
            spark=spark,
            shuffle_partitions=2,
        )
        started = time.perf_counter()
        counts = engine.run(available_now=True).as_dict()
        seconds = time.perf_counter() - started
        checkpoint = Checkpoint.at(str(root / "checkpoint"))
        state, total = checkpoint.state_bytes(), checkpoint.total_bytes()
        changelogs, snapshot = _state_files(root / "checkpoint" / "state", per_file)
        figures = {
            "keys": counts["out"],
            "seconds": round(seconds, 1),
            "state_bytes": state,
            "checkpoint_bytes": total,
            "state_bytes_per_million_keys": round(state / counts["out"] * 1e6),
            "checkpoint_bytes_per_million_keys": round(total / counts["out"] * 1e6),
            # what each new key adds to the micro-batches' changelogs (what a batch uploads)
            "changelog_bytes_per_key": round(changelogs / counts["out"], 1),
            # RocksDB's own files (SSTs) per key held, from the snapshot the run made (what the
            # executors' local disks and a restart's download hold per live key)
            "snapshot_bytes_per_key": snapshot,
        }
        spark.stop()
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


def _state_files(state: Path, keys_per_batch: int) -> tuple[int, float | None]:
    """The changelogs' bytes, and the snapshot's SST bytes per key it holds: RocksDB snapshots
    version N (``N.zip`` beside its ``SSTs/``) in the background; a run of a few batches makes
    one, after its first batch, holding that batch's keys. None when there is not exactly one."""
    changelogs = sum(f.stat().st_size for f in state.rglob("*.changelog"))
    versions = {int(f.stem) for f in state.rglob("[0-9]*.zip")}
    if len(versions) != 1:
        return changelogs, None
    sst = sum(f.stat().st_size for f in state.rglob("*.sst"))
    return changelogs, round(sst / (versions.pop() * keys_per_batch), 1)


if __name__ == "__main__":
    main()
