"""A dict-backed state store whose expired keys are really evicted, with an optional snapshot.

The snapshot (``--state memory:PATH``) is a text file: a header line, then one line per key,
``percent-encoded key TAB stored value`` (``domain._state.encode``). Keys are percent-encoded
from their UTF-8 bytes with lone surrogates kept (``surrogatepass``), so every key a JSON
string can make, ``"\\ud800"`` included, is saved and read back as it was.

The snapshot is replaced whole or not at all: ``close`` writes ``PATH.partial``, fsyncs it,
renames it over ``PATH`` and fsyncs the directory. If anything fails, the partial file is
removed, ``PATH`` keeps the previous snapshot, and a domain error is raised. Loading reads
``PATH`` only; a ``PATH.partial`` left by a killed process is ignored (and overwritten by the
next save).

One run at a time uses a snapshot: the store holds an exclusive lock on ``PATH.lock`` from
its start to its close, so a second run on the same snapshot (whose save would erase the
first's emissions) is refused at start, and so is a snapshot whose directory cannot be
written (found when the lock file is created, not after the whole input). A snapshot that
cannot be read (damaged, truncated, another program's file) is refused at start too:
``SnapshotUnusable``, a ``SetupError``, one line.
"""

from __future__ import annotations

import fcntl
import heapq
import logging
import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from urllib.parse import quote, unquote

from adapters.memory._errors import SnapshotUnusable
from domain import (
    GRANTED,
    SEPARATOR,
    Claim,
    Emission,
    Judgement,
    ProcessingBug,
    StateUnavailable,
    current_key,
    decide,
    decide_one,
    decode,
    encode,
    first_line,
    kept_until,
    rule_of,
    rule_part,
    version_of,
)

SNAPSHOT_HEADER = "# streamdedup state snapshot\n"

log = logging.getLogger(__name__)


