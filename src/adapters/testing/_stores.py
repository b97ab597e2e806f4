"""State stores that fail on demand or are shared, for tests of the error policies and of
several cores over one state (``domain.ports.StateStore``)."""

from __future__ import annotations

from domain import StateUnavailable, decide


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
    instances: a key's entries change only through its own claims, by ``domain.decide``
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
