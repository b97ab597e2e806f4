"""Strict parsing of the wire format: each rejection has its machine-readable code."""

import pytest

from domain import InvalidEvent, parse_event

VALID = b'{"id": "9ea7f44f", "uniqueValue": "656b4183-282c-1689019596", "type": "WEB", "timestamp": 1689019717}'


def test_valid_event_is_parsed_and_extra_fields_kept():
    event = parse_event(VALID[:-1] + b', "extra": 1}')
    assert (event.id, event.unique_value, event.type, event.timestamp) == (
        "9ea7f44f",
        "656b4183-282c-1689019596",
        "WEB",
        1689019717,
    )
    assert event.fields == {"extra": 1}


@pytest.mark.parametrize(
    "raw, code, field",
    [
        (b"\xff\xfe", "not_utf8", None),
        (b"not json", "not_json", None),
        (b'{"id": "a",', "not_json", None),
        (b"[1, 2]", "not_object", None),
        (b'"text"', "not_object", None),
        (b"42", "not_object", None),
        (b'{"uniqueValue": "u", "type": "WEB", "timestamp": 1}', "missing_field", "id"),
        (b'{"id": "a", "type": "WEB", "timestamp": 1}', "missing_field", "uniqueValue"),
        (b'{"id": "a", "uniqueValue": "u", "timestamp": 1}', "missing_field", "type"),
        (b'{"id": "a", "uniqueValue": "u", "type": "WEB"}', "missing_field", "timestamp"),
        (b'{"id": null, "uniqueValue": "u", "type": "WEB", "timestamp": 1}', "null_field", "id"),
        (b'{"id": "a", "uniqueValue": "u", "type": "WEB", "timestamp": null}', "null_field", "timestamp"),
        (b'{"id": 1, "uniqueValue": "u", "type": "WEB", "timestamp": 1}', "wrong_type", "id"),
        (b'{"id": "a", "uniqueValue": ["u"], "type": "WEB", "timestamp": 1}', "wrong_type", "uniqueValue"),
        (b'{"id": "a", "uniqueValue": "u", "type": "WEB", "timestamp": "1"}', "wrong_type", "timestamp"),
        (b'{"id": "a", "uniqueValue": "u", "type": "WEB", "timestamp": 1.5}', "wrong_type", "timestamp"),
        (b'{"id": "a", "uniqueValue": "u", "type": "WEB", "timestamp": true}', "wrong_type", "timestamp"),
        (b'{"id": "a", "uniqueValue": " ", "type": "WEB", "timestamp": 1}', "empty_field", "uniqueValue"),
        (b'{"id": "a", "uniqueValue": "u", "type": "", "timestamp": 1}', "empty_field", "type"),
        (b'{"id": "a", "uniqueValue": "u", "type": "WEB", "timestamp": -1}', "out_of_range", "timestamp"),
        (b'{"id": "a", "uniqueValue": "u", "type": "WEB", "timestamp": 1689019717000000}', "out_of_range", "timestamp"),
    ],
)
def test_invalid_records_are_rejected_with_a_reason(raw, code, field):
    with pytest.raises(InvalidEvent) as caught:
        parse_event(raw)
    assert (caught.value.code, caught.value.field) == (code, field)
    assert caught.value.reason == code
