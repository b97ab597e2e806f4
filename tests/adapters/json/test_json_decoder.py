"""The msgspec readers answer exactly as the domain's parser, record for record: ``decode_json``
as ``parse_json``, ``read_event`` as ``parse_event``."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.json import decode_json, read_event
from domain import InvalidEvent, parse_event, parse_json
from tests.support import hostile
from tests.support.scenarios import INVALID_RECORDS


def answer(decode, value: bytes):
    """What a decoder makes of ``value``: ('ok', the value) or ('error', code, text)."""
    try:
        return "ok", decode(value)
    except InvalidEvent as exc:
        return "error", exc.reason, str(exc)


def event_answer(value: bytes, decode):
    return read_answer(lambda raw: parse_event(raw, decode), value)


def read_answer(read, value: bytes):
    """What an event reader makes of ``value``: ('ok', the event, its fields) or ('error', code, text)."""
    try:
        event = read(value)
    except InvalidEvent as exc:
        return "error", exc.reason, str(exc)
    return "ok", event, event.fields


def same_answers(value: bytes) -> None:
    """Both fast readers give the domain's answers for ``value``."""
    assert answer(decode_json, value) == answer(parse_json, value)
    assert event_answer(value, decode_json) == event_answer(value, None)
    assert read_answer(read_event, value) == event_answer(value, None)


EVENT = b'{"id": "9ea7f44f", "uniqueValue": "656b4183-282c-1689019596", "type": "WEB", "timestamp": 1689019717}'
TRICKY = (
    EVENT,
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":1,"uniqueValue":"j"}',
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":1,"a":1,"a":1}',
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":1,"a":{"b":1,"b":2}}',
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":1,"a":[{"b":1,"b":2}]}',
    b'{"id":"1","uniqueValue":"k\\"","type":"APP","timestamp":1}',
    b'{"id":"1","uniqueValue":"\\ud800","type":"APP","timestamp":1}',
    b'{"id":"1","uniqueValue":"\\ud83d\\ude00","type":"APP","timestamp":1}',
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":123456789012345678901234567890}',
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":1,"n":123456789012345678901234567890}',
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":1,"n":1e400}',
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":1,"n":NaN}',
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":-Infinity}',
    b'\xef\xbb\xbf{"id":"1","uniqueValue":"k","type":"APP","timestamp":1}',
    b'\x0c{"id":"1","uniqueValue":"k","type":"APP","timestamp":1}',
    b' \t\r\n{"id":"1","uniqueValue":"k","type":"APP","timestamp":1} \n',
    b'{"id":"1","uniqueValue":"k\x01","type":"APP","timestamp":1}',
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":1}{"a":1}',
    b'{"id":"1","uniqueValue":"\xed\xa0\x80","type":"APP","timestamp":1}',
    b'{"id":"1","uniqueValue":"\xc0\x80","type":"APP","timestamp":1}',
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":01}',
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":1,}',
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":1,"":""}',
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":1,"":"","":""}',
    b'{"id":"1","uniqueValue":"","type":"APP","timestamp":1}',
    b"[" * 5000 + b"]" * 5000,
    b'{"a":' * 3000 + b"1" + b"}" * 3000,
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":1,"deep":' + b"[" * 990 + b"]" * 990 + b"}",
    # the plain event's own fast path (``read_event``): seven strings, types checked by msgspec
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":253402300799}',
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":253402300800}',
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":-1}',
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":-0}',
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":1.0}',
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":true}',
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":null}',
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":"1"}',
    b'{"id":"1","uniqueValue":" ","type":"APP","timestamp":1}',
    b'{"id":"1","uniqueValue":"\\u3000","type":"APP","timestamp":1}',
    b'{"id":"1","uniqueValue":"\xe3\x80\x80","type":"APP","timestamp":1}',  # U+3000 in UTF-8: blank to str.strip
    b'{"id":"1","uniqueValue":1,"type":"APP","timestamp":1,"x":"y"}',
    b'{"id":"1","uniqueValue":"k","type":"APP","id":"2"}',
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":1,"timestamp":2}',
    b'{"id":"1","uniqueValue":"k","type":"APP","type":"WEB"}',
    b'{"id":"1","type":"APP","timestamp":1,"uniqueValue":"k"}',
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":1,"x":1}',
    b'{"id":"1","uniqueValue":"k","type":"APP","x":"","timestamp":1}',
    b'{"id":"1","uniqueValue":"k\\u0022","type":"APP","timestamp":1}',
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":1}]',
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":1}',
    b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":99999999999999999999999}',
)


@pytest.mark.parametrize("value", [v for v, _ in INVALID_RECORDS] + list(TRICKY) + [row[0] for row in hostile.STATIC])
def test_every_table_record_gets_the_domains_answer(value):
    same_answers(value)


def test_a_repeated_member_name_is_refused_as_the_domain_refuses_it():
    assert answer(decode_json, TRICKY[1])[:2] == ("error", "not_json")


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
_names = st.sampled_from(["id", "uniqueValue", "type", "timestamp", "session", "a", "", "é"])


def _object_text(draw, members: list, mangle_one_in: int) -> bytes:
    """The JSON object of ``members`` (name, value); one time in ``mangle_one_in`` a byte replaced."""
    raw = ("{" + ",".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in members) + "}").encode()
    if draw(st.integers(1, mangle_one_in)) == 1:
        at = draw(st.integers(min_value=0, max_value=len(raw) - 1))
        raw = raw[:at] + draw(st.sampled_from([b'"', b"\\", b",", b"\x80", b"}", b" ", b"{", b"1"])) + raw[at + 1 :]
    return raw


@st.composite
def documents(draw):
    """A JSON object text, sometimes with a member repeated, nested, or its bytes mangled."""
    members = draw(st.lists(st.tuples(_names, st.one_of(_scalars, st.lists(_scalars, max_size=2))), max_size=7))
    return _object_text(draw, members, mangle_one_in=2)


@settings(max_examples=600, deadline=None)
@given(documents())
def test_generated_documents_get_the_domains_answer(value):
    same_answers(value)


_plain_strings = st.one_of(st.text(max_size=6), st.sampled_from(["", " ", "\t", "\u3000", "k", "\x7f", '"', "\\"]))
_plain_times = st.one_of(
    st.integers(min_value=-2, max_value=2),
    st.integers(min_value=253402300797, max_value=253402300801),
    st.integers(min_value=-(2**65), max_value=2**65),
    st.sampled_from([True, None, 1.5, "1"]),
)


@st.composite
def plain_events(draw):
    """An event of the four fields (the fast path's shape), its values and order varied, sometimes
    a member dropped, repeated or added, sometimes a byte mangled."""
    members = [
        ("id", draw(_plain_strings)),
        ("uniqueValue", draw(_plain_strings)),
        ("type", draw(st.one_of(_plain_strings, st.sampled_from(["APP", "WEB"])))),
        ("timestamp", draw(_plain_times)),
    ]
    members = draw(st.permutations(members))
    change = draw(st.sampled_from(["none", "none", "drop", "repeat", "add"]))
    if change == "drop":
        members = members[1:]
    elif change == "repeat":
        members = [*members, draw(st.sampled_from(members))]
    elif change == "add":
        members = [*members, (draw(_names), draw(_scalars))]
    return _object_text(draw, members, mangle_one_in=5)


@settings(max_examples=1500, deadline=None)
@given(plain_events())
def test_plain_events_get_the_domains_answer(value):
    same_answers(value)
