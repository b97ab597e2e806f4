"""A ``domain._ports.EventReader`` over msgspec, certified against ``domain._events.parse_event``.

Most records are a plain event: the four fields and nothing else. msgspec decodes such a record
straight into a typed struct (about 0.6 µs, types checked in C), where the generic path decodes
a dict, checks that it holds no repeated name and no nesting, then checks each field's type in
Python (about 3 µs in all). The struct's answer is used only where it is certainly the domain's:

* no backslash in the record (so no escape: every ``"`` opens or closes a string, and no lone
  UTF-16 surrogate can be spelled);
* exactly 14 ``"``: the struct holds seven strings (four member names, three string values),
  so a member given twice, or any other string, makes the count differ;
* msgspec accepts it as an object of exactly these members (no other member, no missing one),
  the three strings as strings, the timestamp an integer (not a float, not a boolean);
* the domain's own checks hold: no blank string, the timestamp in ``0..MAX_TIMESTAMP``.

Every other record (extra fields, escapes, anything msgspec refuses) is read by
``domain._events.parse_event`` over this package's ``decode_json``, which gives the verdict and
the error text. ``tests/adapters/json/test_json_decoder.py`` holds the two readers to the same answers.
"""

from __future__ import annotations

import msgspec

from adapters.json._decoder import decode_json
from domain import MAX_TIMESTAMP, Event, parse_event

_QUOTES_OF_A_PLAIN_EVENT = 14


class _PlainEvent(msgspec.Struct, forbid_unknown_fields=True):
    id: str
    uniqueValue: str  # the wire's name
    type: str
    timestamp: int


_PLAIN = msgspec.json.Decoder(_PlainEvent)


def read_event(value: bytes) -> Event:
    """The event of ``value`` exactly as ``domain._events.parse_event`` reads it (it raises what
    that function raises)."""
    if b"\\" not in value and value.count(b'"') == _QUOTES_OF_A_PLAIN_EVENT:
        try:
            plain = _PLAIN.decode(value)
        except msgspec.MsgspecError:
            pass
        else:
            id_, unique_value, type_, timestamp = plain.id, plain.uniqueValue, plain.type, plain.timestamp
            if id_.strip() and unique_value.strip() and type_.strip() and 0 <= timestamp <= MAX_TIMESTAMP:
                return Event(id_, unique_value, type_, timestamp, {})
    return parse_event(value, decode_json)
