"""State keys: a rule's name and the values of its key fields as one unambiguous string.

A key is its parts (the rule's name, then each key field's value as text) each escaped,
then joined by ``SEPARATOR`` (``\\x1f``). Escaping replaces ``ESCAPE`` (``\\x1e``) by
``\\x1e0`` and ``SEPARATOR`` by ``\\x1e1``, so an escaped part never holds a separator and
every ``ESCAPE`` in a key starts a two-character escape: two different tuples of parts never
make the same key (``uniqueValue "a\\x1fb"`` + ``session "c"`` and ``"a"`` + ``"b\\x1fc"``
are two keys). A part without these two characters is unchanged, so an ordinary key is
spelled as it always was (``APP\\x1fu1``).

State format v1 and v2 (``domain.state``) joined the parts unescaped: the *legacy* spelling.
It differs only for keys whose parts held ``\\x1e`` or ``\\x1f``; :func:`from_legacy` gives
the current spelling of such a stored key.

Engines that cannot call this module per row (Spark) mirror :func:`escape` in their own
expressions (``adapters.spark.stream.keys``) and a parity test holds them to it.
"""

from __future__ import annotations

import re
from typing import Iterable

SEPARATOR = "\x1f"
ESCAPE = "\x1e"
_ESCAPED = {ESCAPE + "0": ESCAPE, ESCAPE + "1": SEPARATOR}
_AN_ESCAPE = re.compile(f"{ESCAPE}.?", re.DOTALL)


def escape(part: str) -> str:
    """``part`` with ``ESCAPE`` as ``ESCAPE``+``0`` and ``SEPARATOR`` as ``ESCAPE``+``1`` (in that order)."""
    return part.replace(ESCAPE, ESCAPE + "0").replace(SEPARATOR, ESCAPE + "1")


def unescape(part: str) -> str:
    """The inverse of :func:`escape`. Raises ``ValueError`` when an ``ESCAPE`` is not followed by 0 or 1."""
    if ESCAPE not in part:
        return part
    return _AN_ESCAPE.sub(lambda match: _unescaped(match.group(0), part), part)


def join_parts(parts: Iterable[str]) -> str:
    """``parts`` escaped and joined by ``SEPARATOR``."""
    return SEPARATOR.join(escape(part) for part in parts)


def split_parts(text: str) -> tuple[str, ...]:
    """The parts :func:`join_parts` joined. Raises ``ValueError`` for a malformed escape."""
    return tuple(unescape(part) for part in text.split(SEPARATOR))


def encode_key(rule: str, values: Iterable[str]) -> str:
    """The state key of ``rule``'s event whose key fields have ``values`` (text, in field order)."""
    return join_parts((rule, *values))


def decode_key(key: str) -> tuple[str, tuple[str, ...]]:
    """``(rule, values)`` of a key :func:`encode_key` made. Raises ``ValueError`` for a malformed escape."""
    rule, *values = split_parts(key)
    return rule, tuple(values)


def rule_of(key: str) -> str:
    """The rule's name in ``key`` (its values are not decoded)."""
    return unescape(key.partition(SEPARATOR)[0])


def from_legacy(key: str) -> str:
    """The current spelling of ``key`` stored in the legacy (unescaped) spelling.

    Exact for every legacy key whose values held no ``SEPARATOR`` (then it has one part per
    key field, plus the rule). A legacy key whose values held ``SEPARATOR`` is ambiguous (more
    parts than that, with no way to tell which separator was a value's): its current spelling
    keeps every part and so equals no key an event makes. It is never consulted, and expires.
    """
    return join_parts(key.split(SEPARATOR))


def part_count(key: str) -> int:
    """How many parts ``key`` splits into: one more than its rule's key fields, unless it is an
    ambiguous legacy key (see :func:`from_legacy`)."""
    return key.count(SEPARATOR) + 1


def _unescaped(escape_sequence: str, part: str) -> str:
    try:
        return _ESCAPED[escape_sequence]
    except KeyError:
        raise ValueError(f"malformed key part {part!r}: {ESCAPE!r} must be followed by 0 or 1") from None
