"""A clock a test moves by hand (``domain.ports.Clock``)."""

from __future__ import annotations


class FakeClock:
    """Stands still until moved: ``now`` is ``time`` (epoch seconds), and ``sleep`` adds its
    seconds to ``time`` at once and to ``sleeps`` (what a retry's backoff waited)."""

    def __init__(self, start: float = 1_700_000_000.0):
        self.time = start
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.time

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.time += seconds
