"""Inspectable fakes for the ports that are not infrastructure (clock, failing stores and sinks)."""

from __future__ import annotations

from domain.errors import SinkUnavailable, StateUnavailable


class FakeClock:
    def __init__(self, start: float = 1_700_000_000.0):
        self.time = start
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.time

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.time += seconds


class FlakyStateStore:
    """Wraps a store; the next ``failures`` calls raise StateUnavailable."""

    def __init__(self, inner, failures: int):
        self.inner = inner
        self.failures = failures
        self.calls = 0

    def _maybe_fail(self):
        self.calls += 1
        if self.failures > 0:
            self.failures -= 1
            raise StateUnavailable("state store down")

    def check_and_set(self, claim):
        self._maybe_fail()
        return self.inner.check_and_set(claim)

    def check_and_set_many(self, claims):
        self._maybe_fail()
        return self.inner.check_and_set_many(claims)

    def invalidate(self, key):
        return self.inner.invalidate(key)

    def entries(self, key, now):
        return self.inner.entries(key, now)

    def close(self):
        pass


class ListSink:
    """Collects written events; ``fail_values`` are rejected with ``error``."""

    def __init__(self, fail_values=(), error=SinkUnavailable("broker refused the write")):
        self.written: list[bytes] = []
        self.fail_values = set(fail_values)
        self.error = error
        self.flushes = 0

    def write(self, record, event):
        if record.value in self.fail_values:
            raise self.error
        self.written.append(record.value)

    def flush(self):
        self.flushes += 1

    def close(self):
        pass


class ListDeadLetterSink:
    def __init__(self):
        self.written = []

    def write(self, dead_letter):
        self.written.append(dead_letter)

    def flush(self):
        pass

    def close(self):
        pass


class ListNotificationSink:
    def __init__(self):
        self.published = []

    def publish(self, notification):
        self.published.append(notification)

    def close(self):
        pass
