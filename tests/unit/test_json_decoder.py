"""The msgspec decoder answers exactly as the domain's parser, record for record."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.json import decode_json
from domain.errors import InvalidEvent
from domain.events import parse_event, parse_json
from tests import hostile
from tests.scenarios import INVALID_RECORDS


def answer(decode, value: bytes):
    """What a decoder makes of ``value``: ('ok', the value) or ('error', code, text)."""
    try:
        return "ok", decode(value)
    except InvalidEvent as exc:
        return "error", exc.reason, str(exc)


def event_answer(value: bytes, decode):
    try:
        event = parse_event(value, decode)
    except InvalidEvent as exc:
        return "error", exc.reason, str(exc)
    return "ok", event, event.fields


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
)


@pytest.mark.parametrize("value", [v for v, _ in INVALID_RECORDS] + list(TRICKY) + [row[0] for row in hostile.STATIC])
def test_every_table_record_gets_the_domains_answer(value):
    assert answer(decode_json, value) == answer(parse_json, value)
    assert event_answer(value, decode_json) == event_answer(value, None)


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


@st.composite
def documents(draw):
    """A JSON object text, sometimes with a member repeated, nested, or its bytes mangled."""
    members = draw(st.lists(st.tuples(_names, st.one_of(_scalars, st.lists(_scalars, max_size=2))), max_size=7))
    text = "{" + ",".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in members) + "}"
    raw = text.encode()
    if draw(st.booleans()) and raw:
        at = draw(st.integers(min_value=0, max_value=len(raw) - 1))
        raw = raw[:at] + draw(st.sampled_from([b'"', b"\\", b",", b"\x80", b"}", b" ", b"{"])) + raw[at + 1 :]
    return raw


@settings(max_examples=600, deadline=None)
@given(documents())
def test_generated_documents_get_the_domains_answer(value):
    assert answer(decode_json, value) == answer(parse_json, value)
    assert event_answer(value, decode_json) == event_answer(value, None)
