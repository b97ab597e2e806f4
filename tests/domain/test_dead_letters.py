"""The dead letter's one definition: its exact encodings on Kafka and in a file, and the decoders."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import pytest

from domain import DEFAULT_MAX_BYTES, MAX_ERROR_CHARS, DeadLetter, Original, RawRecord, SourcePosition, dead_letters

LETTER = DeadLetter(
    RawRecord(b'{"id": 1}', SourcePosition("events", 2, 41), b"u-1"),
    "wrong_type",
    "field 'id' must be a string, got number",
    "invalid",
    1,
    1_795_325_944.7,
)


def test_on_kafka_the_metadata_are_dedup_headers_of_utf8_text_in_a_fixed_order():
    assert dead_letters.to_headers(LETTER) == [
        ("dedup.reason", b"wrong_type"),
        ("dedup.error", b"field 'id' must be a string, got number"),
        ("dedup.error_class", b"invalid"),
        ("dedup.source.topic", b"events"),
        ("dedup.source.partition", b"2"),
        ("dedup.source.offset", b"41"),
        ("dedup.attempts", b"1"),
        ("dedup.time", b"1795325944.700"),
        ("dedup.original.size", b"9"),
        ("dedup.original.sha256", b"354aaef7a5f6ecbb2faee49fbe47a24e024cb62b3183b853a1ecc01e01920e49"),
    ]


def test_in_a_file_the_same_names_nest_and_key_and_value_are_base64():
    assert json.dumps(dead_letters.to_document(LETTER)) == (
        '{"reason": "wrong_type", "error": "field \'id\' must be a string, got number", "error_class": "invalid", '
        '"source": {"topic": "events", "partition": 2, "offset": 41}, "attempts": 1, "time": 1795325944.7, '
        '"original": {"size": 9, "sha256": "354aaef7a5f6ecbb2faee49fbe47a24e024cb62b3183b853a1ecc01e01920e49"}, "key": "dS0x", "value": "eyJpZCI6IDF9"}'
    )
    assert dead_letters.to_document(replace(LETTER, record=replace(LETTER.record, key=None)))["key"] is None


# (time given, header text, time decoded): whole milliseconds, rounded
TIMES = [
    (1_795_325_944.7, b"1795325944.700", 1_795_325_944.7),
    (1_700_000_000.0004, b"1700000000.000", 1_700_000_000.0),
    (1_700_000_000.0006, b"1700000000.001", 1_700_000_000.001),
    (1_700_000_000.9996, b"1700000001.000", 1_700_000_001.0),
    (5.05, b"5.050", 5.05),
]


@pytest.mark.parametrize("given, text, decoded", TIMES)
def test_time_is_carried_to_the_millisecond(given, text, decoded):
    letter = replace(LETTER, time=given)
    assert dict(dead_letters.to_headers(letter))["dedup.time"] == text
    assert dead_letters.from_headers(b"v", None, dead_letters.to_headers(letter)).time == decoded
    assert dead_letters.from_document(json.loads(json.dumps(dead_letters.to_document(letter)))).time == decoded


@pytest.mark.parametrize(
    "letter",
    [
        LETTER,
        replace(LETTER, record=RawRecord(b"\xff\xfe not UTF-8", SourcePosition("in.jsonl", 0, 7), None)),
        replace(
            LETTER,
            record=replace(LETTER.record, key=b"\x00\xff"),
            reason="bug",
            error_class="bug",
            attempts=4,
            error='ValueError: caf\u00e9 \u2603 "quoted"\n second line',
        ),
    ],
    ids=["event", "not-utf8-no-key", "binary-key-bug"],
)
def test_both_decoders_give_back_the_dead_letter_the_writer_was_given(letter):
    assert dead_letters.from_headers(letter.record.value, letter.record.key, dead_letters.to_headers(letter)) == letter
    assert dead_letters.from_document(json.loads(json.dumps(dead_letters.to_document(letter)))) == letter


def test_the_error_is_cut_to_its_bound_in_both_media():
    letter = replace(LETTER, error="\u2603" * (MAX_ERROR_CHARS + 1))
    bounded = replace(letter, error="\u2603" * MAX_ERROR_CHARS)
    assert dead_letters.from_headers(b'{"id": 1}', b"u-1", dead_letters.to_headers(letter)) == bounded
    assert dead_letters.from_document(dead_letters.to_document(letter)) == bounded


def test_headers_of_other_producers_are_ignored_and_a_missing_field_is_an_error():
    headers = [("traceparent", b"00-abc"), *dead_letters.to_headers(LETTER)]
    assert dead_letters.from_headers(b'{"id": 1}', b"u-1", headers) == LETTER
    with pytest.raises(ValueError, match=r"dedup\.attempts"):
        dead_letters.from_headers(b"v", None, [h for h in headers if h[0] != "dedup.attempts"])
    with pytest.raises(ValueError):
        dead_letters.from_headers(b"v", None, [(n, b"x" if n == "dedup.source.offset" else v) for n, v in headers])


@pytest.mark.parametrize(
    "broken",
    [
        lambda d: d.pop("reason"),
        lambda d: d["source"].pop("offset"),
        lambda d: d.update(attempts="1"),
        lambda d: d.update(time=True),
        lambda d: d.update(value="not base64!"),
        lambda d: d.pop("key"),
    ],
    ids=["no-reason", "no-offset", "attempts-as-text", "time-as-boolean", "value-not-base64", "no-key"],
)
def test_a_malformed_document_is_an_error(broken):
    document = dead_letters.to_document(LETTER)
    broken(document)
    with pytest.raises(ValueError):
        dead_letters.from_document(document)


BIG = replace(LETTER, record=RawRecord(b"v" * 1000, SourcePosition("events", 2, 41), b"k" * 10), reason="oversize")


@pytest.mark.parametrize(
    "max_bytes, key, value",
    [
        (1010, b"k" * 10, b"v" * 1000),  # fits: as it is
        (1009, b"k" * 10, b"v" * 999),  # the value cut to the rest
        (100, b"k" * 10, b"v" * 90),
        (10, b"k" * 5, b"v" * 5),  # the key at most half the bound
        (0, b"", b""),
    ],
)
def test_a_dead_letter_is_bounded_to_a_prefix_of_its_key_and_value(max_bytes, key, value):
    letter = dead_letters.bounded(BIG, max_bytes)
    assert (letter.record.key, letter.record.value, letter.record.position) == (key, value, BIG.record.position)
    assert letter.original == (None if value == BIG.record.value else Original.of(b"v" * 1000))
    assert letter.original_value == Original(1000, hashlib.sha256(b"v" * 1000).hexdigest())


def test_a_bounded_dead_letter_carries_the_original_size_and_digest_in_both_media():
    value, key, headers = dead_letters.to_message(BIG, 100)
    assert (value, key) == (b"v" * 90, b"k" * 10)
    names = dict(headers)
    assert (names["dedup.original.size"], names["dedup.original.sha256"]) == (
        b"1000",
        hashlib.sha256(b"v" * 1000).hexdigest().encode(),
    )
    assert dead_letters.from_headers(value, key, headers) == dead_letters.bounded(BIG, 100)
    document = dead_letters.to_document(BIG, 100)
    assert document["original"] == {"size": 1000, "sha256": hashlib.sha256(b"v" * 1000).hexdigest()}
    assert dead_letters.from_document(json.loads(json.dumps(document))) == dead_letters.bounded(BIG, 100)


def test_the_default_bound_keeps_ordinary_records_whole_and_cuts_a_large_one():
    assert dead_letters.to_message(LETTER)[:2] == (LETTER.record.value, LETTER.record.key)
    huge = replace(LETTER, record=replace(LETTER.record, value=b"x" * 2_000_000))
    value, key, _ = dead_letters.to_message(huge)
    assert len(value) + len(key) == DEFAULT_MAX_BYTES < 1_000_000


def test_letters_written_before_the_original_fields_still_decode():
    old_headers = [h for h in dead_letters.to_headers(LETTER) if not h[0].startswith("dedup.original.")]
    assert dead_letters.from_headers(b'{"id": 1}', b"u-1", old_headers) == LETTER
    old_document = {k: v for k, v in dead_letters.to_document(LETTER).items() if k != "original"}
    assert dead_letters.from_document(old_document) == LETTER
