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
original, which stays in its source. Two media, the same field names:

* **Kafka**: the message's value is the original value, untouched (a consumer can replay
  it as it is) unless bounded, its key the original key; each metadata field is a header named
  ``dedup.<field>`` whose value is UTF-8 text: text fields as they are, integers in
  decimal, ``time`` as ``<seconds>.<3 digits>`` (``to_headers`` / ``from_headers``).
* **JSONL file**: one JSON object per line; each field under its name, dotted names
  nested (``{"source": {"topic": …, "partition": …, "offset": …}}``), integers and
  ``time`` as JSON numbers, ``key`` and ``value`` as base64 of the original bytes
  (``key`` null when the record had none) (``to_document`` / ``from_document``).

Decoding gives back the ``DeadLetter`` bounded, with its ``error`` bounded and its ``time``
rounded to the millisecond, as every writer wrote them (a letter written before
``original.*`` existed decodes as one that was not bounded). Engines that cannot call this
module per record (Spark) mirror ``FIELDS`` in their own expressions and are held to it
by a parity test.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, replace
from typing import Iterable

from domain.events import RawRecord, SourcePosition

HEADER_PREFIX = "dedup."
MAX_ERROR_CHARS = 1000
DEFAULT_MAX_BYTES = 64 * 1024  # a dead letter's key plus value at most: far below the 1 MB Kafka takes by default
TEXT, INTEGER, TIME = "text", "integer", "time"


@dataclass(frozen=True)
class Original:
    """The original value of a bounded dead letter, whose record holds only its first bytes."""

    size: int
    sha256: str

    @classmethod
    def of(cls, value: bytes) -> "Original":
        return cls(len(value), hashlib.sha256(value).hexdigest())


