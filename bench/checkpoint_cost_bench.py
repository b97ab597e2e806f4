"""What a checkpoint on HDFS costs per micro-batch, and to reload, as the state grows: the
RocksDB with changelog checkpointing (the in-memory, HDFS-backed provider it was compared
with went with state format 4: Spark runs the operator's ``transformWithState`` on RocksDB only;
the comparison's figures, from before, are in docs/operations/checkpoints.md).

    .venv/bin/python bench/checkpoint_cost_bench.py --batch 1000000 --steps 10

Starts a single-node HDFS (``deploy/local/services``, ``HdfsCluster``), writes ``--steps``
JSONL files of ``--batch`` records each, every record a new key (type WEB, all at the same
event time, so the watermark never evicts one), and for each ``--providers`` runs the Spark
engine (``build_spark_engine``, as ``dedup run --engine spark`` builds it; ``local[2]``, 2 state
partitions) over them, one file a micro-batch, with its checkpoint on ``hdfs://``:

* ``memory``: Spark's HDFS-backed state store: the state on the JVM heap, a delta file per
  state partition every micro-batch, a full snapshot every ``minDeltasForSnapshot`` (10)
  versions, written by the maintenance thread. Flink's HashMap state backend with full
  checkpoints is the like of it.
* ``rocksdb``: RocksDB with changelog checkpointing (the engine's default): a changelog per
  state partition every micro-batch, a RocksDB snapshot (its new SST files) every 10 versions,
  uploaded in the background. Flink's RocksDB backend with incremental checkpoints is the like.

Per micro-batch: the bytes that appeared in the checkpoint's state directory since the
micro-batch before (the engine's ``checkpoint_bytes_written`` counter,
``adapters.spark.checkpoint._state_files``: one recursive listing through Hadoop's FileSystem API), the
state directory's size, Spark's ``durationMs`` (``walCommit``: the offsets file,
``commitOffsets``: the commit file, ``addBatch``: the batch's tasks, which commit the state
stores) and the state operator's ``commitTimeMs`` (summed over its tasks). Then the restart:
a new driver (a new process, so nothing of the state is left in memory) runs the engine on a
file of ``--restart-records`` records (half of them repeats of keys in the state); the first
micro-batch's ``addBatch`` is the state's reload plus judging those few records.

Each provider and each restart runs in a process of its own (a fresh JVM: the memory
provider's maps are not left on the heap of the next run). The driver is the executor
(``local[2]``), ``--driver-memory`` for both. Figures go to ``--out`` (JSON) and a PNG plot
(``--plot``, by default beside ``--out``); a table is printed, and the same as the Markdown table
of the docs with the lines that have the site chart it (``--replot JSON`` prints them again). ``--conf KEY=VALUE``
sets a Spark setting for every provider, e.g. ``spark.sql.streaming.stateStore.minDeltasForSnapshot=3``
and ``…maintenanceInterval=10s`` to see snapshots within a short run (with Spark's 10 and 60 s,
10 micro-batches make none); ``--replot JSON`` draws the plot and the table again from a run's figures.
Results and commands of a run: docs/operations/checkpoints.md, "What a checkpoint costs, and the state provider".
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src"), str(ROOT / "bench")]

T0 = 1_700_000_000
# the delay a closing HDFS client waits before asking the NameNode again (docs/operations/checkpoints.md,
# "Checkpoints on HDFS"): 400 ms by default, which would dominate every small file's commit
HDFS_CLIENT = {
    "spark.hadoop.dfs.replication": "1",
    "spark.hadoop.dfs.client.block.write.locateFollowingBlock.initial.delay.ms": "50",
    "spark.hadoop.dfs.client.block.write.locateFollowingBlock.retries": "10",
}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=1_000_000, help="new keys a micro-batch")
    p.add_argument("--steps", type=int, default=10, help="micro-batches (final state: batch x steps keys)")
    p.add_argument("--providers", default="rocksdb")
    p.add_argument("--restart-records", type=int, default=10)
    p.add_argument("--driver-memory", default="8g")
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting over the engine's defaults, for every provider (repeatable)",
    )
    p.add_argument("--hdfs", help="a running HDFS's hdfs://HOST:PORT (default: start one)")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "checkpoint_cost.json")
    p.add_argument("--plot", type=Path, default=ROOT / "bench" / "results" / "checkpoint_cost.png")
    p.add_argument("--replot", type=Path, metavar="JSON", help="only draw --plot from the figures of an earlier run")
    p.add_argument("--phase", choices=("grow", "restart"), help=argparse.SUPPRESS)  # a child process's part
    p.add_argument("--provider", help=argparse.SUPPRESS)
    p.add_argument("--input", help=argparse.SUPPRESS)
    p.add_argument("--checkpoint", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.phase:
        print(json.dumps(run_phase(args)))
        return
    if args.replot:
        results = json.loads(args.replot.read_text())["results"]
        plot(results, args.plot)
        print(markdown(results))
        return
    from deploy.local import services as local_services

    with tempfile.TemporaryDirectory(prefix="checkpoint-cost-") as workdir:
        work = Path(workdir)
        hdfs = None if args.hdfs else local_services.HdfsCluster(work / "hdfs").start()
        try:
            uri = args.hdfs or hdfs.uri
            results = [measure(provider, uri, work, args) for provider in args.providers.split(",")]
        finally:
            if hdfs is not None:
                hdfs.stop()
    report(results, args)


def measure(provider: str, hdfs: str, work: Path, args) -> dict:
    """Grows the state of a new checkpoint over the batches, then restarts on it."""
    grow_input = write_inputs(work, args)
    checkpoint = f"{hdfs}/bench/{provider}-{int(time.time())}"
    print(f"{provider}: growing the state to {args.batch * args.steps:,} keys ...", flush=True)
    grown = child("grow", provider, grow_input, checkpoint, work / provider, args)
    for b in grown["batches"]:
        print(
            f"  batch {b['batch']:>2}: {int(b['state_rows']):>12,} keys  written {b['written'] / 2**20:8.1f} MB  "
            f"state {b['state_bytes'] / 2**20:8.1f} MB  batch {b['ms'] / 1000:6.1f} s  "
            f"walCommit {b['walCommit']} ms  commitOffsets {b['commitOffsets']} ms  "
            f"state commit {b['commitTimeMs']} ms",
            flush=True,
        )
    restart_file = write_restart_file(grow_input, args)
    try:  # the same source, sink and checkpoint: the engine's guard refuses another source
        restarted = child("restart", provider, grow_input, checkpoint, work / provider, args)
    finally:
        restart_file.unlink()
    print(
        f"  restart: first micro-batch {restarted['ms']:,} ms, addBatch {restarted['addBatch']:,} ms, "
        f"driver up in {restarted['session_s']} s",
        flush=True,
    )
    return {"provider": provider, **grown, "restart": restarted}


def write_inputs(work: Path, args) -> Path:
    """One JSONL file a micro-batch, every record a new WEB key at ``T0``; written once for all
    providers."""
    grow = work / "grow"
    if grow.exists():
        return grow
    grow.mkdir()
    for step in range(args.steps):
        first = step * args.batch
        lines = (
            f'{{"id":"e{i}","uniqueValue":"k{i}","type":"WEB","timestamp":{T0}}}\n'
            for i in range(first, first + args.batch)
        )
        write_file(grow / f"{step:04d}.jsonl", "".join(lines), step)
    return grow


def write_restart_file(grow: Path, args) -> Path:
    """The restart's micro-batch, after the others: half repeats of the first keys, half new."""
    half, total = args.restart_records // 2, args.batch * args.steps
    keys = [*range(half), *range(total, total + args.restart_records - half)]
    path = grow / f"{args.steps:04d}.jsonl"
    write_file(
        path,
        "".join(f'{{"id":"r{i}","uniqueValue":"k{i}","type":"WEB","timestamp":{T0 + 1}}}\n' for i in keys),
        args.steps,
    )
    return path


