"""``dedup state explain`` on a memory snapshot: each emission of a key, its expiry, whether it is
live, and the position of the record that made it; a key invalidated or forgotten has none."""

from __future__ import annotations

import json

import pytest

from adapters.memory import InMemoryStateStore
from app import main
from domain import Claim, dated, encode_key, key_spellings

T = 1_700_000_000


def claim(value: str, t: int, owner: str, rule: str = "APP", window: int = 30) -> Claim:
    return Claim(encode_key(rule, [value]), t, window, t + 2 * window, t, owner)


@pytest.fixture
def snapshot(tmp_path):
    store = InMemoryStateStore(snapshot=tmp_path / "state.snapshot")
    store.check_and_set_many(
        [
            claim("a", T, "events:2:40"),
            claim("a", T + 40, "events:1:7"),
            claim("gone", T, "events:0:1"),
            claim("w", T, "/data/in.jsonl:0:3#9f2c", "WEB", 600),
        ]
    )
    store.invalidate(encode_key("APP", ["gone"]))
    store.close()
    return tmp_path / "state.snapshot"


def explain(capsys, snapshot, *args) -> dict:
    assert main(["state", "explain", "--state", f"memory:{snapshot}", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_each_emission_of_a_key_with_its_expiry_liveness_and_maker(capsys, snapshot):
    got = explain(capsys, snapshot, "--rule", "APP", "--key", "uniqueValue=a", "--at", str(T + 70))
    assert (got["rule"], got["key"], got["at"], got["at_source"]) == (
        "APP",
        {"uniqueValue": "a"},
        T + 70,
        "given with --at",
    )
    assert got["emissions"] == [
        {
            "time": T,
            "expires_at": T + 60,
            "kept_until": T + 120,
            "live": False,
            "position": {"topic": "events", "partition": 2, "offset": 40},
        },
        {
            "time": T + 40,
            "expires_at": T + 100,
            "kept_until": T + 160,
            "live": True,
            "position": {"topic": "events", "partition": 1, "offset": 7},
        },
    ]


def test_a_file_position_and_the_wall_clock_by_default(capsys, snapshot):
    got = explain(capsys, snapshot, "--rule", "WEB", "--key", "uniqueValue=w")
    assert got["at_source"].startswith("the wall clock") and got["at"] > T
    assert [(e["live"], e["position"]) for e in got["emissions"]] == [
        (False, {"topic": "/data/in.jsonl", "partition": 0, "offset": 3})
    ]


def test_an_invalidated_key_and_one_never_seen_have_nothing_and_say_why(capsys, snapshot):
    for value in ("gone", "never"):
        assert explain(capsys, snapshot, "--rule", "APP", "--key", f"uniqueValue={value}")["emissions"] == []
    assert (
        main(["state", "explain", "--state", f"memory:{snapshot}", "--rule", "APP", "--key", "uniqueValue=gone"]) == 0
    )
    text = capsys.readouterr().out
    assert "nothing is remembered for this key" in text and "INVALIDATE" in text


def test_the_text_names_each_emission(capsys, snapshot):
    assert (
        main(
            [
                "state",
                "explain",
                "--state",
                f"memory:{snapshot}",
                "--rule",
                "APP",
                "--key",
                "uniqueValue=a",
                "--at",
                str(T + 70),
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].strip() == (
        f"emitted at {dated(T)}, expires at {dated(T + 60)} (expired), made by events partition 2 offset 40"
    )
    assert "live" in lines[3] and "events partition 1 offset 7" in lines[3]


def test_a_value_that_reads_as_a_number_is_looked_up_both_ways():
    spellings = key_spellings("APP", ("uniqueValue", "session"), {"uniqueValue": "u", "session": "5"})
    assert [values for values, _ in spellings] == [
        {"uniqueValue": "u", "session": "5"},
        {"uniqueValue": "u", "session": 5},
    ]
    with pytest.raises(ValueError, match="rule APP is keyed by uniqueValue, session; got uniqueValue"):
        key_spellings("APP", ("uniqueValue", "session"), {"uniqueValue": "u"})


def test_a_key_naming_other_fields_than_the_rule_is_one_line(capsys, snapshot):
    assert main(["state", "explain", "--state", f"memory:{snapshot}", "--rule", "APP", "--key", "id=1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["dedup: invalid setting --key: rule APP is keyed by uniqueValue; got id"]


@pytest.mark.parametrize(
    "seconds, shown",
    [
        (1_700_000_000, "1700000000 = 2023-11-14T22:13:20Z"),
        (0, "0 = 1970-01-01T00:00:00Z"),
        (10**15, "1000000000000000"),
    ],
)
def test_an_explanation_shows_epoch_seconds_with_their_utc_date(seconds, shown):
    assert dated(seconds) == shown