@dataclass(frozen=True)
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
    record = dead_letter.record
    if len(record.value) + len(record.key or b"") <= max_bytes:
        return dead_letter
    key = None if record.key is None else record.key[:max_bytes // 2]
    value = record.value[:max_bytes - len(key or b"")]
    original = dead_letter.original_value if len(value) < len(record.value) else dead_letter.original
    return replace(dead_letter, record=replace(record, value=value, key=key), original=original)


@dataclass(frozen=True)
class Field:
    """One metadata field: its name (dotted names nest in a document) and its kind. A field
    that is not ``required`` may be missing from what older writers wrote."""

    name: str
    kind: str
    required: bool = True

    @property
    def header(self) -> str:
        return HEADER_PREFIX + self.name


FIELDS = (
    Field("reason", TEXT), Field("error", TEXT), Field("error_class", TEXT),
    Field("source.topic", TEXT), Field("source.partition", INTEGER), Field("source.offset", INTEGER),
    Field("attempts", INTEGER), Field("time", TIME),
    Field("original.size", INTEGER, required=False), Field("original.sha256", TEXT, required=False),
)


def millis(seconds: float) -> int:
    """A time as the whole milliseconds every medium carries."""
    return round(seconds * 1000)


def time_text(ms: int) -> str:
    """``time``'s header text: ``<seconds>.<3 digits>``."""
    return f"{ms // 1000}.{ms % 1000:03d}"


def metadata(dead_letter: DeadLetter) -> dict[str, str | int]:
    """Each field's value by name (``time`` in milliseconds, ``error`` bounded)."""
    position, original = dead_letter.record.position, dead_letter.original_value
    return {"reason": dead_letter.reason, "error": dead_letter.error[:MAX_ERROR_CHARS],
            "error_class": dead_letter.error_class, "source.topic": position.source,
            "source.partition": position.partition, "source.offset": position.offset,
            "attempts": dead_letter.attempts, "time": millis(dead_letter.time),
            "original.size": original.size, "original.sha256": original.sha256}


def to_headers(dead_letter: DeadLetter) -> list[tuple[str, bytes]]:
    """The Kafka headers of ``dead_letter``, in ``FIELDS`` order (key and value go as they are)."""
    values = metadata(dead_letter)
    return [(f.header, _text(f, values[f.name]).encode()) for f in FIELDS]


def to_message(dead_letter: DeadLetter, max_bytes: int = DEFAULT_MAX_BYTES) \
        -> tuple[bytes, bytes | None, list[tuple[str, bytes]]]:
    """The Kafka message of ``dead_letter``, :func:`bounded` by ``max_bytes``: ``(value, key, headers)``."""
    letter = bounded(dead_letter, max_bytes)
    return letter.record.value, letter.record.key, to_headers(letter)


def from_headers(value: bytes, key: bytes | None, headers: Iterable[tuple[str, bytes]]) -> DeadLetter:
    """The dead letter a Kafka message carries. Raises ``ValueError`` when a field is missing or malformed."""
    by_name = {name: data for name, data in headers or () if name.startswith(HEADER_PREFIX)}
    missing = [f.header for f in FIELDS if f.required and f.header not in by_name]
    if missing:
        raise ValueError(f"not a dead letter: header {missing[0]!r} is missing")
    return _dead_letter(value, key, {f.name: _parse(f, by_name[f.header].decode()) for f in FIELDS
                                     if f.header in by_name})


def to_document(dead_letter: DeadLetter, max_bytes: int = DEFAULT_MAX_BYTES) -> dict:
    """The JSON document of ``dead_letter``, :func:`bounded` by ``max_bytes`` (a JSONL line once dumped)."""
    dead_letter = bounded(dead_letter, max_bytes)
    values = metadata(dead_letter)
    flat = {f.name: values[f.name] / 1000 if f.kind == TIME else values[f.name] for f in FIELDS}
    record = dead_letter.record
    flat.update(key=None if record.key is None else _b64(record.key), value=_b64(record.value))
    return nest(flat)


def from_document(document: dict) -> DeadLetter:
    """The dead letter a JSON document carries. Raises ``ValueError`` when a field is missing or malformed."""
    try:
        values = {f.name: _typed(f, _lookup(document, f.name)) for f in FIELDS
                  if f.required or _lookup(document, f.name, None) is not None}
        key, value = document["key"], base64.b64decode(document["value"], validate=True)
        key = None if key is None else base64.b64decode(key, validate=True)
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a dead letter document: {exc!r}") from None
    return _dead_letter(value, key, values)


def nest(flat: dict) -> dict:
    """``{"source.topic": t}`` → ``{"source": {"topic": t}}``, keeping the order of first appearance."""
    out: dict = {}
    for name, value in flat.items():
        *parents, leaf = name.split(".")
        node = out
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = value
    return out


def _dead_letter(value: bytes, key: bytes | None, values: dict) -> DeadLetter:
    position = SourcePosition(values["source.topic"], values["source.partition"], values["source.offset"])
    return DeadLetter(RawRecord(value, position, key), values["reason"], values["error"], values["error_class"],
                      values["attempts"], values["time"] / 1000, _original(value, values))


def _original(value: bytes, values: dict) -> Original | None:
    """The ``original`` a bounded letter carried; None when the value is whole (or the fields are missing)."""
    if "original.size" not in values or "original.sha256" not in values:
        return None
    original = Original(values["original.size"], values["original.sha256"])
    return None if original == Original.of(value) else original


def _text(field: Field, value: str | int) -> str:
    if field.kind == TIME:
        return time_text(value)
    return str(value)


def _parse(field: Field, text: str) -> str | int:
    if field.kind == INTEGER:
        return int(text)
    if field.kind == TIME:
        return millis(float(text))
    return text


def _typed(field: Field, value) -> str | int:
    wanted = {TEXT: (str,), INTEGER: (int,), TIME: (int, float)}[field.kind]
    if isinstance(value, bool) or not isinstance(value, wanted):
        raise TypeError(f"{field.name} is {value!r}, not {field.kind}")
    return millis(value) if field.kind == TIME else value


def _lookup(document: dict, name: str, *default):
    """The value at dotted ``name``; ``default`` when given and a part is missing (else ``KeyError``)."""
    node = document
    for part in name.split("."):
        if default and not (isinstance(node, dict) and part in node):
            return default[0]
        node = node[part]
    return node


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
