"""A dict-backed state store whose expired keys are really evicted."""

from __future__ import annotations

import heapq
import os
import threading
from pathlib import Path
from typing import Sequence
from urllib.parse import quote, unquote

from domain.rules import KEY_SEPARATOR
from domain.state import Claim, Emission, decide, decode, encode

SNAPSHOT_HEADER = "# streamdedup state snapshot\n"


class InMemoryStateStore:
    """State in a dict; each rule keeps a heap of eviction times and evicts as its watermark moves.

    Memory is bounded by the keys kept within their retention (see :mod:`domain.state`),
    not by the stream.
    """

    durable = False  # a snapshot, when configured, is written at close: a crash loses what came since

    def __init__(self, snapshot: str | Path | None = None):
        self._entries: dict[str, tuple[Emission, ...]] = {}
        self._expiries: dict[str, list[tuple[int, str]]] = {}
        self._lock = threading.Lock()
        self.snapshot = Path(snapshot) if snapshot else None
        if self.snapshot and self.snapshot.exists():
            self._load(self.snapshot)

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
        """Writes the snapshot, when the store has one, atomically (write then rename)."""
        if self.snapshot:
            self.save(self.snapshot)

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        with self._lock, open(partial, "w") as out:
            out.write(SNAPSHOT_HEADER)
            for key, entries in self._entries.items():
                out.write(f"{quote(key, safe='')}\t{encode(entries)}\n")
        os.replace(partial, path)

    def _load(self, path: Path) -> None:
        for key, value in read_snapshot(path):
            entries = decode(value)
            self._entries[key] = entries
            for e in entries:
                heapq.heappush(self._expiries.setdefault(key.split(KEY_SEPARATOR, 1)[0], []), (e.kept_until, key))

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
                           (claim.emission().kept_until, claim.key))
        return decision.granted

    def _evict(self, rule: str, now: int) -> None:
        heap = self._expiries.get(rule)
        while heap and heap[0][0] <= now:
            _, key = heapq.heappop(heap)
            kept = tuple(e for e in self._entries.get(key, ()) if e.kept_until > now)
            if kept:
                self._entries[key] = kept
            else:
                self._entries.pop(key, None)


def read_snapshot(path: Path):
    """``(key, stored value)`` pairs of a snapshot file, values in whatever version they were saved."""
    with open(path) as lines:
        if lines.readline() != SNAPSHOT_HEADER:
            raise ValueError(f"{path} is not a streamdedup state snapshot")
        for line in lines:
            key, _, value = line.rstrip("\n").partition("\t")
            yield unquote(key), value
