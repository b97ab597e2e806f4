"""How a record travels with metadata about it: one pair of encodings for every such output.

A dead letter (``domain._dead_letters``) and a duplicate report (``domain._duplicates``) are
both an original record (its key and value bytes) plus named metadata fields, each field
text, an integer or a time. Two media, the same field names:

* **Kafka**: the message's value and key are the original ones; each field is a header
  named ``dedup.<field>`` whose value is UTF-8 text: text as it is, integers in decimal, a
  time as ``<seconds>.<3 digits>`` (:func:`to_headers` / :func:`from_headers`).
* **JSON document** (a JSONL line): each field under its name, dotted names nested
  (``{"source": {"topic": …}}``), integers and times as JSON numbers, ``key`` and ``value``
  as base64 of the original bytes (``key`` null when the record had none)
  (:func:`to_document` / :func:`from_document`).

Times are carried to the millisecond: values hold them as whole milliseconds (:func:`millis`).
A record larger than its output takes is carried cut (:func:`cut_to`), with its original
value's size and digest (:class:`Original`, fields ``original.size`` and ``original.sha256``).
A field that is not ``required`` may be missing (an older writer, or a value unknown).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from domain._events import RawRecord

HEADER_PREFIX = "dedup."
TEXT, INTEGER, TIME = "text", "integer", "time"


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


@dataclass(frozen=True)
class Original:
    """The original value of a record carried cut (:func:`cut_to`): its size and SHA-256."""

    size: int
    sha256: str

    @classmethod
    def of(cls, value: bytes) -> Original:
        return cls(len(value), hashlib.sha256(value).hexdigest())


def cut_to(record: RawRecord, max_bytes: int) -> RawRecord:
    """``record`` as it is when its key plus value fit ``max_bytes``; otherwise with its key
    cut to at most ``max_bytes // 2`` bytes and its value to the rest."""
    if len(record.value) + len(record.key or b"") <= max_bytes:
        return record
    key = None if record.key is None else record.key[: max_bytes // 2]
    return replace(record, value=record.value[: max_bytes - len(key or b"")], key=key)


def millis(seconds: float) -> int:
    """A time as the whole milliseconds every medium carries."""
    return round(seconds * 1000)


def time_text(ms: int) -> str:
    """A time's header text: ``<seconds>.<3 digits>``."""
    return f"{ms // 1000}.{ms % 1000:03d}"


def to_headers(fields: Sequence[Field], values: dict[str, Any]) -> list[tuple[str, bytes]]:
    """The ``dedup.*`` headers of ``values``, in ``fields`` order; a field whose value is None is left out."""
    return [(f.header, _text(f, values[f.name]).encode()) for f in fields if values.get(f.name) is not None]


def from_headers(fields: Sequence[Field], headers: Iterable[tuple[str, bytes]] | None, what: str) -> dict[str, Any]:
    """The values the ``dedup.*`` headers carry. Raises ``ValueError`` naming ``what`` when a
    required field is missing or a field is malformed."""
    by_name = {name: data for name, data in headers or () if name.startswith(HEADER_PREFIX)}
    missing = [f.header for f in fields if f.required and f.header not in by_name]
    if missing:
        raise ValueError(f"not a {what}: header {missing[0]!r} is missing")
    return {f.name: _parse(f, by_name[f.header].decode()) for f in fields if f.header in by_name}


def to_document(fields: Sequence[Field], values: dict[str, Any], key: bytes | None, value: bytes) -> dict[str, Any]:
    """The JSON document of ``values`` and the record's bytes; a field whose value is None is left out."""
    flat = {
        f.name: values[f.name] / 1000 if f.kind == TIME else values[f.name]
        for f in fields
        if values.get(f.name) is not None
    }
    flat.update(key=None if key is None else _b64(key), value=_b64(value))
    return nest(flat)


def from_document(
    fields: Sequence[Field], document: dict[str, Any], what: str
) -> tuple[dict[str, Any], bytes | None, bytes]:
    """``(values, key, value)`` a JSON document carries. Raises ``ValueError`` naming ``what``
    when a required field is missing or a field is malformed."""
    try:
        values = {
            f.name: _typed(f, _lookup(document, f.name))
            for f in fields
            if f.required or _lookup(document, f.name, None) is not None
        }
        key, value = document["key"], base64.b64decode(document["value"], validate=True)
        key = None if key is None else base64.b64decode(key, validate=True)
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a {what} document: {exc!r}") from None
    return values, key, value


def nest(flat: dict[str, Any]) -> dict[str, Any]:
    """``{"source.topic": t}`` → ``{"source": {"topic": t}}``, keeping the order of first appearance."""
    out: dict[str, Any] = {}
    for name, value in flat.items():
        *parents, leaf = name.split(".")
        node = out
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = value
    return out


def _text(field: Field, value: str | int) -> str:
    if field.kind == TIME and isinstance(value, int):
        return time_text(value)
    return str(value)


def _parse(field: Field, text: str) -> str | int:
    if field.kind == INTEGER:
        return int(text)
    if field.kind == TIME:
        return millis(float(text))
    return text


def _typed(field: Field, value: object) -> str | int:
    if not isinstance(value, bool):
        if field.kind == TEXT and isinstance(value, str):
            return value
        if field.kind == INTEGER and isinstance(value, int):
            return value
        if field.kind == TIME and isinstance(value, (int, float)):
            return millis(value)
    raise TypeError(f"{field.name} is {value!r}, not {field.kind}")


def _lookup(document: dict[str, Any], name: str, *default: object) -> Any:
    """The value at dotted ``name``; ``default`` when given and a part is missing (else ``KeyError``)."""
    node = document
    for part in name.split("."):
        if default and not (isinstance(node, dict) and part in node):
            return default[0]
        node = node[part]
    return node


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