def write_file(path: Path, text: str, order: int) -> None:
    path.write_text(text)
    os.utime(path, (1_000_000 + order, 1_000_000 + order))  # the file source reads them in this order


def child(phase: str, provider: str, input_dir: Path, checkpoint: str, work: Path, args) -> dict:
    """Runs one phase in a process of its own (a fresh JVM); returns its figures."""
    work.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        __file__,
        "--phase",
        phase,
        "--provider",
        provider,
        "--input",
        str(input_dir),
        "--checkpoint",
        checkpoint,
        "--driver-memory",
        args.driver_memory,
        "--out",
        str(work / "unused"),
        *(f"--conf={setting}" for setting in args.conf),
    ]
    done = subprocess.run(command, cwd=work, stdout=subprocess.PIPE, check=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_phase(args) -> dict:
    """In the child: the engine over ``--input`` on ``--checkpoint``, one file a micro-batch."""
    import contextlib

    from adapters.spark import build_spark_engine
    from adapters.spark.runtime import build_session, stop_session
    from domain import Policies, RuleSet
    from spark_bench_report import Sampler

    started = time.perf_counter()
    spark = build_session(
        "local[2]",
        f"checkpoint-cost-{args.provider}",
        {
            "spark.driver.memory": args.driver_memory,
            "spark.sql.streaming.numRecentProgressUpdates": "1000",
            **HDFS_CLIENT,
            **dict(setting.split("=", 1) for setting in args.conf),
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    session_s = round(time.perf_counter() - started, 1)
    written = CheckpointBytes()
    engine = build_spark_engine(
        RuleSet(),
        Policies(),
        source=f"jsonl:{args.input}?maxFilesPerTrigger=1",
        sink=str(Path.cwd() / "out"),
        dead_letters=str(Path.cwd() / "dlq"),
        checkpoint=args.checkpoint,
        spark=spark,
        metrics=written,
        state_provider=args.provider,
        available_now=True,
    )
    with contextlib.redirect_stdout(sys.stderr), Sampler(spark) as sampler:
        engine.run()
    batches = [batch_figures(p, w) for p, w in zip(sampler.progress(), written.per_batch)]
    peak_mb = max((s["memory_mb"] for s in sampler.samples), default=0)
    stop_session(spark)  # the state stores closed before the JVM exits (their RocksDB threads crashed it)
    if args.phase == "restart":
        return {**batches[0], "session_s": session_s, "peak_memory_mb": peak_mb}
    return {"batches": batches, "peak_memory_mb": peak_mb}


def batch_figures(progress: dict, look: tuple[int, float]) -> dict:
    state = (progress.get("stateOperators") or [{}])[0]
    durations = progress["durationMs"]
    return {
        "batch": progress["batchId"],
        "rows": progress["numInputRows"],
        "written": look[0],
        "state_bytes": look[1],
        "state_rows": look[2],
        "ms": durations.get("triggerExecution", 0),
        **{k: durations.get(k, 0) for k in ("addBatch", "walCommit", "commitOffsets", "latestOffset")},
        "commitTimeMs": state.get("commitTimeMs", 0),
    }


class CheckpointBytes:
    """A ``domain._ports.Metrics`` keeping, per micro-batch, the engine's ``checkpoint_bytes_written``
    with the ``state_bytes`` and ``state_rows`` gauges of the same micro-batch."""

    def __init__(self):
        self.per_batch: list[tuple[int, float, float]] = []
        self.gauges: dict[str, float] = {}

    def increment(self, name: str, amount: int = 1, **labels: str) -> None:
        if name == "checkpoint_bytes_written":
            self.per_batch.append(
                (int(amount), self.gauges.get("state_bytes", 0.0), self.gauges.get("state_rows", 0.0))
            )

    def gauge(self, name: str, value: float, **labels: str) -> None:
        self.gauges[name] = value

    def observe(self, name: str, value: float, **labels: str) -> None:
        pass


def report(results: list[dict], args) -> None:
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "results": results}, indent=2))
    print(
        f"\n{'provider':>8} {'keys':>11} {'written MB':>10} {'state MB':>9} {'batch s':>8} "
        f"{'walCommit':>9} {'commitOffsets':>13} {'state commit':>12}"
    )
    for r in results:
        for b in r["batches"]:
            print(
                f"{r['provider']:>8} {int(b['state_rows']):>11,} {b['written'] / 2**20:>10.1f} "
                f"{b['state_bytes'] / 2**20:>9.1f} {b['ms'] / 1000:>8.1f} {b['walCommit']:>9} "
                f"{b['commitOffsets']:>13} {b['commitTimeMs']:>12}"
            )
        print(
            f"{r['provider']:>8} restart at {int(r['batches'][-1]['state_rows']):,} keys: addBatch "
            f"{r['restart']['addBatch']:,} ms, peak memory {r['peak_memory_mb']:,} MB"
        )
    plot(results, args.plot)
    print(f"\n{markdown(results)}\n")
    print(f"figures: {args.out}\nplot:    {args.plot}")


