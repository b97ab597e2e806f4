"""The state key as Spark column expressions, mirroring ``domain._keys``.

Spark builds and reads keys in the JVM, so this module writes the domain's encoding in
native expressions: ``key_column`` is ``encode_key``, ``rule_column`` is ``rule_of``,
``from_legacy_column`` is ``from_legacy``; ``key_parts`` and ``join_escaped`` split and join
keys without decoding their parts. ``tests/adapters/spark/stream/test_spark_keys.py`` holds them to the domain's
functions on tricky values.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from domain import ESCAPE, SEPARATOR, escape


def escaped(part: Column) -> Column:
    """``domain._keys.escape``: ``ESCAPE`` becomes ``ESCAPE``+``0``, then ``SEPARATOR`` ``ESCAPE``+``1``."""
    once = F.replace(part, F.lit(ESCAPE), F.lit(ESCAPE + "0"))
    return F.replace(once, F.lit(SEPARATOR), F.lit(ESCAPE + "1"))


def unescaped(part: Column) -> Column:
    """``domain._keys.unescape`` of a well-formed part. Every ``ESCAPE`` in it starts a
    two-character escape, so ``ESCAPE``+``1`` then ``ESCAPE``+``0`` are each replaced exactly."""
    once = F.replace(part, F.lit(ESCAPE + "1"), F.lit(SEPARATOR))
    return F.replace(once, F.lit(ESCAPE + "0"), F.lit(ESCAPE))


def key_column(rule: str, parts: Sequence[Column]) -> Column:
    """``domain._keys.encode_key(rule, values)`` of the values' key parts (``domain._keys.typed_part``:
    ``escaped`` for a string); the caller makes sure no part is null."""
    return join_escaped([F.lit(escape(rule)), *parts])


def key_parts(key: Column) -> Column:
    """The escaped parts of ``key`` (an array; the rule's first)."""
    return F.split(key, SEPARATOR, -1)


def join_escaped(parts: Sequence[Column]) -> Column:
    """Parts that are escaped already, joined into a key."""
    return F.concat_ws(SEPARATOR, *parts)


def rule_column(key: Column) -> Column:
    """``domain._keys.rule_of``: the rule's name in ``key``."""
    return unescaped(F.substring_index(key, SEPARATOR, 1))


def from_legacy_column(key: Column) -> Column:
    """``domain._keys.from_legacy``: the current spelling of a key stored in the legacy spelling."""
    return F.array_join(F.transform(key_parts(key), escaped), SEPARATOR)
