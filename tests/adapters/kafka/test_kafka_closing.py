"""A stuck kafka engine's close is bounded, also when the close holds the GIL.

After a broker restart librdkafka can stop answering (``ProducerStuck``); closing the clients
then blocked a CI run's process for good: a thread inside ``Consumer.close`` kept the GIL
(confluent-kafka's rebalance callback asks librdkafka to drop the assignment without releasing
it), so the main thread never ran again. Here a client's ``close`` blocks in C the same way
(``ctypes.PyDLL``: a C call that keeps the GIL), in a process of its own: the process must end
by itself with status 1 and every thread's stack on stderr, so that its supervisor starts it
again. A close that blocks without the GIL is left after the timeout and the process goes on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from adapters.kafka import STUCK_EXIT_MARGIN

ROOT = Path(__file__).resolve().parents[3]
STUCK_TIMEOUT = 1.0

CHILD = """
import ctypes, logging, sys, time
from types import SimpleNamespace
from adapters.kafka import KafkaEngine

logging.basicConfig(level=logging.INFO)


class StuckProducer:  # librdkafka stopped answering: never flushed nor closed
    stuck = True

    def close(self):
        print("PRODUCER CLOSE", flush=True)


class BlockingConsumer:
    def close(self):
        print("CONSUMER CLOSE", flush=True)
        if sys.argv[1] == "holding-the-gil":
            ctypes.PyDLL(None).sleep(3600)  # PyDLL: the GIL stays held, as in confluent-kafka's callback
        time.sleep(3600)


pipeline = SimpleNamespace(committer=SimpleNamespace(abort=lambda: None))
engine = KafkaEngine(pipeline, [BlockingConsumer(), StuckProducer()], stuck_close_timeout=float(sys.argv[2]))
engine.close()
print("CLOSE RETURNED", flush=True)
time.sleep(float(sys.argv[3]))
print("STILL RUNNING", flush=True)
"""


def run_child(blocking: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    child = subprocess.run(
        [sys.executable, "-c", CHILD, blocking, str(STUCK_TIMEOUT), str(STUCK_EXIT_MARGIN + 2)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        timeout=60,
    )
    return child, time.monotonic() - started


def test_a_close_holding_the_gil_ends_the_process_with_every_threads_stack():
    child, took = run_child("holding-the-gil")
    assert child.returncode == 1, (child.returncode, child.stdout, child.stderr)
    assert child.stdout.splitlines() == ["CONSUMER CLOSE"], child.stdout
    assert "a Kafka producer is stuck" in child.stderr
    stacks = child.stderr[child.stderr.index("Timeout (") :]  # faulthandler's: every thread's stack
    assert "in close\n" in stacks and "in close_clients" in stacks, child.stderr
    assert took < STUCK_TIMEOUT + STUCK_EXIT_MARGIN + 20


def test_a_close_blocking_without_the_gil_is_left_after_the_timeout_and_the_process_goes_on():
    child, took = run_child("releasing-the-gil")
    assert child.returncode == 0, (child.returncode, child.stdout, child.stderr)
    assert child.stdout.splitlines() == ["CONSUMER CLOSE", "CLOSE RETURNED", "STILL RUNNING"], child.stdout
    assert "did not end within 1s after a producer got stuck; leaving them" in child.stderr
    assert "Timeout" not in child.stderr  # the watchdog was cancelled: it would have fired during the sleep
    assert took >= STUCK_TIMEOUT + STUCK_EXIT_MARGIN + 2
