"""Figures of one Spark benchmark run: memory sampled while it runs, per-batch progress, a plot.

``Sampler`` samples every half second, in a thread, the memory of the driver JVM plus its
child processes plus this Python process, and the JVM heap; with ``executors`` (a function
returning the executor JVMs' pids of a standalone cluster), each executor's too, with its
child processes (its Python workers), as ``executors_mb`` {pid: MB}. Memory is the
proportional set size (PSS): pages shared between processes count once, so a child the JVM
forks (for a moment a copy of it) does not double the figure as summed RSS would. It also keeps every
streaming query it sees, so their progress (``recentProgress``) can be read after they stopped.
``summarize`` turns that into the figures the benchmarks report, ``plot`` into a PNG.
"""

from __future__ import annotations

import functools
import json
import operator
import os
import re
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path

from cpu_shares import threads_cpu


class Sampler:
    def __init__(self, spark, every: float = 0.5, executors: Callable[[], list[int]] | None = None):
        self.spark, self.every, self.executors = spark, every, executors
        self.jvm_pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())
        self.samples: list[dict] = []
        self.queries: dict[str, object] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def sample(self) -> None:
        for query in self.spark.streams.active:
            self.queries.setdefault(str(query.id), query)
        runtime = self.spark._jvm.java.lang.Runtime.getRuntime()
        pids = [self.jvm_pid, os.getpid(), *children(self.jvm_pid)]
        self.samples.append(
            {
                "t": time.time(),
                "memory_mb": round(sum(map(pss_mb, pids))),
                "heap_used_mb": round((runtime.totalMemory() - runtime.freeMemory()) / 2**20),
                "heap_committed_mb": round(runtime.totalMemory() / 2**20),
                "executors_mb": {
                    pid: round(sum(map(pss_mb, [pid, *children(pid)])))
                    for pid in (self.executors() if self.executors else [])
                },
            }
        )

    def progress(self) -> list[dict]:
        events = [json.loads(p.json) for q in self.queries.values() for p in q.recentProgress]
        return sorted(events, key=lambda p: (p["timestamp"], p["batchId"]))


def pss_mb(pid: int) -> float:
    """The process's proportional set size; its RSS where ``smaps_rollup`` is missing (Linux < 4.14)."""
    for path, field in ((f"/proc/{pid}/smaps_rollup", "Pss:"), (f"/proc/{pid}/status", "VmRSS:")):
        try:
            for line in Path(path).read_text().splitlines():
                if line.startswith(field):
                    return int(line.split()[1]) / 1024
        except OSError:
            continue
    return 0.0


THREAD_GROUPS = (
    ("tasks", re.compile("^Executor task")),
    ("compaction", re.compile("^rocksdb:low")),
    ("flush", re.compile("^rocksdb:high")),
)


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds the process's threads have used, by group: Spark's task threads, RocksDB's
    compaction (``rocksdb:low``) and flush (``rocksdb:high``) threads, and the others."""
    return {group: round(seconds, 2) for group, seconds in threads_cpu(pid, THREAD_GROUPS, "other").items()}


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(c) for c in task.read_text().split()]
        except OSError:
            continue
    return found


def summarize(mode: str, sampler: Sampler, started: float, ended: float, warmup: int) -> dict:
    batches = [_batch(p) for p in sampler.progress() if p["numInputRows"] > 0]
    steady = batches[warmup:] if len(batches) > warmup else batches
    durations = sorted(b["ms"] for b in steady) or [0]
    samples = [s for s in sampler.samples if started <= s["t"] <= ended + 1]
    rows = sum(b["rows"] for b in batches)
    last = batches[-1] if batches else {"state_rows": 0, "state_bytes": 0}
    return {
        "mode": mode,
        "events": rows,
        "seconds": round(ended - started, 1),
        "batches_count": len(batches),
        "events_per_s": round(sum(b["rows"] for b in steady) / max(sum(durations), 1) * 1000),
        "events_per_s_overall": round(rows / max(ended - started, 1e-9)),
        "batch_ms_p50": statistics.median(durations),
        "batch_ms_p99": durations[min(len(durations) - 1, int(0.99 * len(durations)))],
        "state_rows": last["state_rows"],
        "state_bytes": last["state_bytes"],
        "peak_memory_mb": max((s["memory_mb"] for s in samples), default=0),
        "peak_heap_used_mb": max((s["heap_used_mb"] for s in samples), default=0),
        "peak_executor_mb": peak_per_executor(samples),
        "started": started,
        "batches": batches,
        "samples": samples,
    }


def peak_per_executor(samples: list[dict]) -> dict[str, int]:
    """Executor pid -> its peak PSS (MB, with its Python workers) over ``samples``; {} in local mode."""
    peaks: dict[str, int] = {}
    for sample in samples:
        for pid, mb in sample.get("executors_mb", {}).items():
            peaks[str(pid)] = max(peaks.get(str(pid), 0), mb)
    return peaks


def _batch(p: dict) -> dict:
    state = p["stateOperators"][0] if p.get("stateOperators") else {}
    custom = state.get("customMetrics", {})
    return {
        "batch": p["batchId"],
        "start": p["timestamp"],
        "rows": p["numInputRows"],
        "ms": p["durationMs"].get("triggerExecution", 0),
        "durations": p["durationMs"],
        "state_rows": state.get("numRowsTotal", 0),
        "state_bytes": max(state.get("memoryUsedBytes", 0), custom.get("rocksdbPinnedBlocksMemoryUsage", 0)),
        "state_ms": {k: state[k] for k in ("allUpdatesTimeMs", "allRemovalsTimeMs", "commitTimeMs") if k in state},
        "rocksdb": {k: v for k, v in custom.items() if k.startswith("rocksdb")},
        "observed": p.get("observedMetrics", {}),
    }


def plot(results: list[dict], path: Path) -> None:
    """Rate, batch duration, state rows and memory over each mode's run time."""
    import matplotlib

    matplotlib.use("Agg")
    from datetime import datetime

    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(13, 8))
    for r in results:
        ends = [
            datetime.fromisoformat(b["start"].replace("Z", "+00:00")).timestamp() - r["started"] + b["ms"] / 1000
            for b in r["batches"]
        ]
        axes[0][0].plot(ends, [b["rows"] / max(b["ms"], 1) * 1000 for b in r["batches"]], "o-", label=r["mode"])
        axes[0][1].plot(ends, [b["ms"] / 1000 for b in r["batches"]], "o-", label=r["mode"])
        axes[1][0].plot(ends, [b["state_rows"] / 1e6 for b in r["batches"]], "o-", label=r["mode"])
        times = [s["t"] - r["started"] for s in r["samples"]]
        axes[1][1].plot(times, [s["memory_mb"] for s in r["samples"]], label=f"{r['mode']} memory (PSS, JVM + Python)")
        axes[1][1].plot(times, [s["heap_used_mb"] for s in r["samples"]], ":", label=f"{r['mode']} JVM heap used")
    titles = ["events/s per micro-batch", "micro-batch duration (s)", "state rows (millions)", "memory (MB)"]
    for ax, title in zip(functools.reduce(operator.iadd, axes.tolist(), []), titles):
        ax.set_title(title)
        ax.set_xlabel("seconds since the mode started")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
