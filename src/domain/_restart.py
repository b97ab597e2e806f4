"""Restart strategies: whether, and after how long, a failed streaming job is started again.

A job (the Spark engine's query) fails when a micro-batch keeps failing after the batch's
own retries (the ``transient`` policy). The strategy then decides from the times of all
failures so far:

* ``fixed-delay(attempts=N,delay=S)``: restart after S seconds, at most N times;
* ``exponential-delay(attempts=N,delay=S,max_delay=S,factor=F)``: the k-th restart waits
  ``min(max_delay, delay * factor**(k-1))``, at most N restarts;
* ``failure-rate(failures=N,interval=S,delay=S)``: restart after S seconds unless more
  than N failures happened within the last ``interval`` seconds;
* ``none``: never restart.

When the strategy gives up, the job stops with ``RestartsExhausted`` (a one-line message,
exit code 3 from the CLI). Delays and intervals are durations (``domain._syntax``): seconds,
with an optional ``s``/``m``/``h``/``d`` unit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from domain._errors import DedupError
from domain._syntax import parse_step, real_number, seconds, whole_number


class RestartsExhausted(DedupError):
    """The restart strategy gave up: the job stops for good."""


@dataclass(frozen=True)
class RestartStrategy:
    kind: str = "exponential-delay"
    attempts: int = 5
    delay: float = 1.0
    max_delay: float = 60.0
    factor: float = 2.0
    failures: int = 3
    interval: float = 300.0

    def delay_after(self, failure_times: Sequence[float]) -> float | None:
        """Seconds to wait before restarting after the failures at ``failure_times`` (the last
        one just now, on a monotonic clock); None when the job must stop."""
        count = len(failure_times)
        if self.kind == "none":
            return None
        if self.kind == "failure-rate":
            recent = [t for t in failure_times if t > failure_times[-1] - self.interval]
            return None if len(recent) > self.failures else self.delay
        if count > self.attempts:
            return None
        if self.kind == "fixed-delay":
            return self.delay
        return min(self.max_delay, self.delay * self.factor ** (count - 1))

    def __str__(self) -> str:
        if self.kind == "none":
            return "none"
        if self.kind == "failure-rate":
            return f"failure-rate(failures={self.failures},interval={self.interval:g},delay={self.delay:g})"
        if self.kind == "fixed-delay":
            return f"fixed-delay(attempts={self.attempts},delay={self.delay:g})"
        return (
            f"exponential-delay(attempts={self.attempts},delay={self.delay:g},"
            f"max_delay={self.max_delay:g},factor={self.factor:g})"
        )


_OPTIONS = {
    "none": {},
    "fixed-delay": {"attempts": whole_number, "delay": seconds},
    "exponential-delay": {"attempts": whole_number, "delay": seconds, "max_delay": seconds, "factor": real_number},
    "failure-rate": {"failures": whole_number, "interval": seconds, "delay": seconds},
}


def parse_restart(text: str) -> RestartStrategy:
    """Parse ``kind(option=value,...)`` (``domain._syntax``); raises ValueError naming what is wrong."""
    kind, options = parse_step(text, _OPTIONS, what="the restart strategy")
    strategy = RestartStrategy(kind, **options)
    if strategy.factor < 1:
        raise ValueError(f"factor must be >= 1, got {strategy.factor:g}")
    if strategy.kind == "exponential-delay" and strategy.max_delay < strategy.delay:
        raise ValueError(f"max_delay ({strategy.max_delay:g}) must not be below delay ({strategy.delay:g})")
    if strategy.kind == "failure-rate" and strategy.interval <= 0:
        raise ValueError("interval must be a positive duration")
    return strategy