def markdown(results: list[dict]) -> str:
    """Per micro-batch, each provider's bytes written, state in the checkpoint and commit time, as
    the docs' Markdown table, and under it the lines that have the site chart the state's growth
    and the bytes written (``scripts/mkdocs_hooks.py``)."""
    mb = 2**20
    header = ["keys after the batch"]
    for r in results:
        p = r["provider"]
        header += [f"{p}: written", f"{p}: state in checkpoint", f"{p}: commit (wal + offsets + state)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for i, first in enumerate(results[0]["batches"]):
        cells = [f"{first['state_rows'] / 1e6:g} M"]
        for r in results:
            b = r["batches"][i]
            cells += [
                f"{b['written'] / mb:.1f} MB",
                f"{b['state_bytes'] / mb:.1f} MB",
                f"{b['walCommit']} + {b['commitOffsets']} + {b['commitTimeMs']} ms",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for r in results:
        p = r["provider"]
        lines += [
            f"<!-- plot: line | {p} state: MB of state in the checkpoint | keys after the batch | {p}: state in checkpoint | MB -->",
            f"<!-- plot: line | {p} state: MB written per micro-batch | keys after the batch | {p}: written | MB -->",
        ]
    return "\n".join(lines)


def plot(results: list[dict], path: Path) -> None:
    """Per micro-batch against the state's keys: bytes written, the state's size in the
    checkpoint, the commit time; and the restart."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 6.4))
    panels = [
        (axes[0][0], "MB written to the checkpoint per micro-batch", lambda b: b["written"] / 2**20),
        (axes[0][1], "MB of state in the checkpoint", lambda b: b["state_bytes"] / 2**20),
        (
            axes[1][0],
            "commit ms per micro-batch\n(walCommit + commitOffsets + state commitTimeMs)",
            lambda b: b["walCommit"] + b["commitOffsets"] + b["commitTimeMs"],
        ),
    ]
    for ax, title, figure in panels:
        for r in results:
            ax.plot(
                [b["state_rows"] / 1e6 for b in r["batches"]],
                [figure(b) for b in r["batches"]],
                "o-",
                label=r["provider"],
            )
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("keys in the state (millions)", fontsize=8)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    ax = axes[1][1]
    ax.bar(
        [r["provider"] for r in results],
        [r["restart"]["addBatch"] / 1000 for r in results],
        color=[f"C{i}" for i in range(len(results))],
    )
    ax.set_title(
        f"restart at {int(results[0]['batches'][-1]['state_rows']) / 1e6:g} M keys: "
        "the first micro-batch's addBatch (s)",
        fontsize=9,
    )
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=60)


if __name__ == "__main__":
    main()