class InMemoryStateStore:
    """State in a dict; each rule indexes its keys by eviction second and evicts as its watermark moves.

    Memory is bounded by the keys kept within their retention (see :mod:`domain._state`),
    not by the stream. A key's emissions are held as plain tuples of ``(time, expires_at,
    owner)`` (``Emission`` objects only while a claim on a held key is decided): Python's cycle
    collector stops tracking a tuple of strings and integers, so its full collections, which
    stop the engine, do not grow with the state (with ``Emission`` objects they took 62 ms at
    150,000 keys and 371 ms at 1,000,000).
    """

    durable = False  # a snapshot, when configured, is written at close: a crash loses what came since

    def __init__(self, snapshot: str | Path | None = None):
        self._entries: dict[str, tuple[StoredEmission, ...]] = {}
        self._expiries: dict[str, _Expiries] = {}  # by the rule's part of its keys
        self._lock = threading.Lock()
        self.snapshot = Path(snapshot) if snapshot else None
        self._held: int | None = None
        if self.snapshot:
            self._held = _lock_snapshot(self.snapshot)
            try:
                if self.snapshot.exists():
                    self._load(self.snapshot)
            except BaseException:
                self._release()
                raise

    def check_and_set(self, claim: Claim) -> bool:
        return self.check_and_set_many([claim])[0].granted

    def check_and_set_many(self, claims: Sequence[Claim]) -> list[Judgement]:
        """Each claim decided in turn (``domain._state.decide``); a rule's keys due to be
        forgotten by a claim's ``now`` are forgotten first. The usual claim (a key the store
        does not hold) takes a path with ``_Expiries.due`` and ``add`` written out."""
        judgements: list[Judgement] = []
        entries, expiries_of, append = self._entries, self._expiries, judgements.append
        rule_prefix, expiries = None, _Expiries()  # the last claim's rule (a call's claims are mostly one rule's)
        with self._lock:
            for claim in claims:
                key, now = claim.key, claim.now
                if rule_prefix is None or not key.startswith(rule_prefix):
                    rule = rule_part(key)
                    rule_prefix = rule + SEPARATOR
                    expiries = expiries_of.get(rule) or self._expiries_of(rule)
                seconds = expiries._seconds
                if seconds and seconds[0] <= now:
                    self._evict(expiries, now)
                stored = entries.get(key)
                if stored is None:  # ``decide`` over no emission: granted, the claim's emission remembered
                    time, expires_at = claim.time, claim.expires_at
                    entries[key] = ((time, expires_at, claim.owner),)
                    second = kept_until(time, expires_at)
                    keys = expiries._keys.get(second)
                    if keys is None:
                        keys = expiries._keys[second] = {}
                        heapq.heappush(seconds, second)
                    keys[key] = None
                    append(GRANTED)
                else:
                    append(self._decide(claim, stored, expiries))
        return judgements

    def invalidate(self, key: str) -> bool:
        with self._lock:
            return self._entries.pop(key, None) is not None

    def entries(self, key: str, now: int) -> tuple[Emission, ...]:
        return tuple(e for e in _emissions(self._entries.get(key, ())) if e.expires_at > now)

    def close(self) -> None:
        """Writes the snapshot, when the store has one (see :meth:`save`)."""
        if self.snapshot:
            try:
                self.save(self.snapshot)
            finally:
                self._release()

    def abandon(self) -> None:
        """Give the snapshot up without saving, as a crash does: its lock is released."""
        self._release()

    def _release(self) -> None:
        if self._held is not None:
            os.close(self._held)  # closing the descriptor drops the lock
            self._held = None

    def save(self, path: Path) -> None:
        """Replace the snapshot at ``path`` whole, or leave the previous one as it was.

        Raises ``StateUnavailable`` when the file system refuses (no space, no permission)
        and ``ProcessingBug`` for anything else; either way no ``.partial`` file is left.
        """
        partial = path.with_name(path.name + ".partial")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with self._lock:
                _write_synced(partial, self._snapshot_lines())
            os.replace(partial, path)
        except BaseException as exc:
            partial.unlink(missing_ok=True)
            if isinstance(exc, Exception):
                raise _snapshot_error(path, exc) from None
            raise
        _fsync_directory(path.parent)

    def newest_emission_times(self) -> dict[str, int]:
        """The time of the newest remembered emission per rule (where a migration's old state ends)."""
        return newest_times(self.items())

    def _snapshot_lines(self) -> Iterable[str]:
        yield SNAPSHOT_HEADER
        for key, stored in self._entries.items():
            yield f"{quote_key(key)}\t{encode(_emissions(stored))}\n"

    def _load(self, path: Path) -> None:
        partial = path.with_name(path.name + ".partial")
        if partial.exists():
            log.warning("ignoring %s, left by a snapshot save that did not finish; loading %s", partial, path)
        try:
            for stored, value in read_snapshot(path):
                entries, key = (
                    decode(value),
                    current_key(stored, version_of(value)),
                )  # an older snapshot's key respelled
                self._entries[key] = _stored(entries)
                for e in entries:
                    self._expiries_of(rule_part(key)).add(e.kept_until, key)
        except (ValueError, OSError) as exc:  # UnicodeDecodeError and StateFormatError are ValueErrors
            raise unreadable(path, exc) from None

    def __len__(self) -> int:
        return len(self._entries)

    def items(self):
        """Every stored key with its emissions (for snapshots and inspection)."""
        return [(key, _emissions(stored)) for key, stored in self._entries.items()]

    def _decide(self, claim: Claim, stored: tuple[StoredEmission, ...], expiries: _Expiries) -> Judgement:
        """A claim on a key that holds emissions: ``decide`` over them (``decide_one`` over one)."""
        if len(stored) == 1:
            judgement, entries = decide_one(stored[0], claim)
            if entries is not None:
                self._entries[claim.key] = entries
                expiries.add(kept_until(claim.time, claim.expires_at), claim.key)
            return judgement
        decision = decide(_emissions(stored), claim)
        if decision.changed:
            if decision.entries:
                self._entries[claim.key] = _stored(decision.entries)
            else:
                self._entries.pop(claim.key, None)
        if decision.granted and decision.changed:
            expiries.add(claim.emission().kept_until, claim.key)
        return decision.judgement

    def _expiries_of(self, rule_part: str) -> _Expiries:
        """The expiries of the rule whose keys start with ``rule_part`` (its escaped name)."""
        expiries = self._expiries.get(rule_part)
        if expiries is None:
            expiries = self._expiries[rule_part] = _Expiries()
        return expiries

    def _evict(self, expiries: _Expiries, now: int) -> None:
        entries = self._entries
        for key in expiries.pop_due(now):
            stored = entries.get(key)
            if stored is None:
                continue
            if len(stored) == 1:
                if kept_until(stored[0][0], stored[0][1]) <= now:
                    del entries[key]
                continue
            kept = tuple(e for e in stored if kept_until(e[0], e[1]) > now)
            if kept:
                entries[key] = kept
            else:
                del entries[key]


