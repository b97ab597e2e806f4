"""State keys: a rule's name and the values of its key fields as one unambiguous string.

A key is its parts (the rule's name, then each key field's value as text) each escaped,
then joined by ``SEPARATOR`` (``\\x1f``). Escaping replaces ``ESCAPE`` (``\\x1e``) by
``\\x1e0`` and ``SEPARATOR`` by ``\\x1e1``, so an escaped part never holds a separator and
every ``ESCAPE`` in a key starts a two-character escape: two different tuples of parts never
make the same key (``uniqueValue "a\\x1fb"`` + ``session "c"`` and ``"a"`` + ``"b\\x1fc"``
are two keys). A part without these two characters is unchanged, so an ordinary key is
spelled as it always was (``APP\\x1fu1``).

State format v1 and v2 (``domain._state``) joined the parts unescaped: the *legacy* spelling.
It differs only for keys whose parts held ``\\x1e`` or ``\\x1f``; :func:`from_legacy` gives
the current spelling of such a stored key.

A part is typed: a key field's value may be a string, an integer (64-bit) or a boolean
(``domain._events.Event.field_value`` refuses any other). A string is its escaped text; an
integer is ``ESCAPE`` + ``i`` + its decimal digits, a boolean ``ESCAPE`` + ``b`` + ``true`` or
``false``. An escaped string never holds ``ESCAPE`` followed by anything but ``0`` or ``1``,
so ``"1"`` and ``1``, ``"true"`` and ``true`` are different keys, and an ordinary string key is
spelled as it always was. (Before typed parts, a non-string value was spelled by
``json.dumps`` and so made the same key as its text as a string.)

Engines that cannot call this module per row (Spark) mirror :func:`escape` and the typed
parts in their own expressions (``adapters.spark.shared._keys``) and a parity test holds them
to it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

SEPARATOR = "\x1f"
ESCAPE = "\x1e"
INTEGER_PART = ESCAPE + "i"
BOOLEAN_PART = ESCAPE + "b"
KeyValue = str | int | bool
"""A key field's value: a string, a 64-bit integer or a boolean."""
_ESCAPED = {ESCAPE + "0": ESCAPE, ESCAPE + "1": SEPARATOR}
_AN_ESCAPE = re.compile(f"{ESCAPE}.?", re.DOTALL)


def escape(part: str) -> str:
    """``part`` with ``ESCAPE`` as ``ESCAPE``+``0`` and ``SEPARATOR`` as ``ESCAPE``+``1`` (in that order)."""
    if ESCAPE not in part and SEPARATOR not in part:
        return part
    return part.replace(ESCAPE, ESCAPE + "0").replace(SEPARATOR, ESCAPE + "1")


def unescape(part: str) -> str:
    """The inverse of :func:`escape`. Raises ``ValueError`` when an ``ESCAPE`` is not followed by 0 or 1."""
    if ESCAPE not in part:
        return part
    return _AN_ESCAPE.sub(lambda match: _unescaped(match.group(0), part), part)


def typed_part(value: KeyValue) -> str:
    """One value as a key part: a string escaped, an integer or a boolean typed."""
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, bool):
        return BOOLEAN_PART + ("true" if value else "false")
    return INTEGER_PART + str(value)


def value_of(part: str) -> KeyValue:
    """The inverse of :func:`typed_part`. Raises ``ValueError`` for a malformed part."""
    if part.startswith(INTEGER_PART):
        return int(part[len(INTEGER_PART) :])
    if part.startswith(BOOLEAN_PART) and part[len(BOOLEAN_PART) :] in ("true", "false"):
        return part[len(BOOLEAN_PART) :] == "true"
    return unescape(part)


def join_parts(parts: Iterable[KeyValue]) -> str:
    """``parts`` as key parts (:func:`typed_part`) joined by ``SEPARATOR``."""
    return SEPARATOR.join([typed_part(part) for part in parts])


def split_parts(text: str) -> tuple[KeyValue, ...]:
    """The parts :func:`join_parts` joined. Raises ``ValueError`` for a malformed part."""
    return tuple(value_of(part) for part in text.split(SEPARATOR))


def encode_key(rule: str, values: Iterable[KeyValue]) -> str:
    """The state key of ``rule``'s event whose key fields have ``values`` (in field order)."""
    return join_parts((rule, *values))


def key_prefix(rule: str) -> str:
    """What every key of ``rule`` starts with: ``encode_key(rule, values) == key_prefix(rule) +
    join_parts(values)``."""
    return typed_part(rule) + SEPARATOR


def display_value(value: KeyValue) -> str:
    """A key value as a person reads it: a string as it is, an integer or boolean as JSON."""
    return value if isinstance(value, str) else ("true" if value is True else "false" if value is False else str(value))


def decode_key(key: str) -> tuple[str, tuple[KeyValue, ...]]:
    """``(rule, values)`` of a key :func:`encode_key` made. Raises ``ValueError`` for a malformed part."""
    rule, *values = split_parts(key)
    if not isinstance(rule, str):
        raise ValueError(f"malformed key {key!r}: its rule is not a string")
    return rule, tuple(values)


def rule_of(key: str) -> str:
    """The rule's name in ``key`` (its values are not decoded)."""
    return unescape(rule_part(key))


def rule_part(key: str) -> str:
    """The rule's part of ``key``: its name as escaped, everything before the first ``SEPARATOR``
    (what stores index a rule's keys by)."""
    return key.partition(SEPARATOR)[0]


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
