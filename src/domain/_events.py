"""The wire format, strict parsing, and the records an engine moves around.

An event is the JSON object ``{"id", "uniqueValue", "type", "timestamp"}`` with string
fields and an integer ``timestamp`` in epoch seconds. Extra fields are allowed and kept:
output is always the record's original bytes, untouched.

The types built for every input record (``SourcePosition``, ``RawRecord``, ``Event``, and
``domain._state.Claim``) are slotted dataclasses that are not frozen: a frozen one's constructor
sets each field through ``object.__setattr__``, which made judging a record about 11% slower
(in-process, 8.97 → 7.96 µs), and a frozen ``SourcePosition`` cost 0.37 µs where this one costs
0.12. They are values all the same: nothing assigns to them once built (``SourcePosition``
keeps its hash: it keys dicts).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from domain._errors import InvalidEvent
from domain._keys import KeyValue

REQUIRED_STRING_FIELDS = ("id", "uniqueValue", "type")
MAX_TIMESTAMP = 253_402_300_799  # 9999-12-31T23:59:59Z; a larger value is most likely milliseconds


@dataclass(slots=True, unsafe_hash=True)
class SourcePosition:
    """Where a record came from: a Kafka (topic, partition, offset) or a file and line."""

    source: str
    partition: int
    offset: int

    def token(self) -> str:
        return f"{self.source}:{self.partition}:{self.offset}"

    @classmethod
    def from_token(cls, token: str) -> SourcePosition | None:
        """The position a :meth:`token` names (a token may add ``#…`` after the offset, as a
        file's lines do); None for one that names none (an emission whose owner is unknown:
        made by an old state format, or with no position)."""
        source, sep, offset = token.rpartition(":")
        source, sep2, partition = source.rpartition(":")
        try:
            return cls(source, int(partition), int(offset.partition("#")[0])) if sep and sep2 else None
        except ValueError:
            return None

    def partition_name(self) -> str:
        """The partition this record was read from, as the watermarks name it (``source:partition``)."""
        return f"{self.source}:{self.partition}"


@dataclass(slots=True)
class RawRecord:
    """One input record as read: its bytes, optional key bytes and its position.

    ``arrived`` is when it reached the input, in epoch seconds (a Kafka record's timestamp, the
    time a line was read): where the end-to-end latency of its output is measured from.
    """

    value: bytes
    position: SourcePosition
    key: bytes | None = None
    arrived: float | None = field(default=None, compare=False)


@dataclass(slots=True)
class Event:
    id: str
    unique_value: str
    type: str
    timestamp: int
    fields: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def field_value(self, name: str) -> KeyValue:
        """The value of a wire field by its wire name, as a key's part holds it (``domain._keys``).

        Raises ``InvalidEvent``: ``missing_field`` when it is missing or null, ``wrong_type``
        unless it is a string, a boolean or an integer written without fraction or exponent
        that fits in 64 bits (a number's spelling, an array's or an object's is not the same
        on every engine, and ``1`` must not key as ``"1"``).
        """
        if name == "uniqueValue":
            return self.unique_value
        if name in ("id", "type"):
            return self.id if name == "id" else self.type
        if name == "timestamp":
            return str(self.timestamp)
        value = self.fields.get(name)
        if value is None:
            raise InvalidEvent("missing_field", f"key field {name!r} is missing", name)
        if isinstance(value, (str, bool)) or (type(value) is int and KEY_INTEGERS[0] <= value <= KEY_INTEGERS[1]):
            return value
        kind = "an integer beyond 64 bits" if type(value) is int else _json_type(value)
        raise InvalidEvent(
            "wrong_type", f"key field {name!r} must be a string, an integer or a boolean, got {kind}", name
        )

    def to_wire(self) -> dict[str, Any]:
        return {
            **self.fields,
            "id": self.id,
            "uniqueValue": self.unique_value,
            "type": self.type,
            "timestamp": self.timestamp,
        }


KEY_INTEGERS = (-(2**63), 2**63 - 1)
"""The integers a key field may hold (a JVM long's range)."""


def parse_event(value: bytes, decode: Callable[[bytes], object] | None = None) -> Event:
    """Parse one record strictly; raises ``InvalidEvent`` with a machine-readable code.

    Codes: ``not_utf8``, ``not_json``, ``not_object``, ``missing_field``, ``null_field``,
    ``wrong_type``, ``empty_field``, ``out_of_range``. ``decode``: a faster reader of the
    JSON that answers as ``parse_json`` does (``domain._ports.JsonDecoder``); that one by default.
    """
    obj = (decode or parse_json)(value)
    if not isinstance(obj, dict):
        raise InvalidEvent("not_object", f"record is a JSON {type(obj).__name__}, not an object")
    return event_from_object(obj)


def parse_json(value: bytes, what: str = "record") -> object:
    """A record's bytes as JSON, strictly: UTF-8, JSON this parser accepts (not nested too deeply),
    no ``NaN``/``Infinity``, no member name twice in one object, no lone UTF-16 surrogate. Raises ``InvalidEvent`` (``not_utf8``, ``not_json``) naming ``what``."""
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidEvent("not_utf8", f"{what} is not UTF-8: {exc.reason} at byte {exc.start}") from None
    try:
        obj = _STRICT.decode(text)
    except ValueError as exc:
        raise InvalidEvent("not_json", f"{what} is not JSON: {exc}") from None
    except RecursionError:
        raise InvalidEvent("not_json", f"{what} is not JSON this parser accepts: nested too deeply") from None
    if LONE_SURROGATE_ESCAPE.search(text):
        _refuse_lone_surrogates(obj)
    return obj


def _not_a_number(literal: str) -> object:
    """``NaN``, ``Infinity`` and ``-Infinity`` are not JSON (RFC 8259), whatever Python's json accepts."""
    raise ValueError(f"{literal} is not a JSON number")


def _unique_members(pairs: list[tuple[str, object]]) -> dict[str, Any]:
    """An object whose member names are unique, at any depth: a name given twice means
    different things to different readers (first-wins or last-wins), so it is refused."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise ValueError(f"member {name!r} occurs more than once in an object")
            seen.add(name)
    return obj


_STRICT = json.JSONDecoder(parse_constant=_not_a_number, object_pairs_hook=_unique_members)
"""One decoder for every record (``json.loads`` with options builds one per call)."""


def is_blank_line(line: bytes) -> bool:
    """A line of a line-delimited input that holds no record (framing): empty, or only
    whitespace as ``str.strip`` sees it (Unicode White_Space and the ASCII separators
    ``\x1c``-``\x1f``). A line that is not UTF-8 is a record (dead-lettered ``not_utf8``)."""
    stripped = line.strip()
    if not stripped:
        return True
    if stripped[:1] in (b"{", b"[", b'"'):
        return False
    try:
        return not line.decode("utf-8").strip()
    except UnicodeDecodeError:
        return False


LONE_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
"""Any ``\\uD800``–``\\uDFFF`` escape: a cheap test before the exact one."""


def _refuse_lone_surrogates(value: object) -> None:
    """A JSON string may escape a lone UTF-16 surrogate, which no UTF-8 text (a state key, a
    Kafka header, a snapshot line) can hold: such a record is not valid text."""
    if isinstance(value, dict):
        for item in (*value.keys(), *value.values()):
            _refuse_lone_surrogates(item)
    elif isinstance(value, list):
        for item in value:
            _refuse_lone_surrogates(item)
    elif isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidEvent(
                "not_utf8",
                f"record holds a lone UTF-16 surrogate {value[exc.start]!r} "
                "(a JSON escape \\ud800-\\udfff without its pair)",
            ) from None


def event_from_object(obj: dict[str, Any]) -> Event:
    """The event an object holds, or ``InvalidEvent`` (see ``parse_event`` for the codes)."""
    id_: Any
    unique_value: Any
    type_: Any
    timestamp: Any
    id_, unique_value, type_, timestamp = (obj.get("id"), obj.get("uniqueValue"), obj.get("type"), obj.get("timestamp"))
    if not (
        type(id_) is str
        and type(unique_value) is str
        and type(type_) is str
        and type(timestamp) is int
        and id_.strip()
        and unique_value.strip()
        and type_.strip()
        and 0 <= timestamp <= MAX_TIMESTAMP
    ):
        for name in REQUIRED_STRING_FIELDS:
            _require_string(obj, name)
        timestamp = _require_timestamp(obj)
    if len(obj) == 4:
        return Event(id_, unique_value, type_, timestamp, {})
    extra = {k: v for k, v in obj.items() if k not in _REQUIRED_FIELDS}
    return Event(id_, unique_value, type_, timestamp, extra)


_REQUIRED_FIELDS = frozenset((*REQUIRED_STRING_FIELDS, "timestamp"))


def _require_present(obj: dict[str, Any], name: str) -> object:
    if name not in obj:
        raise InvalidEvent("missing_field", f"field {name!r} is missing", name)
    if obj[name] is None:
        raise InvalidEvent("null_field", f"field {name!r} is null", name)
    return obj[name]


def _require_string(obj: dict[str, Any], name: str) -> str:
    value = _require_present(obj, name)
    if not isinstance(value, str):
        raise InvalidEvent("wrong_type", f"field {name!r} must be a string, got {_json_type(value)}", name)
    if not value.strip():
        raise InvalidEvent("empty_field", f"field {name!r} is empty", name)
    return value


def _require_timestamp(obj: dict[str, Any]) -> int:
    value = _require_present(obj, "timestamp")
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidEvent(
            "wrong_type", f"field 'timestamp' must be an integer (epoch seconds), got {_json_type(value)}", "timestamp"
        )
    if not 0 <= value <= MAX_TIMESTAMP:
        raise InvalidEvent(
            "out_of_range", f"field 'timestamp' {value} is not epoch seconds in 0..{MAX_TIMESTAMP}", "timestamp"
        )
    return value


def _json_type(value: object) -> str:
    names = {bool: "boolean", int: "number", float: "number", str: "string", list: "array", dict: "object"}
    return names.get(type(value), type(value).__name__)
