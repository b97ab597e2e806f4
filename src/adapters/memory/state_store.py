"""A dict-backed state store whose expired keys are really evicted."""

from __future__ import annotations

import heapq
import threading
from typing import Sequence

from domain.rules import KEY_SEPARATOR
from domain.state import Claim, Emission, decide


class InMemoryStateStore:
    """State in a dict; each rule keeps a heap of expiries and evicts as its watermark moves.

    Memory is bounded by the keys that are live within their retention, not by the stream.
    """

    def __init__(self):
        self._entries: dict[str, tuple[Emission, ...]] = {}
        self._expiries: dict[str, list[tuple[int, str]]] = {}
        self._lock = threading.Lock()

    def check_and_set(self, claim: Claim) -> bool:
        return self.check_and_set_many([claim])[0]

    def check_and_set_many(self, claims: Sequence[Claim]) -> list[bool]:
        with self._lock:
            return [self._apply(claim) for claim in claims]

    def invalidate(self, key: str) -> bool:
        with self._lock:
            return self._entries.pop(key, None) is not None

    def entries(self, key: str, now: int) -> tuple[Emission, ...]:
        return tuple(e for e in self._entries.get(key, ()) if e.expires_at > now)

    def close(self) -> None:
        pass

    def __len__(self) -> int:
        return len(self._entries)

    def items(self):
        """Every stored key with its emissions (for snapshots and inspection)."""
        return list(self._entries.items())

    def _apply(self, claim: Claim) -> bool:
        self._evict(claim.key.split(KEY_SEPARATOR, 1)[0], claim.now)
        decision = decide(self._entries.get(claim.key, ()), claim)
        if decision.changed:
            if decision.entries:
                self._entries[claim.key] = decision.entries
            else:
                self._entries.pop(claim.key, None)
        if decision.granted and decision.changed:
            heapq.heappush(self._expiries.setdefault(claim.key.split(KEY_SEPARATOR, 1)[0], []),
                           (claim.expires_at, claim.key))
        return decision.granted

    def _evict(self, rule: str, now: int) -> None:
        heap = self._expiries.get(rule)
        while heap and heap[0][0] <= now:
            _, key = heapq.heappop(heap)
            live = tuple(e for e in self._entries.get(key, ()) if e.expires_at > now)
            if live:
                self._entries[key] = live
            else:
                self._entries.pop(key, None)
