"""The duplicate report's one definition: its encodings on Kafka and in a file, the decoders, and
the memory engine writing one per duplicate with the first copy it repeats."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app import main
from domain import Duplicate, Emission, Original, RawRecord, SourcePosition, duplicates
from tests.support.scenarios import INVALID_RECORDS, SCENARIOS

REPORT = Duplicate.of(
    RawRecord(b'{"id": "e2"}', SourcePosition("events", 2, 41), b"u-1"),
    "APP",
    30,
    1_689_019_605,
    Emission(1_689_019_596, 1_689_019_656, "events:3:17"),
    1_795_325_944.7,
)


def test_on_kafka_the_metadata_are_dedup_headers_of_utf8_text_in_a_fixed_order():
    assert duplicates.to_headers(REPORT) == [
        ("dedup.rule", b"APP"),
        ("dedup.window", b"30"),
        ("dedup.event_time", b"1689019605"),
        ("dedup.source.topic", b"events"),
        ("dedup.source.partition", b"2"),
        ("dedup.source.offset", b"41"),
        ("dedup.repeats.topic", b"events"),
        ("dedup.repeats.partition", b"3"),
        ("dedup.repeats.offset", b"17"),
        ("dedup.repeats.time", b"1689019596"),
        ("dedup.apart", b"9"),
        ("dedup.time", b"1795325944.700"),
    ]
    assert duplicates.to_message(REPORT)[:2] == (b'{"id": "e2"}', b"u-1")


def test_in_a_file_the_same_names_nest_and_key_and_value_are_base64():
    assert json.dumps(duplicates.to_document(REPORT)) == (
        '{"rule": "APP", "window": 30, "event_time": 1689019605, '
        '"source": {"topic": "events", "partition": 2, "offset": 41}, '
        '"repeats": {"topic": "events", "partition": 3, "offset": 17, "time": 1689019596}, "apart": 9, '
        '"time": 1795325944.7, "key": "dS0x", "value": "eyJpZCI6ICJlMiJ9"}'
    )


def test_an_emission_whose_maker_is_unknown_is_reported_without_a_position():
    unknown = Duplicate.of(REPORT.record, "APP", 30, 1_689_019_605, Emission(1_689_019_596, 1_689_019_656), 5.0)
    assert unknown.first is None
    assert not any(
        name.startswith("dedup.repeats.") and name != "dedup.repeats.time" for name, _ in duplicates.to_headers(unknown)
    )
    assert "topic" not in duplicates.to_document(unknown)["repeats"]
    assert duplicates.from_headers(b"v", None, duplicates.to_headers(unknown)).first is None
    assert duplicates.from_document(duplicates.to_document(unknown)).first is None


def test_a_report_larger_than_its_output_is_carried_cut_and_names_its_original():
    big = replace(REPORT, record=replace(REPORT.record, value=b"x" * 5000))
    cut = duplicates.bounded(big, 1000)
    assert len(cut.record.value) + len(cut.record.key) <= 1000
    assert cut.original == Original.of(b"x" * 5000)
    assert duplicates.from_headers(
        *duplicates.to_message(big, 1000)[:2], duplicates.to_message(big, 1000)[2]
    ).original == Original.of(b"x" * 5000)
    assert duplicates.bounded(REPORT, 1000) is REPORT


def test_a_message_without_the_required_headers_is_not_a_report():
    with pytest.raises(ValueError, match=r"not a duplicate report: header 'dedup\.rule'"):
        duplicates.from_headers(b"v", None, [("dedup.reason", b"late")])
    with pytest.raises(ValueError, match="not a duplicate report document"):
        duplicates.from_document({"value": "dg=="})


POSITIONS = st.builds(SourcePosition, st.text(min_size=1, max_size=20), st.integers(0, 10_000), st.integers(0, 2**62))


@settings(max_examples=200)
@given(
    value=st.binary(max_size=200),
    key=st.none() | st.binary(max_size=50),
    at=POSITIONS,
    first=st.none() | POSITIONS,
    t=st.integers(0, 2**40),
    apart=st.integers(0, 10_000),
    window=st.integers(1, 100_000),
    time=st.integers(0, 2**42).map(lambda ms: ms / 1000),
)
def test_both_encodings_give_the_report_back(value, key, at, first, t, apart, window, time):
    owner = first.token() if first else ""
    report = Duplicate.of(RawRecord(value, at, key), "WEB", window, t, Emission(t - apart, t + window, owner), time)
    assert report.first == first
    assert duplicates.from_headers(value, key, duplicates.to_headers(report)) == report
    assert duplicates.from_document(json.loads(json.dumps(duplicates.to_document(report)))) == report


def test_the_memory_engine_reports_each_duplicate_with_the_line_of_its_first_copy(tmp_path):
    scenario = next(sc for sc in SCENARIOS if sc.name.startswith("window boundary"))
    records = [raw for raw, _ in INVALID_RECORDS[:2]] + scenario.records()
    (tmp_path / "in.jsonl").write_bytes(b"".join(r + b"\n" for r in records))
    code = main(
        [
            "run",
            "--engine",
            "memory",
            "--source",
            f"file:{tmp_path / 'in.jsonl'}",
            "--sink",
            f"file:{tmp_path / 'out.jsonl'}",
            "--dlq",
            f"file:{tmp_path / 'dlq.jsonl'}",
            "--duplicates",
            f"file:{tmp_path / 'dups.jsonl'}",
        ]
    )
    assert code == 0
    reports = [
        duplicates.from_document(json.loads(line)) for line in (tmp_path / "dups.jsonl").read_text().splitlines()
    ]
    line_of = {i: i + 3 for i in range(len(scenario.steps))}  # lines count from 1; two invalid records come first
    assert [(r.record.position.offset, r.first.offset) for r in reports] == [
        (line_of[dup], line_of[first]) for dup, first in scenario.expected_repeats().items()
    ]
    assert all(r.record.position.source == r.first.source == str(tmp_path / "in.jsonl") for r in reports)
    assert [r.record.value for r in reports] == [records[line_of[dup] - 1] for dup in scenario.expected_repeats()]
    assert [(r.rule, r.window, r.apart) for r in reports] == [("APP", 30, 29), ("APP", 30, 29)]
