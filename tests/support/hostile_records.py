"""Hypothesis strategies for arbitrary records: bytes, any JSON value, and events with any field values."""

from __future__ import annotations

import json

from hypothesis import strategies as st

any_text = st.text(st.characters(exclude_categories=()), max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | any_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(any_text, inner, max_size=3),
    max_leaves=8,
)
field_values = json_values | st.integers(-10, 300_000_000_000) | st.sampled_from(["k1", "k2", ""])
events = st.fixed_dictionaries(
    {
        "id": field_values,
        "uniqueValue": field_values,
        "type": st.sampled_from(["APP", "WEB", "OTHER"]) | json_values,
        "timestamp": st.integers(1_699_999_000, 1_700_001_000) | field_values,
    },
    optional={"session": field_values},
)
records = st.one_of(
    st.binary(max_size=64),
    json_values.map(lambda v: json.dumps(v).encode()),
    events.map(lambda e: json.dumps(e).encode()),
    events.map(lambda e: json.dumps(e, ensure_ascii=False).encode("utf-8", "surrogatepass")),
).filter(lambda value: b"\n" not in value)
