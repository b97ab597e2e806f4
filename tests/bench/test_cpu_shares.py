"""The benches' CPU accounting (bench/cpu_shares.py) read from this machine's /proc: a busy
process's share, a JVM's threads by kind (thread names as HotSpot and Spark give them), and the
Spark JVM found among a process's descendants."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bench.cpu_shares import CpuShares, CpuTimeline, jvm_threads_cpu, spark_jvm_under

BUSY = "import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end: pass\n"


def burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_busy_process_takes_its_share_of_the_machine_and_the_rest_adds_up():
    busy = subprocess.Popen([sys.executable, "-c", BUSY.format(seconds=30)])
    try:
        cpu = CpuShares({"busy": busy.pid, "gone": None})
        before = cpu.sample()
        time.sleep(1.0)
        shares = cpu.shares(before, cpu.sample())
    finally:
        busy.kill()
        busy.wait()
    cores = os.cpu_count() or 1
    assert shares["busy"] > 40 / cores  # one core busy for most of the second
    assert shares["gone"] == 0
    assert shares["busy"] + shares["other processes"] + shares["idle"] == pytest.approx(100, abs=2)


def test_a_jvms_threads_are_summed_by_their_kind():
    """Threads named as HotSpot's C2 compiler and Spark's executor tasks are (the kernel keeps a
    thread's first 15 characters); a thread that ended is no longer counted."""
    named, done = threading.Event(), threading.Event()

    def thread(comm: str, seconds: float, wait: bool):
        Path(f"/proc/self/task/{threading.get_native_id()}/comm").write_text(comm)
        burn(seconds)
        named.set()
        if wait:
            done.wait()

    ended = threading.Thread(target=thread, args=("Executor task i", 0.1, False))
    ended.start()
    ended.join()
    named.clear()
    compiler = threading.Thread(target=thread, args=("C2 CompilerThre", 0.3, True))
    compiler.start()
    named.wait()
    try:
        kinds = jvm_threads_cpu(os.getpid())
    finally:
        done.set()
        compiler.join()
    assert kinds["JIT compiler C2"] >= 0.25
    assert kinds["executor tasks"] == 0
    assert kinds["other threads"] > 0  # the test's own thread


def test_the_spark_jvm_is_found_among_descendants_and_not_elsewhere(tmp_path):
    child = tmp_path / "child.py"
    child.write_text(
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)', 'org.apache.spark.deploy.SparkSubmit'])\n"
        "time.sleep(30)\n"
    )
    parent = subprocess.Popen([sys.executable, str(child)], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while (jvm := spark_jvm_under(parent.pid)) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert jvm is not None and jvm != parent.pid
        assert b"SparkSubmit" in Path(f"/proc/{jvm}/cmdline").read_bytes()
        assert spark_jvm_under(jvm) is None
    finally:
        os.killpg(parent.pid, 9)
        parent.wait()


def test_a_timeline_closes_a_window_each_time_one_is_due():
    timeline = CpuTimeline(CpuShares({"this process": os.getpid()}), every=0.2)
    end = time.monotonic() + 0.75
    while time.monotonic() < end:
        burn(0.01)
        timeline.tick()
    starts = [w["from_s"] for w in timeline.windows]
    assert len(starts) == 3
    assert starts == sorted(starts) and starts[0] == 0
    assert all(w["this process"] > 0 for w in timeline.windows)
