"""Fault injection, shared by every fault test and ``bench/eos_faults.py``.

* ``kill_9``: SIGKILL to a process or its whole process group, reaped;
* ``outage``: a service (``deploy.local.services``: a Kafka broker, a redis-server) goes
  down (crash or clean stop), stays down, comes back on the same ports with its data;
* ``run_through_outage``: an in-process engine is held between two batches while a
  service it uses goes through an ``outage``, then runs to its end;
* ``child_pids`` / ``wait_gone``: the processes a killed driver leaves (its JVM).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deploy.local.services import pid_alive


def kill_9(proc: subprocess.Popen, group: bool = False, timeout: float = 30) -> int:
    """kill -9 of ``proc`` (``group``: of its whole process group, e.g. a driver and the JVM it
    launched); returns its exit status once reaped."""
    if group:
        os.killpg(proc.pid, signal.SIGKILL)
    else:
        proc.send_signal(signal.SIGKILL)
    return proc.wait(timeout)


def outage(
    service: Any,
    *,
    down_for: float = 1.0,
    crash: bool = False,
    when_down: Callable[[], None] = lambda: None,
    start_timeout: float = 120,
) -> None:
    """Take ``service`` down (``crash``: SIGKILL, else a clean stop), call ``when_down``, wait
    ``down_for`` seconds, start it again: same ports, same data."""
    if crash:
        service.kill()
    else:
        service.stop()
    when_down()
    time.sleep(down_for)
    service.start(timeout=start_timeout)


def run_through_outage(
    engine: Any, service: Any, *, after_records: int, down_for: float = 2.0, crash: bool = False, timeout: float = 180
) -> Any:
    """Run ``engine`` (``run()``, an ``on_batch(totals)`` hook) in a thread; after the first
    batch that brings ``records_in`` to ``after_records`` it waits while ``service`` goes
    through an ``outage``; returns the totals of the finished run (AssertionError if it
    does not finish within ``timeout`` seconds)."""
    held, down = threading.Event(), threading.Event()

    def on_batch(totals) -> None:
        if totals.records_in >= after_records and not held.is_set():
            held.set()
            down.wait(30)

    engine.on_batch = on_batch
    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(totals=engine.run()), daemon=True)
    runner.start()
    assert held.wait(60), f"the engine did not reach {after_records} records"
    outage(service, down_for=down_for, crash=crash, when_down=down.set)
    runner.join(timeout)
    assert "totals" in result, "the engine did not finish"
    return result["totals"]


def child_pids(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` right now."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            children.append(int(stat.parent.name))
    return children


def wait_gone(pids: list[int], timeout: float = 90) -> None:
    """Wait until ``pids`` have exited (the JVM leaves when its Python driver is gone); then kill what is left."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
        time.sleep(0.5)
    for pid in pids:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
