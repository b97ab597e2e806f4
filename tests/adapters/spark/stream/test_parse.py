"""_parse.py's fast path (the JVM PlainEvent scanner) against the domain's strict parser.

Each record is parsed by ``domain._events.parse_event`` (the reference) and by the Spark
parse on a batch DataFrame; reason and fields must agree. The table also states which
records the fast path certifies, so a change that silently sends every record down the
slow path (or certifies a record it must not) fails here.
"""

from __future__ import annotations

import pytest

from domain import InvalidEvent, parse_event

pytestmark = pytest.mark.spark

OK = '{"id":"e1","uniqueValue":"u-5","type":"APP","timestamp":1700000000}'

# (record, certified by the fast path)
RECORDS = [
    (OK, True),
    (
        '{"id": "e1", "uniqueValue": "656b4183-282c", "type": "WEB", "timestamp": 1689019717, "x": [1, {"a": null}]}',
        True,
    ),
    (' \t\r\n{"timestamp":0,"type":"APP","uniqueValue":"k","id":"e1"} \n', True),
    ('{"id":"e1","uniqueValue":"true1","type":"APP","timestamp":-0}', True),
    ('{"id":"1a","uniqueValue":"9e9x","type":"APP","timestamp":1}', True),
    ('{"id":"123","uniqueValue":"k","type":"APP","timestamp":1}', True),
    ('{"id":"true","uniqueValue":"k","type":"APP","timestamp":1}', True),
    ('{"id":"Infinity","uniqueValue":"k","type":"APP","timestamp":1}', True),
    ('{"id":"-1","uniqueValue":" k ","type":"APP","timestamp":253402300799}', True),
    (
        '{"id":"e1","uniqueValue":"k","type":"APP","timestamp":1,"x":-0.5e+3,"y":"caf\u00e9 \\u00e9\\n\\"","z":[],"w":{}}',
        True,
    ),
    ('{"id":"e1","uniqueValue":"k","type":"APP","timestamp":1,"x":' + "[" * 63 + "]" * 63 + "}", True),
    # valid, but the fast path cannot vouch for it: strict path
    ('{"id":"e1","uniqueValue":"k","type":"APP","timestamp":1,"timestamp":2}', False),  # the last key wins
    ('{"id":"e1","uniqueValue":"u\\u00e9","type":"APP","timestamp":1}', False),
    ('{"id":"e1","uniqueValue":"caf\u00e9","type":"APP","timestamp":1}', False),
    ('{"id":"e1","uniqueValue":"k","type":"APP","timestamp":1,"\\u0078":1}', False),
    ('{"id":"e1","uniqueValue":"k","type":"APP","timestamp":1,"x":' + "[" * 65 + "]" * 65 + "}", False),
    # invalid: every one takes the strict path and gets the domain's reason
    ('{"id":123,"uniqueValue":"k","type":"APP","timestamp":1}', False),
    ('{"id":-5,"uniqueValue":"k","type":"APP","timestamp":1}', False),
    ('{"id":1e400,"uniqueValue":"k","type":"APP","timestamp":1}', False),
    ('{"id":true,"uniqueValue":"k","type":"APP","timestamp":1}', False),
    ('{"id":{"a":1},"uniqueValue":"k","type":"APP","timestamp":1}', False),
    ('{"id":"e1","uniqueValue":"k","type":"APP","timestamp":1,"id":1.5}', False),
    ('{"id":"e1","uniqueValue":"k","type":"APP","timestamp":1,"\\u0069d":7}', False),
    ('{"id":"e1","uniqueValue":" ","type":"APP","timestamp":1}', False),
    ('{"id":"e1","uniqueValue":"","type":"APP","timestamp":1}', False),
    ('{"id":"e1","uniqueValue":"k","type":"APP","timestamp":1.0}', False),
    ('{"id":"e1","uniqueValue":"k","type":"APP","timestamp":1e3}', False),
    ('{"id":"e1","uniqueValue":"k","type":"APP","timestamp":-1}', False),
    ('{"id":"e1","uniqueValue":"k","type":"APP","timestamp":"1"}', False),
    ('{"id":"e1","uniqueValue":"k","type":"APP","timestamp":9223372036854775808}', False),
    ('{"id":"e1","uniqueValue":"k","type":"APP","timestamp":253402300800}', False),
    ('{"id":"e1","uniqueValue":"k","type":"APP","timestamp":null}', False),
    ('{"id":"e1","uniqueValue":"k","type":"APP"}', False),
    ('{"id":"e1","uniqueValue":"k","type":"APP","timestamp":1,"x":01}', False),
    ('{"id":"e1","uniqueValue":"k","type":"APP","timestamp":1,"x":1.}', False),
    ('{"id":"e1","uniqueValue":"k","type":"APP","timestamp":1,"x":"a\\q"}', False),
    ('{"id":"e1","uniqueValue":"k","type":"APP","timestamp":1,"x":"a\tb"}', False),
    ('{"id":"e1","uniqueValue":"k","type":"APP","timestamp":1,"x":tru}', False),
    ("{'id':'e1','uniqueValue':'k','type':'APP','timestamp':1}", False),
    ('[{"id":"e1","uniqueValue":"k","type":"APP","timestamp":1}]', False),
    ('{"id":"e1","uniqueValue":"k","type":"APP","timestamp":01}', False),
    ('{"id":"e1","uniqueValue":"k","type":"APP","timestamp":1,}', False),
    # more after the object: Spark's JSON parser reads the first value and ignores the rest
    # (TrailingContent finds it), the domain's refuses it
    (OK + " x", False),
    (OK + "}", False),
    (OK + "{}", False),
    (OK + "\n" + OK, False),
    ('"text" x', False),
    ("1 2", False),
    # lone UTF-16 surrogates (escaped): not_utf8 wherever the JSON around them holds
    ('{"id":"e1","uniqueValue":"\\ud800","type":"APP","timestamp":1}', False),
    ('{"id":"e1","uniqueValue":"\\ud800\\uDBFFx","type":"APP","timestamp":1}', False),
    ('{"id":"e1","uniqueValue":"k","type":"APP","timestamp":1,"x":["\\udc00","\\\\ud800"]}', False),
    ('{"id":"e1","uniqueValue":"k","type":"APP","timestamp":"\\udfff"}', False),
    ('"\\ud800"', False),
    ('{"id":"e1","uniqueValue":"\\ud800","type":"APP","timestamp":1} x', False),
    ('{"id":"e1","uniqueValue":"\\ud800",}', False),
    # not surrogates: an escaped backslash before "ud800", and a pair
    ('{"id":"e1","uniqueValue":"\\\\ud800","type":"APP","timestamp":1}', False),
    ('{"id":"e1","uniqueValue":"\\ud83d\\ude00","type":"APP","timestamp":1}', False),
]


