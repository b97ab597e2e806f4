"""State keys (``domain._keys``): one key per rule and values, ordinary keys spelled as before,
and the collision through the separator gone, end to end through the memory engine."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app import main
from domain import (
    DedupRule,
    Emission,
    current_key,
    dead_letters,
    decode_key,
    encode,
    encode_key,
    encode_v1,
    encode_v2,
    from_legacy,
    parse_event,
    rule_of,
    split_parts,
    unescape,
)

TRICKY = [
    "",
    "a",
    "\x1f",
    "\x1e",
    "\x1e0",
    "\x1e1",
    "a\x1fb",
    "\x1f\x1f",
    "\x1e\x1f",
    "0",
    "1",
    "caf\u00e9 \u2603",
    "|",
    "\\x1f",
]
parts = st.text(alphabet=st.sampled_from(["a", "0", "1", "\x1e", "\x1f", "\u00e9", "|"]), max_size=6)


@given(st.text(), st.lists(st.text(), max_size=4))
def test_a_key_decodes_to_its_rule_and_values(rule, values):
    assert decode_key(encode_key(rule, values)) == (rule, tuple(values))
    assert rule_of(encode_key(rule, values)) == rule


@given(parts, st.lists(parts, min_size=1, max_size=3), parts, st.lists(parts, min_size=1, max_size=3))
def test_two_keys_are_equal_only_for_the_same_rule_and_values(rule_a, values_a, rule_b, values_b):
    same = (rule_a, values_a) == (rule_b, values_b)
    assert (encode_key(rule_a, values_a) == encode_key(rule_b, values_b)) is same


def test_values_holding_the_separator_no_longer_collide():
    assert encode_key("APP", ["a\x1fb", "c"]) != encode_key("APP", ["a", "b\x1fc"])
    assert encode_key("APP", ["a\x1e1b"]) != encode_key("APP", ["a\x1fb"])


@pytest.mark.parametrize("values", [["u1"], ["u1", "WEB"], ["656b4183-282c-1689019596", "caf\u00e9"], [""]])
def test_ordinary_keys_are_spelled_as_before(values):
    assert encode_key("APP", values) == "\x1f".join(["APP", *values])
    assert from_legacy(encode_key("APP", values)) == encode_key("APP", values)


@pytest.mark.parametrize("malformed", ["a\x1e", "a\x1e2", "\x1ex"])
def test_a_malformed_escape_is_refused(malformed):
    with pytest.raises(ValueError, match="must be followed by 0 or 1"):
        unescape(malformed)


def test_the_state_key_of_an_event_is_its_rule_and_values_escaped():
    rule = DedupRule("APP", 30, key_fields=("uniqueValue", "session"))
    event = parse_event(
        json.dumps({"id": "1", "uniqueValue": "a\x1fb", "type": "APP", "timestamp": 1, "session": "c"}).encode()
    )
    assert rule.state_key(event) == "APP\x1fa\x1e1b\x1fc"
    assert split_parts(rule.state_key(event)) == ("APP", "a\x1fb", "c")


@pytest.mark.parametrize(
    "legacy, version, current",
    [
        ("APP\x1fu1", 2, "APP\x1fu1"),  # ordinary: the same key
        ("APP\x1fa\x1eb", 2, "APP\x1fa\x1e0b"),  # unambiguous legacy key holding the escape
        ("APP\x1fa\x1e0", 1, "APP\x1fa\x1e00"),  # not the current key of "a\x1e"
        ("APP\x1fa\x1fb", 2, "APP\x1fa\x1fb"),  # ambiguous (one field, two parts): matches no key
        ("APP\x1fa\x1e0", 3, "APP\x1fa\x1e0"),  # current format: as stored
    ],
)
def test_a_stored_key_is_read_in_the_spelling_of_its_value_version(legacy, version, current):
    assert current_key(legacy, version) == current


def test_the_value_format_is_v3_with_the_v2_body():
    entries = (Emission(100, 160, "in:0:7"),)
    assert encode(entries) == "3|100,160,in%3A0%3A7"
    assert encode_v2(entries) == "2|100,160,in%3A0%3A7"
    assert encode_v1(entries) == "1|100,160"


def event(id_: str, unique: str, session: str) -> bytes:
    return json.dumps(
        {"id": id_, "uniqueValue": unique, "type": "APP", "timestamp": 1_700_000_000, "session": session}
    ).encode()


def test_the_memory_engine_emits_both_events_whose_values_only_shift_the_separator(tmp_path):
    config = tmp_path / "dedup.yaml"
    config.write_text("rules:\n  APP:\n    window: 30\n    key_fields: [uniqueValue, session]\n")
    records = [event("1", "a\x1fb", "c"), event("2", "a", "b\x1fc"), event("3", "a", "b\x1fc")]
    (tmp_path / "in.jsonl").write_bytes(b"\n".join(records) + b"\n")
    code = main(
        [
            "run",
            "--engine",
            "memory",
            "--config",
            str(config),
            "--source",
            f"file:{tmp_path / 'in.jsonl'}",
            "--sink",
            f"file:{tmp_path / 'out.jsonl'}",
            "--dlq",
            f"file:{tmp_path / 'dlq.jsonl'}",
            "--summary-json",
            str(tmp_path / "summary.json"),
        ]
    )
    assert code == 0
    assert (tmp_path / "out.jsonl").read_bytes().splitlines() == records[:2]  # the third is a real duplicate
    assert (
        not (tmp_path / "dlq.jsonl").exists()
        or [dead_letters.from_document(json.loads(line)) for line in (tmp_path / "dlq.jsonl").read_text().splitlines()]
        == []
    )
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (summary["in"], summary["out"], summary["duplicates"]) == (3, 2, 1)


@pytest.mark.parametrize(
    "first, second", [(1, "1"), (True, "true"), (False, "false"), (0, "0"), (1, True), (0, False), (-5, "-5")]
)
def test_a_value_and_its_text_as_a_string_are_two_keys(first, second):
    from domain import DedupRule, parse_event

    rule = DedupRule("APP", 30, key_fields=("uniqueValue", "session"))
    keys = [
        rule.state_key(
            parse_event(
                json.dumps({"id": "1", "uniqueValue": "u", "type": "APP", "timestamp": 1, "session": v}).encode()
            )
        )
        for v in (first, second)
    ]
    assert keys[0] != keys[1]
    assert [decode_key(k)[1] for k in keys] == [("u", first), ("u", second)]


@pytest.mark.parametrize(
    "value, detail",
    [
        (1.0, "number"),
        (1e2, "number"),
        ([], "array"),
        ({"a": 1}, "object"),
        (2**63, "beyond 64 bits"),
        (-(2**63) - 1, "beyond 64 bits"),
    ],
)
def test_a_key_field_that_is_not_a_string_an_integer_or_a_boolean_is_the_wrong_type(value, detail):
    from domain import DedupRule, InvalidEvent, parse_event

    rule = DedupRule("APP", 30, key_fields=("uniqueValue", "session"))
    event = parse_event(
        json.dumps({"id": "1", "uniqueValue": "u", "type": "APP", "timestamp": 1, "session": value}).encode()
    )
    with pytest.raises(InvalidEvent, match=detail) as caught:
        rule.state_key(event)
    assert (caught.value.reason, caught.value.field) == ("wrong_type", "session")


def test_the_64_bit_limits_are_integers_a_key_may_hold():
    from domain import encode_key

    for value in (2**63 - 1, -(2**63)):
        assert decode_key(encode_key("APP", ("u", value))) == ("APP", ("u", value))
