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
exit code 3 from the CLI). Durations are seconds, with an optional ``s``/``m``/``h`` suffix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from domain.errors import DedupError

_STRATEGY = re.compile(r"^\s*([a-z-]+)\s*(?:\((.*)\))?\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600}


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
        return (f"exponential-delay(attempts={self.attempts},delay={self.delay:g},"
                f"max_delay={self.max_delay:g},factor={self.factor:g})")


_OPTIONS = {
    "none": (),
    "fixed-delay": ("attempts", "delay"),
    "exponential-delay": ("attempts", "delay", "max_delay", "factor"),
    "failure-rate": ("failures", "interval", "delay"),
}


def parse_restart(text: str) -> RestartStrategy:
    """Parse ``kind(option=value,...)``; raises ValueError naming what is wrong."""
    match = _STRATEGY.match(text or "")
    if not match or match.group(1) not in _OPTIONS:
        raise ValueError(f"must be one of {', '.join(f'{k}(...)' for k in _OPTIONS)}; got {text!r}")
    kind, options = match.group(1), {}
    for item in filter(None, (p.strip() for p in (match.group(2) or "").split(","))):
        name, _, value = (part.strip() for part in item.partition("="))
        name = name.replace("-", "_")
        if name not in _OPTIONS[kind]:
            raise ValueError(f"{kind} takes {', '.join(_OPTIONS[kind]) or 'no options'}; got {name!r}")
        options[name] = _number(name, value)
    return _checked(RestartStrategy(kind, **options))


def _number(name: str, value: str) -> float | int:
    try:
        if name in ("attempts", "failures"):
            return int(value)
        if name == "factor":
            return float(value)
        unit = _UNITS.get(value[-1:], None)
        return float(value[:-1]) * unit if unit else float(value)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {value!r}") from None


def _checked(strategy: RestartStrategy) -> RestartStrategy:
    if strategy.attempts < 0 or strategy.failures < 0:
        raise ValueError("attempts and failures must be >= 0")
    if min(strategy.delay, strategy.max_delay, strategy.interval) < 0 or strategy.factor < 1:
        raise ValueError("delays and intervals must be >= 0 and factor >= 1")
    return strategy
