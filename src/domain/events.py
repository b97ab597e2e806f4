"""The wire format, strict parsing, and the records an engine moves around.

An event is the JSON object ``{"id", "uniqueValue", "type", "timestamp"}`` with string
fields and an integer ``timestamp`` in epoch seconds. Extra fields are allowed and kept:
output is always the record's original bytes, untouched.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from domain.errors import InvalidEvent

REQUIRED_STRING_FIELDS = ("id", "uniqueValue", "type")
MAX_TIMESTAMP = 253_402_300_799  # 9999-12-31T23:59:59Z; a larger value is most likely milliseconds


@dataclass(frozen=True)
class SourcePosition:
    """Where a record came from: a Kafka (topic, partition, offset) or a file and line."""

    source: str
    partition: int
    offset: int

    def token(self) -> str:
        return f"{self.source}:{self.partition}:{self.offset}"

    def partition_name(self) -> str:
        """The partition this record was read from, as the watermarks name it (``source:partition``)."""
        return f"{self.source}:{self.partition}"


@dataclass(frozen=True)
class RawRecord:
    """One input record as read: its bytes, optional key bytes and its position.

    ``arrived`` is when it reached the input, in epoch seconds (a Kafka record's timestamp, the
    time a line was read): where the end-to-end latency of its output is measured from.
    """

    value: bytes
    position: SourcePosition
    key: bytes | None = None
    arrived: float | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Event:
    id: str
    unique_value: str
    type: str
    timestamp: int
    fields: dict = field(default_factory=dict, compare=False, repr=False)

    def field_value(self, name: str) -> str:
        """The value of a wire field by its wire name, as text (used to build keys)."""
        if name == "uniqueValue":
            return self.unique_value
        if name in ("id", "type"):
            return getattr(self, name)
        if name == "timestamp":
            return str(self.timestamp)
        value = self.fields.get(name)
        if value is None:
            raise InvalidEvent("missing_field", f"key field {name!r} is missing", name)
        return value if isinstance(value, str) else json.dumps(value, sort_keys=True)

    def to_wire(self) -> dict:
        return {**self.fields, "id": self.id, "uniqueValue": self.unique_value,
                "type": self.type, "timestamp": self.timestamp}


def parse_event(value: bytes) -> Event:
    """Parse one record strictly; raises ``InvalidEvent`` with a machine-readable code.

    Codes: ``not_utf8``, ``not_json``, ``not_object``, ``missing_field``, ``null_field``,
    ``wrong_type``, ``empty_field``, ``out_of_range``.
    """
    obj = parse_json(value)
    if not isinstance(obj, dict):
        raise InvalidEvent("not_object", f"record is a JSON {type(obj).__name__}, not an object")
    return event_from_object(obj)


def parse_json(value: bytes, what: str = "record") -> object:
    """A record's bytes as JSON, strictly: UTF-8, JSON this parser accepts (not nested too deeply),
    no lone UTF-16 surrogate. Raises ``InvalidEvent`` (``not_utf8``, ``not_json``) naming ``what``."""
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidEvent("not_utf8", f"{what} is not UTF-8: {exc.reason} at byte {exc.start}") from None
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise InvalidEvent("not_json", f"{what} is not JSON: {exc}") from None
    except RecursionError:
        raise InvalidEvent("not_json", f"{what} is not JSON this parser accepts: nested too deeply") from None
    if LONE_SURROGATE_ESCAPE.search(text):
        _refuse_lone_surrogates(obj)
    return obj


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
            raise InvalidEvent("not_utf8", f"record holds a lone UTF-16 surrogate {value[exc.start]!r} "
                                          "(a JSON escape \\ud800-\\udfff without its pair)") from None


def event_from_object(obj: dict) -> Event:
    for name in REQUIRED_STRING_FIELDS:
        _require_string(obj, name)
    timestamp = _require_timestamp(obj)
    extra = {k: v for k, v in obj.items() if k not in (*REQUIRED_STRING_FIELDS, "timestamp")}
    return Event(obj["id"], obj["uniqueValue"], obj["type"], timestamp, extra)


def _require_present(obj: dict, name: str) -> object:
    if name not in obj:
        raise InvalidEvent("missing_field", f"field {name!r} is missing", name)
    if obj[name] is None:
        raise InvalidEvent("null_field", f"field {name!r} is null", name)
    return obj[name]


def _require_string(obj: dict, name: str) -> str:
    value = _require_present(obj, name)
    if not isinstance(value, str):
        raise InvalidEvent("wrong_type", f"field {name!r} must be a string, got {_json_type(value)}", name)
    if not value.strip():
        raise InvalidEvent("empty_field", f"field {name!r} is empty", name)
    return value


def _require_timestamp(obj: dict) -> int:
    value = _require_present(obj, "timestamp")
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidEvent("wrong_type",
                           f"field 'timestamp' must be an integer (epoch seconds), got {_json_type(value)}",
                           "timestamp")
    if not 0 <= value <= MAX_TIMESTAMP:
        raise InvalidEvent("out_of_range",
                           f"field 'timestamp' {value} is not epoch seconds in 0..{MAX_TIMESTAMP}", "timestamp")
    return value


def _json_type(value: object) -> str:
    names = {bool: "boolean", int: "number", float: "number", str: "string", list: "array", dict: "object"}
    return names.get(type(value), type(value).__name__)
