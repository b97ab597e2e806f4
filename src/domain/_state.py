"""What the deduplication state holds, how it is encoded, and the one decision over it.

A state value lists the emissions remembered for one key: ``(time, expires_at, owner)``.
``owner`` is the source position of the record that made the emission, so a record that
is replayed after a crash (same position) gets the same verdict it got the first time.

Every store applies :func:`decide` atomically per key; the Redis store runs the same
logic in Lua, and the state-store contract suite holds both to it.

An emission is *live* (it makes repeats duplicates) while ``expires_at > now``. It is
*kept* one retention longer (until :attr:`Emission.kept_until`): watermarks start afresh
when a job restarts, so a record replayed after a crash may be judged at an earlier
``now`` than the one that pruned its key, and must still find the emission that made it a
duplicate the first time. Stores evict an emission only once it is no longer kept.

Values carry their format version (see :func:`decode`); the version also says how the
value's key is spelled: from v3 on by ``domain._keys`` (escaped parts), before that in the
legacy spelling (parts joined unescaped). :func:`current_key` gives a stored key's current
spelling; the two differ only for keys whose values held ``\\x1e`` or ``\\x1f``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import quote, unquote

from domain._keys import from_legacy

CURRENT_VERSION = 3
ESCAPED_KEYS_SINCE = 3  # the first version whose keys are spelled by domain._keys
NO_WATERMARK = 0
"""``Claim.now`` while the rule has no watermark yet (``domain._watermarks``): nothing has expired."""


@dataclass(frozen=True, slots=True)
class Emission:
    time: int
    expires_at: int
    owner: str = ""

    @property
    def kept_until(self) -> int:
        """Stores may forget the emission once ``now >= kept_until`` (one retention after expiry)."""
        return kept_until(self.time, self.expires_at)


def kept_until(time: int, expires_at: int) -> int:
    """``Emission.kept_until`` of an emission at ``time`` that expires at ``expires_at``."""
    return 2 * expires_at - time


@dataclass(slots=True)
class Claim:
    """A request to emit the event ``owner`` at ``time`` under ``key``.

    It is granted unless a live emission of that key lies less than ``window`` away.
    ``now`` is the rule's watermark when the event arrived (``NO_WATERMARK`` while it has
    none): emissions with ``expires_at <= now`` are dead and ignored. A value, not frozen
    (one is built per judged record: ``domain._events``).
    """

    key: str
    time: int
    window: int
    expires_at: int
    now: int
    owner: str = ""
    settled: int | None = None
    """The rule's watermark when the claim's batch began (None: ``now``). A durable store may
    forget, out of any claim's sight, only what was dead by then: a batch replayed from its
    start after a crash (its offsets not committed) then finds every emission it found the
    first time, however far the batch's own records moved the watermark."""

    def sweeps_until(self) -> int:
        """Up to which second a store may forget keys this claim does not touch (``settled``, or ``now``)."""
        return self.now if self.settled is None else min(self.settled, self.now)

    def emission(self) -> Emission:
        return Emission(self.time, self.expires_at, self.owner)

    def replays(self, emission: Emission) -> bool:
        """``emission`` is this claim's own: the same record (owner) judged before.

        The owner alone decides: a processing-time record read again gets a new time, and
        must still get its first verdict."""
        return bool(self.owner) and emission.owner == self.owner

    def within_window(self, emission: Emission) -> bool:
        """The window test: ``emission`` lies less than ``window`` away, in either direction,
        so the claim is a duplicate of it (``|t - t_emitted| < window``, ``domain._rules``)."""
        return abs(self.time - emission.time) < self.window


@dataclass(frozen=True, slots=True)
class Judgement:
    """A store's answer to one claim: granted (``repeats`` is None), or refused as a repeat
    of ``repeats``, the first live emission of the key that lies within the claim's window."""

    repeats: Emission | None = None

    @property
    def granted(self) -> bool:
        return self.repeats is None


GRANTED = Judgement()


@dataclass(frozen=True, slots=True)
class Decision:
    granted: bool
    entries: tuple[Emission, ...]
    changed: bool
    repeats: Emission | None = None

    @property
    def judgement(self) -> Judgement:
        return Judgement(self.repeats)


def decide(entries: tuple[Emission, ...], claim: Claim) -> Decision:
    """Grant or refuse ``claim`` against the key's remembered emissions.

    Expired emissions (``expires_at <= now``) are ignored; they are dropped from the entries
    once past ``kept_until``. A live emission by the same owner means a replay: granted
    again, nothing written. A refused claim names the emission it repeats: the first live
    one (in the order they were made) within the window.
    """
    if not entries:
        return Decision(True, (claim.emission(),), True)
    kept = tuple(e for e in entries if e.kept_until > claim.now)
    changed = len(kept) != len(entries)
    live = [e for e in kept if e.expires_at > claim.now]
    if any(claim.replays(e) for e in live):
        return Decision(True, kept, changed)
    repeated = next((e for e in live if claim.within_window(e)), None)
    if repeated is not None:
        return Decision(False, kept, changed, repeated)
    return Decision(True, kept + (claim.emission(),), True)


