"""Error policies: what happens to a record when processing it fails.

A policy is a chain of steps per error class (``invalid``, ``bug``, ``transient``):
zero or more ``retry`` steps followed by one terminal step.

* ``retry(attempts=N, backoff=fixed|exponential, delay=S, max_delay=S)``: run the failed
  operation again up to N more times, sleeping between tries; when they are used up, the
  next step applies.
* ``skip``: count the record as skipped and log it; it goes nowhere else.
* ``dead-letter``: send the original bytes, reason, source position, time and attempt
  count to the dead-letter output.
* ``invalidate``: dead-letter the record *and* forget its key in the deduplication state
  (publishing an ``INVALIDATE`` notification when a notification output is configured), so
  the event passes again when it is re-sent.
* ``fail``: stop the engine without acknowledging the input; a restart retries the record.

Chains are written ``retry(attempts=5,backoff=exponential,delay=0.1)>dead-letter``; each
step is a ``domain._syntax`` step, delays are durations (``0.2``, ``2s``, ``1m``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Generic, TypeVar

from domain._errors import DedupError, PolicyExhausted, classify
from domain._syntax import parse_step, real_number, seconds, whole_number, word

T = TypeVar("T")
ERROR_CLASSES = ("invalid", "bug", "transient")


class Terminal(str, Enum):
    SKIP = "skip"
    DEAD_LETTER = "dead-letter"
    INVALIDATE = "invalidate"
    FAIL = "fail"


@dataclass(frozen=True)
class Retry:
    attempts: int
    backoff: str = "exponential"
    delay: float = 0.1
    max_delay: float = 30.0
    factor: float = 2.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("retry attempts must be >= 1")
        if self.backoff not in ("fixed", "exponential"):
            raise ValueError(f"retry backoff must be fixed or exponential, got {self.backoff!r}")
        if self.delay < 0 or self.max_delay < 0:
            raise ValueError("retry delays must be >= 0")
        if self.max_delay < self.delay:
            raise ValueError(f"retry max_delay ({self.max_delay:g}) must not be below delay ({self.delay:g})")

    def delay_for(self, retry_number: int) -> float:
        """Sleep before the ``retry_number``-th retry of this step (1-based)."""
        if self.backoff == "fixed":
            return self.delay
        return min(self.max_delay, self.delay * self.factor ** (retry_number - 1))


@dataclass(frozen=True)
class PolicyChain:
    retries: tuple[Retry, ...] = ()
    terminal: Terminal = Terminal.DEAD_LETTER

    def delay_before(self, failures: int, hint: float | None = None) -> float | None:
        """Seconds to wait before the next try after ``failures`` failures; None when retries are used up."""
        remaining = failures
        for step in self.retries:
            if remaining <= step.attempts:
                delay = step.delay_for(remaining)
                return max(delay, hint) if hint else delay
            remaining -= step.attempts
        return None

    @property
    def max_attempts(self) -> int:
        return 1 + sum(step.attempts for step in self.retries)

    def __str__(self) -> str:
        steps = [
            f"retry(attempts={r.attempts},backoff={r.backoff},delay={r.delay},max_delay={r.max_delay})"
            for r in self.retries
        ]
        return ">".join([*steps, self.terminal.value])


DEFAULT_POLICIES = {
    "invalid": "dead-letter",
    "bug": "dead-letter",
    "transient": "retry(attempts=5,backoff=exponential,delay=0.2,max_delay=10)>fail",
}


@dataclass(frozen=True)
class Policies:
    chains: dict[str, PolicyChain] = field(
        default_factory=lambda: {k: parse_chain(v) for k, v in DEFAULT_POLICIES.items()}
    )

    def for_error(self, error: DedupError) -> PolicyChain:
        return self.chains.get(error.error_class) or self.chains["bug"]

    @classmethod
    def from_strings(cls, chains: dict[str, str]) -> Policies:
        unknown = set(chains) - set(ERROR_CLASSES)
        if unknown:
            raise ValueError(f"unknown error class {sorted(unknown)[0]!r}; expected one of {', '.join(ERROR_CLASSES)}")
        merged = {**DEFAULT_POLICIES, **chains}
        return cls({k: parse_chain(v) for k, v in merged.items()})


_RETRY = {
    "retry": {"attempts": whole_number, "backoff": word, "delay": seconds, "max_delay": seconds, "factor": real_number}
}


def parse_chain(text: str) -> PolicyChain:
    """Parse ``retry(...)>...>terminal``; raises ValueError with the offending step."""
    steps = text.split(">")
    if not text.strip():
        raise ValueError("empty policy")
    retries = tuple(_parse_retry(s) for s in steps[:-1])
    last = steps[-1].strip()
    try:
        terminal = Terminal(last)
    except ValueError:
        raise ValueError(f"policy must end in one of skip, dead-letter, invalidate, fail; got {last!r}") from None
    return PolicyChain(retries, terminal)


def _parse_retry(step: str) -> Retry:
    _, options = parse_step(step, _RETRY, what="a step before the last")
    if "attempts" not in options:
        raise ValueError(f"retry needs attempts=N; got {step.strip()!r}")
    return Retry(**options)


@dataclass(frozen=True)
class Succeeded(Generic[T]):
    value: T
    attempts: int


@dataclass(frozen=True)
class Resolved:
    """The operation failed for good; ``action`` says what to do with the record."""

    action: Terminal
    error: DedupError
    attempts: int


def run_with_policy(
    operation: Callable[[], T],
    policies: Policies,
    sleep: Callable[[float], None],
    first_failure: Exception | None = None,
) -> Succeeded[T] | Resolved:
    """Run ``operation``, retrying per the failing error's chain; never raises a DedupError.

    ``first_failure``: the operation was already tried once, by a caller's fast path, and
    raised it; the policies go on from there as if this call had made that attempt.
    """
    failures, failed = 0, first_failure
    while True:
        if failed is None:
            try:
                return Succeeded(operation(), failures + 1)
            except Exception as exc:
                failed = exc
        error, failed = classify(failed), None
        failures += 1
        chain = policies.for_error(error)
        delay = chain.delay_before(failures, getattr(error, "retry_after", None))
        if delay is None:
            return Resolved(chain.terminal, error, failures)
        sleep(delay)


def run_or_stop(operation: Callable[[], T], policies: Policies, sleep: Callable[[float], None]) -> T:
    """Run ``operation`` under the policies, where no record can be set aside (a flush, a whole
    batch): whatever the chain's last step, a failure that outlasts its retries raises
    ``PolicyExhausted`` and the caller stops without acknowledging its input."""
    result = run_with_policy(operation, policies, sleep)
    if isinstance(result, Resolved):
        raise PolicyExhausted(result.error, result.attempts)
    return result.value
