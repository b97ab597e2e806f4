"""The expiry index: where a Redis store files each state key under the second it may be forgotten.

Per rule (its escaped name, ``domain._keys.rule_part``), a sorted set ``PREFIX + EXPIRY_TAG +
rule`` holds the seconds that have keys (score = member = the second), a set ``... +
SEPARATOR + second`` the keys filed there (without the prefix), and a hash ``... + SEPARATOR +
"watermarks"`` the rule's watermark as each source partition's reader last claimed with it
(its *lane*, :func:`lane_of`), with the time. The scripts (:mod:`adapters.redis._script`) file
a key on every write and sweep the seconds the lowest of those watermarks has reached. This
module names the same keys for what runs outside the scripts (a migration filing the keys it
copies, inspection skipping the index).

A state key never starts with ``SEPARATOR`` (a rule's name is never empty), so the index
lives under the store's prefix without meeting a state key.
"""

from __future__ import annotations

from domain import SEPARATOR, Emission, rule_part

EXPIRY_TAG = SEPARATOR + "expiry" + SEPARATOR
_OFFSET_MARK = "%3A"  # a quoted ":" (adapters.redis._state_store.quoted_owner)


def lane_of(quoted: str) -> str:
    """The source partition in a quoted owner (``topic%3Apartition%3Aoffset`` less ``%3Aoffset``);
    ``""`` for an owner that is no position (one lane for all of them)."""
    head, mark, offset = quoted.rpartition(_OFFSET_MARK)
    return head if mark and offset.isascii() and offset.isdigit() else ""


def rule_index(prefix: str, rule: str) -> bytes:
    """The sorted set of the seconds of the keys of ``rule`` (``domain._keys.rule_part``)."""
    return _raw(prefix + EXPIRY_TAG + rule)


def filed_at(entries: tuple[Emission, ...]) -> int:
    """The second a value holding ``entries`` is filed under: its newest ``kept_until``."""
    return max(e.kept_until for e in entries)


def file_key(client, prefix: str, key: str, entries: tuple[Emission, ...]) -> None:
    """File state key ``key`` (holding ``entries``) in its rule's index, as the scripts do;
    ``client`` is a redis-py client or pipeline."""
    second = filed_at(entries)
    index = rule_index(prefix, rule_part(key))
    client.sadd(index + _raw(SEPARATOR + str(second)), _raw(key))
    client.zadd(index, {str(second): second})


def is_index(prefix: str, raw_key: bytes) -> bool:
    """Whether a Redis key under ``prefix`` belongs to the index, not to a state key."""
    return raw_key.startswith(_raw(prefix + SEPARATOR))


def _raw(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")