class _Expiries:
    """A rule's keys by the second their emissions may be forgotten (``Emission.kept_until``).

    The keys of one second are the keys of a dict (``None`` values), which Python's cycle
    collector does not track; the heap holds one integer per second, not one entry per key.
    """

    def __init__(self) -> None:
        self._seconds: list[int] = []
        self._keys: dict[int, dict[str, None]] = {}

    def add(self, second: int, key: str) -> None:
        keys = self._keys.get(second)
        if keys is None:
            keys = self._keys[second] = {}
            heapq.heappush(self._seconds, second)
        keys[key] = None

    def due(self, now: int) -> bool:
        return bool(self._seconds) and self._seconds[0] <= now

    def pop_due(self, now: int) -> Iterable[str]:
        """The keys of every second up to ``now``, forgotten here (one second's keys are taken
        whole: no step of a generator per key)."""
        seconds, keys = self._seconds, self._keys
        if len(seconds) > 1 and seconds[1] <= now:
            due: list[str] = []
            while seconds and seconds[0] <= now:
                due.extend(keys.pop(heapq.heappop(seconds)))
            return due
        return keys.pop(heapq.heappop(seconds)) if seconds and seconds[0] <= now else ()


StoredEmission = tuple[int, int, str]
"""An ``Emission`` as the store holds it: ``(time, expires_at, owner)``."""


def _stored(entries: tuple[Emission, ...]) -> tuple[StoredEmission, ...]:
    return tuple((e.time, e.expires_at, e.owner) for e in entries)


def _emissions(stored: tuple[StoredEmission, ...]) -> tuple[Emission, ...]:
    return tuple(Emission(*e) for e in stored)


def read_snapshot(path: Path):
    """``(key, stored value)`` pairs of a snapshot file, values in whatever version they were saved."""
    with open(path, encoding="utf-8") as lines:
        if lines.readline() != SNAPSHOT_HEADER:
            raise ValueError("its first line is not the header of a streamdedup state snapshot")
        for line in lines:
            key, _, value = line.rstrip("\n").partition("\t")
            yield unquote_key(key), value


def unreadable(path: Path, exc: Exception) -> SnapshotUnusable:
    """The error for a snapshot that cannot be read (its loading or its inspection)."""
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else first_line(exc)
    return SnapshotUnusable(
        f"the state snapshot {path} cannot be read: {reason} (not a snapshot this program "
        "wrote, or damaged): move it away to start with an empty state"
    )


def _lock_snapshot(path: Path) -> int:
    """An exclusive lock on ``PATH.lock`` (its open descriptor), or ``SnapshotUnusable``."""
    lock = path.with_name(path.name + ".lock")
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise SnapshotUnusable(f"cannot write beside the state snapshot {path}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
        os.close(fd)
        raise SnapshotUnusable(
            f"the state snapshot {path} is in use by another run"
            f"{f' (pid {holder})' if holder else ''}: one run at a time per snapshot"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


def newest_times(items: Iterable[tuple[str, tuple[Emission, ...]]]) -> dict[str, int]:
    """The newest emission time per rule of ``(key, emissions)`` pairs."""
    newest: dict[str, int] = {}
    for key, entries in items:
        rule = rule_of(key)
        for e in entries:
            newest[rule] = max(newest.get(rule, e.time), e.time)
    return newest


def quote_key(key: str) -> str:
    """A state key as snapshot text: percent-encoded UTF-8, lone surrogates kept (lossless)."""
    return quote(key, safe="", errors="surrogatepass")


def unquote_key(text: str) -> str:
    """The inverse of :func:`quote_key`."""
    return unquote(text, errors="surrogatepass")


def _write_synced(path: Path, lines: Iterable[str]) -> None:
    with open(path, "w", encoding="utf-8") as out:
        out.writelines(lines)
        out.flush()
        os.fsync(out.fileno())


def _fsync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable; best effort (some file systems cannot sync a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        log.debug("could not sync directory %s: %s", directory, exc)


def _snapshot_error(path: Path, exc: Exception) -> StateUnavailable | ProcessingBug:
    kept = "the previous snapshot was kept" if path.exists() else "no snapshot was written"
    if isinstance(exc, OSError):
        return StateUnavailable(f"cannot write the state snapshot {path}: {exc.strerror or exc}; {kept}")
    return ProcessingBug(f"cannot write the state snapshot {path}: {type(exc).__name__}: {exc}; {kept}")