def domain_outcome(raw: bytes) -> tuple:
    try:
        e = parse_event(raw)
    except InvalidEvent as exc:
        return (exc.code, None, None, None, None)
    return (None, e.id, e.unique_value, e.type, e.timestamp)


def spark_outcomes(spark, raws: list[bytes]) -> list[tuple]:
    from adapters.spark.stream import parse

    df = spark.createDataFrame([(i, r) for i, r in enumerate(raws)], "i int, value binary")
    rows = parse(df).orderBy("i").select("_certified", "reason", "id", "uniqueValue", "type", "timestamp").collect()
    return [(r[0], tuple(r[1:])) for r in rows]


def test_fast_path_agrees_with_the_domain_and_certifies_plain_events(spark):
    bad_utf8 = [
        b"\x80\x81not utf-8",
        OK.encode()[:-2] + b',"x":"\xed\xa0\x80"}',
        OK.encode()[:-2] + b',"x":"\xc0\xaf"}',
    ]
    raws = [r.encode() for r, _ in RECORDS] + bad_utf8
    outcomes = spark_outcomes(spark, raws)
    assert [o for _, o in outcomes] == [domain_outcome(r) for r in raws]
    assert [c for c, _ in outcomes] == [c for _, c in RECORDS] + [False] * len(bad_utf8)
