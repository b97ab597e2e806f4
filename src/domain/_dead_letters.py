"""The dead letter: one definition of its fields and of their encodings, for every engine.

A dead letter is a record that could not be delivered: its original key and value, and
its metadata: why (``reason``, e.g. ``not_json``, ``late``, ``oversize``; ``error``, the
message, at most ``MAX_ERROR_CHARS`` characters; ``error_class``: ``invalid``, ``bug`` or
``transient``), where from (``source.topic`` — a topic or a file —, ``source.partition``,
``source.offset``), after how many ``attempts``, when (``time``, epoch seconds to the
millisecond), and the original value's size in bytes and SHA-256 (``original.size``,
``original.sha256``, lowercase hex).

A dead letter always fits its output: when the original key plus value exceed the bound
(``max_bytes``, default ``DEFAULT_MAX_BYTES``), it carries only their first bytes
(:func:`bounded`: the key at most half the bound, the value the rest); ``original.size``
larger than the value carried says so, and the source position and digest name the
original, which stays in its source. Two media, the same field names, encoded as
``domain._metadata`` defines for every record with metadata:

* **Kafka**: the message's value is the original value, untouched (a consumer can replay
  it as it is) unless bounded, its key the original key; each field a ``dedup.<field>``
  header (``to_headers`` / ``from_headers``).
* **JSONL file**: one JSON object per line, ``{"source": {"topic": …, "partition": …,
  "offset": …}, …, "key": …, "value": …}`` (``to_document`` / ``from_document``).

Decoding gives back the ``DeadLetter`` bounded, with its ``error`` bounded and its ``time``
rounded to the millisecond, as every writer wrote them (a letter written before
``original.*`` existed decodes as one that was not bounded). Engines that cannot call this
module per record (Spark) mirror ``FIELDS`` in their own expressions and are held to it
by a parity test.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from domain._events import RawRecord, SourcePosition
from domain._metadata import INTEGER, TEXT, TIME, Field, Original, cut_to, millis
from domain._metadata import from_document as metadata_from_document
from domain._metadata import from_headers as metadata_from_headers
from domain._metadata import to_document as metadata_document
from domain._metadata import to_headers as metadata_headers

MAX_ERROR_CHARS = 1000
DEFAULT_MAX_BYTES = 64 * 1024  # a dead letter's key plus value at most: far below the 1 MB Kafka takes by default


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A record that could not be delivered: original bytes plus why, where from and when.

    ``original`` is set when ``record`` holds only the first bytes of the original (:func:`bounded`).
    """

    record: RawRecord
    reason: str
    error: str
    error_class: str
    attempts: int
    time: float
    original: Original | None = None

    @property
    def original_value(self) -> Original:
        """The original value's size and digest, whether or not the record was cut."""
        return self.original or Original.of(self.record.value)


def bounded(dead_letter: DeadLetter, max_bytes: int = DEFAULT_MAX_BYTES) -> DeadLetter:
    """``dead_letter`` as it is when its key plus value fit ``max_bytes``; otherwise with its
    key cut to at most ``max_bytes // 2`` bytes and its value to the rest (``original`` set
    when the value was cut)."""
    record = cut_to(dead_letter.record, max_bytes)
    if record is dead_letter.record:
        return dead_letter
    original = dead_letter.original_value if len(record.value) < len(dead_letter.record.value) else dead_letter.original
    return replace(dead_letter, record=record, original=original)


FIELDS = (
    Field("reason", TEXT),
    Field("error", TEXT),
    Field("error_class", TEXT),
    Field("source.topic", TEXT),
    Field("source.partition", INTEGER),
    Field("source.offset", INTEGER),
    Field("attempts", INTEGER),
    Field("time", TIME),
    Field("original.size", INTEGER, required=False),
    Field("original.sha256", TEXT, required=False),
)


def metadata(dead_letter: DeadLetter) -> dict[str, str | int]:
    """Each field's value by name (``time`` in milliseconds, ``error`` bounded)."""
    position, original = dead_letter.record.position, dead_letter.original_value
    return {
        "reason": dead_letter.reason,
        "error": dead_letter.error[:MAX_ERROR_CHARS],
        "error_class": dead_letter.error_class,
        "source.topic": position.source,
        "source.partition": position.partition,
        "source.offset": position.offset,
        "attempts": dead_letter.attempts,
        "time": millis(dead_letter.time),
        "original.size": original.size,
        "original.sha256": original.sha256,
    }


def to_headers(dead_letter: DeadLetter) -> list[tuple[str, bytes]]:
    """The Kafka headers of ``dead_letter``, in ``FIELDS`` order (key and value go as they are)."""
    return metadata_headers(FIELDS, metadata(dead_letter))


def to_message(
    dead_letter: DeadLetter, max_bytes: int = DEFAULT_MAX_BYTES
) -> tuple[bytes, bytes | None, list[tuple[str, bytes]]]:
    """The Kafka message of ``dead_letter``, :func:`bounded` by ``max_bytes``: ``(value, key, headers)``."""
    letter = bounded(dead_letter, max_bytes)
    return letter.record.value, letter.record.key, to_headers(letter)


def from_headers(value: bytes, key: bytes | None, headers: Iterable[tuple[str, bytes]]) -> DeadLetter:
    """The dead letter a Kafka message carries. Raises ``ValueError`` when a field is missing or malformed."""
    return _dead_letter(value, key, metadata_from_headers(FIELDS, headers, "dead letter"))


def to_document(dead_letter: DeadLetter, max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    """The JSON document of ``dead_letter``, :func:`bounded` by ``max_bytes`` (a JSONL line once dumped)."""
    dead_letter = bounded(dead_letter, max_bytes)
    record = dead_letter.record
    return metadata_document(FIELDS, metadata(dead_letter), record.key, record.value)


def from_document(document: dict[str, Any]) -> DeadLetter:
    """The dead letter a JSON document carries. Raises ``ValueError`` when a field is missing or malformed."""
    values, key, value = metadata_from_document(FIELDS, document, "dead letter")
    return _dead_letter(value, key, values)


def _dead_letter(value: bytes, key: bytes | None, values: dict[str, Any]) -> DeadLetter:
    position = SourcePosition(values["source.topic"], values["source.partition"], values["source.offset"])
    return DeadLetter(
        RawRecord(value, position, key),
        values["reason"],
        values["error"],
        values["error_class"],
        values["attempts"],
        values["time"] / 1000,
        _original(value, values),
    )


def _original(value: bytes, values: dict[str, Any]) -> Original | None:
    """The ``original`` a bounded letter carried; None when the value is whole (or the fields are missing)."""
    if "original.size" not in values or "original.sha256" not in values:
        return None
    original = Original(values["original.size"], values["original.sha256"])
    return None if original == Original.of(value) else original
