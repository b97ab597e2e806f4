"""Inspectable fakes for the ports (clock, sources, committers, failing stores and sinks): no mocks."""

from __future__ import annotations

from domain import SinkUnavailable, StateUnavailable, decide


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
        self.durable = inner.durable
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


class SendingStateStore(FlakyStateStore):
    """Wraps a store as a ``PipelinedStateStore`` behaves over one connection: a send is decided
    at once, its answer given when read, and answers must be read in the order sent.
    ``refusing``: indexes of sends (from 0) that raise StateUnavailable, nothing applied.
    ``failing``: sends whose answer raises StateUnavailable with nothing applied, and so do those
    of the sends made after it until that answer is read (a lost connection). Counts ``sends``,
    answers ``read`` and ``calls`` (to ``check_and_set_many``)."""

    def __init__(self, inner, failing=(), refusing=()):
        super().__init__(inner, failures=0)
        self.failing, self.refusing = set(failing), set(refusing)
        self.sends = self.read = 0
        self.unread: list[int] = []  # the sends whose answers are not read yet, in order
        self.lost = False

    def send_many(self, claims):
        index = self.sends
        self.sends += 1
        if index in self.refusing:
            raise StateUnavailable("state store refused the connection")
        self.unread.append(index)
        self.lost = self.lost or index in self.failing
        lost, judged = self.lost, None if self.lost else self.inner.check_and_set_many(claims)

        def answer():
            assert self.unread[0] == index, f"answer of send {index} read before that of send {self.unread[0]}"
            self.unread.pop(0)
            self.read += 1
            if lost:
                self.lost = False  # the next send connects again
                raise StateUnavailable("state store down")
            return judged

        return answer


class SharedStateStore:
    """A ``StateStore`` several cores share, as Redis holds the state of several kafka-engine
    instances: a key's entries change only through its own claims, by ``domain._state.decide``
    (the Redis script is held to it by a parity test). The in-memory store also evicts every
    key of a rule as its one reader's watermark passes them, which would let one instance's
    watermark expire another's keys."""

    durable = True

    def __init__(self):
        self.by_key: dict = {}

    def check_and_set(self, claim) -> bool:
        return self.check_and_set_many([claim])[0].granted

    def check_and_set_many(self, claims) -> list:
        return [self._apply(claim) for claim in claims]

    def _apply(self, claim):
        decision = decide(self.by_key.get(claim.key, ()), claim)
        if decision.changed:
            self.by_key[claim.key] = decision.entries
        return decision.judgement

    def invalidate(self, key: str) -> bool:
        return self.by_key.pop(key, None) is not None

    def entries(self, key: str, now: int):
        return tuple(e for e in self.by_key.get(key, ()) if e.expires_at > now)

    def close(self) -> None:
        pass


class ListSink:
    """Collects written events; ``fail_values`` are rejected with ``error``; flushes go to ``journal``."""

    def __init__(self, fail_values=(), error=None, journal=None):
        self.written: list[bytes] = []
        self.fail_values = set(fail_values)
        self.error = error or SinkUnavailable("broker refused the write")
        self.flushes = 0
        self.journal = [] if journal is None else journal

    def write(self, record, event):
        if record.value in self.fail_values:
            raise self.error
        self.written.append(record.value)

    def flush(self):
        self.flushes += 1
        self.journal.append("flush")

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


def offsets(records) -> list[int]:
    return [r.position.offset for r in records]


class ListSource:
    """An event source handing out one of ``batches`` per poll (``[]`` is an empty poll), at most
    ``max_records`` of it (the rest is the next poll's); bounded. The ``timeout`` of each poll
    goes to ``waits``, acknowledgements to ``journal`` as ``("ack", offsets)``.
    """

    def __init__(self, batches, journal=None):
        self.batches = list(batches)
        self.polls = 0
        self.waits = []
        self.journal = [] if journal is None else journal

    def poll(self, max_records, timeout):
        self.polls += 1
        self.waits.append(timeout)
        if not self.batches:
            return []
        batch = self.batches.pop(0)
        if len(batch) > max_records:
            self.batches.insert(0, batch[max_records:])
        return list(batch[:max_records])

    @property
    def exhausted(self):
        return not self.batches

    def assignment(self):
        return None

    def retain(self, records):
        return records

    def commit(self, records):
        self.journal.append(("ack", offsets(records)))

    def close(self):
        pass


class RecordingCommitter:
    """A batch committer writing its calls to ``journal``; ``fail_commit`` is raised by ``commit``."""

    def __init__(self, journal=None, fail_commit=None):
        self.journal = [] if journal is None else journal
        self.fail_commit = fail_commit

    def begin(self):
        self.journal.append("begin")

    def commit(self, records):
        if self.fail_commit is not None:
            raise self.fail_commit
        self.journal.append(("commit", offsets(records)))

    def abort(self):
        self.journal.append("abort")


class ListNotificationSource:
    """Hands out one list of ``arrivals`` per poll; counts the acknowledgements."""

    def __init__(self, arrivals):
        self.arrivals = list(arrivals)
        self.commits = 0
        self.rejected = 0

    def poll(self, timeout, final=False):
        return self.arrivals.pop(0) if self.arrivals else []

    def commit(self):
        self.commits += 1

    def close(self):
        pass
