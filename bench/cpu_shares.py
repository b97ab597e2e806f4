"""Where a bench's CPU goes: every process it runs, and the Spark JVM's threads by kind.

On a machine of two cores the engine, the broker, the load generator and the output reader
share the cores, so a latency or throughput figure means little without each one's share
(docs/development/benchmarks.md). ``CpuShares`` samples ``/proc`` (user plus system time) at
the start and the end of a window and gives each process's share of all the machine's cores;
the machine's busy time not in a listed process is ``other processes``. Given a JVM, it also
splits that JVM's time by thread kind (``JVM_THREAD_KINDS``): the JIT compilers (HotSpot's C2
and C1 threads), the garbage collector, Spark's executor tasks, the stream execution thread
(the driver's micro-batch loop) and the rest, each as a share of the machine too.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

__all__ = [
    "JVM_THREAD_KINDS",
    "CpuShares",
    "CpuTimeline",
    "jvm_threads_cpu",
    "process_cpu",
    "spark_jvm_under",
    "threads_cpu",
]

# A JVM thread's kind by its name as the kernel keeps it (``/proc/PID/task/TID/comm``: the
# first 15 characters of the Java thread's name). The first pattern that matches wins.
JVM_THREAD_KINDS = (
    ("JIT compiler C2", re.compile(r"^C2 Compiler")),
    ("JIT compiler C1", re.compile(r"^C1 Compiler")),
    ("garbage collector", re.compile(r"^(GC Thread|G1 |VM Thread)")),
    ("executor tasks", re.compile(r"^Executor task")),
    ("stream execution", re.compile(r"^stream exec")),
)
OTHER_THREADS = "other threads"


class CpuShares:
    """CPU time of the listed processes over a window, as a share of the machine's cores.

    ``processes``: name -> pid (None when not known: 0 % then); ``threads``: name -> thread
    ident within this process (``threading.Thread.ident``), shown beside the processes; ``jvm``:
    the pid of a JVM whose threads are split by kind (it may be one of ``processes``).
    ``shares`` gives every name's % of the machine, ``other processes`` (busy time outside the
    listed processes), ``idle``, and, with a JVM, one ``jvm: KIND`` entry per thread kind.
    """

    def __init__(self, processes: dict[str, int | None], threads: dict[str, int] | None = None, jvm: int | None = None):
        self.pids, self.threads, self.jvm = processes, threads or {}, jvm
        self.cores = os.cpu_count() or 1

    def sample(self) -> tuple[float, dict[str, float]]:
        times = {name: process_cpu(pid) for name, pid in self.pids.items()}
        for name, ident in self.threads.items():
            try:
                times[name] = time.clock_gettime(time.pthread_getcpuclockid(ident))
            except (OSError, OverflowError):
                times[name] = 0.0
        if self.jvm is not None:
            times.update({f"jvm: {kind}": seconds for kind, seconds in jvm_threads_cpu(self.jvm).items()})
        return time.monotonic(), {**times, "machine busy": _machine_busy()}

    def shares(self, before, after) -> dict[str, float]:
        """Each one's % of the machine (all cores) between two samples."""
        wall = max(after[0] - before[0], 1e-9) * self.cores
        used = {name: after[1].get(name, 0.0) - before[1].get(name, 0.0) for name in after[1]}
        listed = sum(v for name, v in used.items() if name in self.pids)
        shares = {name: round(100 * v / wall, 1) for name, v in used.items() if name != "machine busy"}
        shares["other processes"] = round(100 * max(0.0, used["machine busy"] - listed) / wall, 1)
        shares["idle"] = round(100 - 100 * used["machine busy"] / wall, 1)
        return shares


class CpuTimeline:
    """``CpuShares`` over consecutive windows of ``every`` seconds: ``tick`` (called often, from
    a loop that runs anyway) closes a window once it is due; ``windows`` holds each closed
    window's shares with ``from_s``, its start in seconds from the first sample."""

    def __init__(self, cpu: CpuShares, every: float):
        self.cpu, self.every = cpu, every
        self.first = self.last = cpu.sample()
        self.windows: list[dict[str, float]] = []

    def tick(self) -> None:
        if time.monotonic() - self.last[0] >= self.every:
            now = self.cpu.sample()
            self.windows.append({"from_s": round(self.last[0] - self.first[0], 1), **self.cpu.shares(self.last, now)})
            self.last = now


def process_cpu(pid: int | None) -> float:
    """User plus system CPU seconds of ``pid`` (all its threads); 0 when unknown or gone."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def jvm_threads_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of a JVM's threads by kind (``JVM_THREAD_KINDS``, else ``other threads``)."""
    return threads_cpu(pid, JVM_THREAD_KINDS, OTHER_THREADS)


def threads_cpu(pid: int, kinds, other: str) -> dict[str, float]:
    """CPU seconds of a process's threads, summed by kind: ``kinds`` is a sequence of (kind,
    compiled pattern) matched against each thread's name as the kernel keeps it (its first 15
    characters), the first match winning, else ``other``. Threads that ended are not counted
    (a JVM's named threads live long)."""
    totals = {kind: 0.0 for kind, _ in kinds} | {other: 0.0}
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            stat = task.read_text()
        except OSError:
            continue
        name, _, rest = stat[stat.index("(") + 1 :].rpartition(")")
        fields = rest.split()
        kind = next((k for k, pattern in kinds if pattern.match(name)), other)
        totals[kind] += (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    return totals


def spark_jvm_under(pid: int) -> int | None:
    """The Spark JVM (``SparkSubmit``) among ``pid``'s descendants, or None (not started yet, or
    an engine without one)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            parent = int(Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    todo = list(children.get(pid, []))
    while todo:
        child = todo.pop()
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"org.apache.spark.deploy.SparkSubmit" in command:
            return child
        todo.extend(children.get(child, []))
    return None


def _machine_busy() -> float:
    """CPU seconds the whole machine spent busy since boot (``/proc/stat``: all but idle and iowait)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")