def decide_one(stored: tuple[int, int, str], claim: Claim) -> tuple[Judgement, tuple[tuple[int, int, str], ...] | None]:
    """:func:`decide` over a key holding one emission given as ``(time, expires_at, owner)``,
    without building ``Emission`` values: the usual case, for a store that keeps such tuples.
    Returns the judgement and the key's entries after the claim, as such tuples, or None when
    they are unchanged. ``tests/domain/test_state_decide.py`` holds it to :func:`decide`."""
    time, expires_at, owner = stored
    now = claim.now
    emitted = (claim.time, claim.expires_at, claim.owner)
    if kept_until(time, expires_at) <= now:
        return GRANTED, (emitted,)
    if expires_at > now:
        if claim.owner and owner == claim.owner:
            return GRANTED, None
        if abs(claim.time - time) < claim.window:
            return Judgement(Emission(time, expires_at, owner)), None
    return GRANTED, (stored, emitted)


class StateFormatError(ValueError):
    """A stored value no codec version can read."""


def encode(entries: tuple[Emission, ...]) -> str:
    """The current format (v3): ``3|time,expires_at,owner;...`` with the owner percent-encoded."""
    return f"{CURRENT_VERSION}|{_body(entries)}"


def decode(value: str | bytes) -> tuple[Emission, ...]:
    """Read any known version and upgrade it to the current one.

    * v1 (``1|time,expires_at``): one emission, no owner; legacy key spelling.
    * v2 (``2|time,expires_at,owner;...``): legacy key spelling.
    * v3 (the v2 body): the current format; keys spelled by ``domain._keys``.
    """
    text = value.decode() if isinstance(value, bytes) else value
    version, sep, body = text.partition("|")
    if not sep or version not in _DECODERS:
        raise StateFormatError(f"unknown state format: {text[:40]!r}")
    try:
        return _DECODERS[version](body)
    except (ValueError, IndexError) as exc:
        raise StateFormatError(f"corrupt v{version} state value {text[:40]!r}: {exc}") from None


def version_of(value: str | bytes) -> int:
    text = value.decode() if isinstance(value, bytes) else value
    return int(text.partition("|")[0])


def current_key(key: str, version: int) -> str:
    """The current spelling of ``key``, stored with a value of format ``version``.

    A v1 or v2 value lies under its key's legacy spelling (``domain._keys.from_legacy``). So a
    store never takes such a value for the entries of a current key it does not translate to:
    the value belongs to another key (e.g. legacy ``a\\x1e0`` is current ``a\\x1e00``, not
    ``a\\x1e``'s ``a\\x1e0``).
    """
    return key if version >= ESCAPED_KEYS_SINCE else from_legacy(key)


def _decode_v1(body: str) -> tuple[Emission, ...]:
    time, expires_at = body.split(",")
    return (Emission(int(time), int(expires_at)),)


def _decode_v2(body: str) -> tuple[Emission, ...]:
    if not body:
        return ()
    entries = []
    for part in body.split(";"):
        time, expires_at, owner = part.split(",")
        entries.append(Emission(int(time), int(expires_at), _unquoted_owner(owner)))
    return tuple(entries)


def _unquoted_owner(quoted: str) -> str:
    """An owner as ``_body`` wrote it, percent-decoded. An owner is mostly a source position,
    ``topic:partition:offset``: its quoted head is decoded once and remembered, its decimal
    offset needs none (every ``%`` in quoted text starts an escape, so ``%3A`` is one)."""
    head, sep, tail = quoted.rpartition("%3A")
    if sep and tail.isascii() and tail.isdigit():
        return _unquoted_head(head) + ":" + tail
    return unquote(quoted, errors="surrogatepass")


@lru_cache(maxsize=4096)
def _unquoted_head(head: str) -> str:
    return unquote(head, errors="surrogatepass")


def _body(entries: tuple[Emission, ...]) -> str:
    return ";".join(f"{e.time},{e.expires_at},{quote(e.owner, safe='', errors='surrogatepass')}" for e in entries)


def encode_v1(entries: tuple[Emission, ...]) -> str:
    """A previous format, kept so tests and migrations can write what an old job wrote."""
    latest = max(entries, key=lambda e: e.time)
    return f"1|{latest.time},{latest.expires_at}"


def encode_v2(entries: tuple[Emission, ...]) -> str:
    """The previous format (its keys in the legacy spelling), kept so tests can write what an old job wrote."""
    return f"2|{_body(entries)}"


_DECODERS = {"1": _decode_v1, "2": _decode_v2, "3": _decode_v2}
