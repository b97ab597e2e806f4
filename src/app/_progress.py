"""The live progress line shown on a terminal during long runs."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from domain import Accounting


class ProgressLine:
    """Rewrites one stderr line at most every ``interval`` seconds: counts and the current rate."""

    def __init__(self, stream: TextIO = sys.stderr, interval: float = 1.0):
        self.stream = stream
        self.interval = interval
        self._last_time = time.monotonic()
        self._last_in = 0
        self._shown = False

    def __call__(self, totals: Accounting) -> None:
        now = time.monotonic()
        if now - self._last_time < self.interval:
            return
        rate = (totals.records_in - self._last_in) / (now - self._last_time)
        self._last_time, self._last_in = now, totals.records_in
        self.stream.write(
            f"\r{rate:>10,.0f} ev/s  in={totals.records_in:,} out={totals.out:,} "
            f"dup={totals.duplicates:,} dlq={totals.dead_lettered:,} late={totals.late:,}   "
        )
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()
