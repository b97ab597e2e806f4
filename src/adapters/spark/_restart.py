"""What happens when a micro-batch's work or the whole query fails.

``retried`` runs one piece of a micro-batch's work (judging against Redis, a write) under the
``transient`` policy: a failed Spark job counts as a transient sink failure; when the
retries are used up it raises ``PolicyExhausted``, the batch is not committed and the query
fails. With the JVM sink no Python runs inside a batch: ``run_retrying_writes`` starts the
query again after a batch whose write Spark aborted, under the same policy. ``run_restarting``
then lets the ``RestartStrategy`` decide whether to wait and run the query again; every restart continues from the checkpoint, so the failed micro-batch is
replayed with the same ``batch_id``. When the strategy gives up it raises
``RestartsExhausted`` with a one-line message. Setup errors (``error_class`` ``setup``: a
missing jar, JDK or connector, an incompatible checkpoint, a checkpoint in use by another
instance) are not restarted: the same settings fail the same way. ``query_failure`` turns a
failed query into the domain's error: Spark's concurrent-update error (another query wrote
the checkpoint's logs) means the checkpoint was lost to another instance, a
``lease.CheckpointInUse``, never restarted; anything else is a ``ProcessingBug``.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from adapters.spark.shared import CheckpointInUse
from domain import (
    DedupError,
    PermanentError,
    Policies,
    PolicyExhausted,
    ProcessingBug,
    RestartsExhausted,
    RestartStrategy,
    SinkUnavailable,
    first_line,
    run_or_stop,
)

log = logging.getLogger(__name__)
T = TypeVar("T")


def retried(operation: Callable[[], T], policies: Policies, sleep: Callable[[float], None] = time.sleep) -> T:
    """Run a micro-batch's work under the transient policy; raises ``PolicyExhausted`` when it gives up."""

    def attempt():
        try:
            return operation()
        except DedupError:
            raise
        except Exception as exc:
            raise SinkUnavailable(f"batch write failed: {what_failed(exc)}") from None

    return run_or_stop(attempt, policies, sleep)


def run_retrying_writes(
    run: Callable[[], T],
    aborted: Callable[[], int | None],
    policies: Policies,
    stop: threading.Event,
) -> T | None:
    """``run()`` (one start of the query) again while a micro-batch's write fails, per the
    ``transient`` policy, as ``retried`` retries a write inside ``foreachBatch``: ``aborted()``
    names the batch whose write Spark aborted in the failed start (the JVM sink's), None when
    something else failed (raised as it is, as is a setup error such as ``CheckpointInUse``).
    The next start replays that batch under its id. The policy counts one batch's failures in a row; when it gives up, ``PolicyExhausted`` (the
    restart strategy decides). None when ``stop`` is set while waiting."""
    failures, failing = 0, None
    while True:
        try:
            return run()
        except Exception as exc:
            batch = aborted()
            if batch is None or _setup_error(exc):  # e.g. the checkpoint lost meanwhile: never retried
                raise
            failures, failing = (failures + 1 if batch == failing else 1), batch
            error = SinkUnavailable(f"batch {batch} write failed: {what_failed(exc)}")
            delay = policies.for_error(error).delay_before(failures, None)
            if delay is None:
                raise PolicyExhausted(error, failures) from exc
        log.warning("%s; the query starts again in %.1fs to write it (attempt %d)", error, delay, failures + 1)
        if stop.wait(delay):
            return None


def run_restarting(
    run: Callable[[], T],
    strategy: RestartStrategy,
    stop: threading.Event,
    clock: Callable[[], float] = time.monotonic,
    on_failure: Callable[[], None] | None = None,
    alive: Callable[[], bool] = lambda: True,
) -> T | None:
    """``run()`` until it returns, ``stop`` is set (then None) or the strategy gives up;
    ``on_failure()`` after each failure the strategy judges (the failed-batches counter).
    ``alive()``: whether the query can run again in this process at all; after a failure that
    took it down (Spark's JVM died), ``RestartsExhausted`` at once: the process must be
    restarted, and its checkpoint resumes the job."""
    failures: list[float] = []
    while True:
        try:
            return run()
        except Exception as exc:
            if _setup_error(exc):
                raise
            reason = what_failed(exc)
        if not alive():
            raise RestartsExhausted(
                f"Spark's JVM is gone ({reason}): the query cannot be restarted in this "
                "process; start the process again (it resumes from its checkpoint)"
            )
        if on_failure is not None:
            on_failure()
        failures.append(clock())
        delay = strategy.delay_after(failures)
        if delay is None or stop.is_set():
            raise RestartsExhausted(
                f"the streaming query failed {len(failures)} time(s) and the restart "
                f"strategy {strategy} gave up; last error: {reason}"
            )
        log.warning("the streaming query failed (%s); restart %d in %.1fs", reason, len(failures), delay)
        if stop.wait(delay):
            return None


# Spark's words when another query wrote the checkpoint's logs (or runs the same query in this cluster)
CONCURRENT_UPDATE = (
    "CONCURRENT_STREAM_LOG_UPDATE",
    "ConcurrentModificationException",
    "Multiple streaming queries are concurrently using",
    "CONCURRENT_QUERY",
)


def query_failure(failure: BaseException) -> DedupError:
    """A failed streaming query as the domain's error (see the module docstring)."""
    text = str(failure).strip()
    first = first_line(failure, text)
    if any(marker in text for marker in CONCURRENT_UPDATE):
        return CheckpointInUse(
            f"another streaming query writes to this query's checkpoint ({first[:300]}); this "
            "instance stops and is not restarted (run one instance per spark.checkpoint)"
        )
    return ProcessingBug(f"the Spark query failed: {first}")


def _setup_error(exc: BaseException) -> bool:
    """The engine cannot start with these settings (``error_class`` ``setup``): retrying cannot help."""
    return isinstance(exc, PermanentError) and exc.error_class == "setup"


_RAISED = re.compile(
    r"^\s*(?:[\w]+\.)*(\w+(?:Error|Exception|Exhausted|Unavailable|Fenced|Stuck)): (.+?)"
    r"(?: SQLSTATE: \w+)?\s*$"
)


def what_failed(exc: BaseException) -> str:
    """What went wrong, in one line: the innermost Python exception raised inside the batch
    (its text travels through Spark's errors), else the first meaningful line."""
    texts = [str(exc), str(exc.__cause__ or "")]
    raised = [m for text in texts for m in map(_RAISED.match, text.splitlines()) if m]
    if raised:
        return f"{raised[-1].group(1)}: {raised[-1].group(2)}"[:300]
    for line in texts[0].splitlines():
        line = line.strip()
        if line and not line.startswith(("===", "---", "Traceback")):
            return line[:300]
    return type(exc).__name__
