"""Supervising the streaming query: restart it when it fails, per a ``RestartStrategy``.

``RestartingEngine`` wraps an engine with ``run(stop)``. When the run raises (the query
failed: a micro-batch kept failing after its retries, or the sink or source was gone),
the strategy decides whether to wait and run again; every restart continues from the
checkpoint, so the failed micro-batch is replayed with the same ``batch_id``. When the
strategy gives up it raises ``RestartsExhausted`` with a one-line message. Setup errors
(``error_class`` ``setup``: a missing jar, JDK or connector) are not restarted: the same
settings fail the same way.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from domain.errors import PermanentError
from domain.restart import RestartsExhausted, RestartStrategy

log = logging.getLogger(__name__)


@dataclass
class RestartingEngine:
    engine: object
    strategy: RestartStrategy
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    failures: list[float] = field(default_factory=list)

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def __setattr__(self, name, value):
        if name in ("engine", "strategy", "sleep", "clock", "failures"):
            object.__setattr__(self, name, value)
        else:
            setattr(self.engine, name, value)

    def run(self, stop: threading.Event | None = None):
        """Run until the engine returns, ``stop`` is set, or the strategy gives up."""
        stop = stop or threading.Event()
        while True:
            try:
                return self.engine.run(stop=stop)
            except Exception as exc:  # noqa: BLE001 - the strategy decides on any query failure
                if _setup_error(exc):
                    raise
                reason = first_line(exc)
            self.failures.append(self.clock())
            delay = self.strategy.delay_after(self.failures)
            if delay is None or stop.is_set():
                raise RestartsExhausted(f"the streaming query failed {len(self.failures)} time(s) and the restart "
                                        f"strategy {self.strategy} gave up; last error: {reason}")
            log.warning("the streaming query failed (%s); restart %d in %.1fs", reason, len(self.failures), delay)
            if stop.wait(delay):
                return self._totals()

    def _totals(self):
        """What the engine counted so far, when a stop request ends the wait for a restart."""
        totals = getattr(self.engine, "totals", None)
        return totals if totals is not None else self.engine.listener.totals


def _setup_error(exc: BaseException) -> bool:
    """The engine cannot start with these settings (``error_class`` ``setup``): retrying cannot help."""
    return isinstance(exc, PermanentError) and exc.error_class == "setup"


_RAISED = re.compile(r"^\s*(?:[\w]+\.)*(\w+(?:Error|Exception|Exhausted|Unavailable|Fenced|Stuck)): (.+?)"
                     r"(?: SQLSTATE: \w+)?\s*$")


def first_line(exc: BaseException) -> str:
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
