"""Spark's state keys against the domain's (``domain._keys``), and the separator collision gone.

The plan's keys (``DedupPlan.operator_input``) and ``adapters.spark.shared._keys``' expressions run
over tricky values; the domain's functions on the same values are the reference.
"""

from __future__ import annotations

import json

import pytest

from domain import DedupRule, RuleSet, decode_key, escape, from_legacy, parse_event, rule_of

pytestmark = pytest.mark.spark

TRICKY = [
    "a",
    "\x1f",
    "\x1e",
    "\x1e0",
    "\x1e1",
    "a\x1fb",
    "\x1f\x1f",
    "\x1e\x1f\x1e",
    "0",
    "1",
    " ",
    "\\x1f",
    "\u00e9\u2603\U0001f600",
    "|",
    "\x00",
    "a\x1e0\x1e1b",
]
UNIQUE = [v for v in TRICKY if v.strip()] + [f"u{v}" for v in TRICKY]  # a blank uniqueValue is invalid
RULES = RuleSet(
    {"APP": DedupRule("APP", 30, key_fields=("uniqueValue", "session")), "W\x1fB\x1e": DedupRule("W\x1fB\x1e", 30)}
)


def records(spark, values: list[bytes]):
    rows = [(v, None, "in", 0, i, i) for i, v in enumerate(values)]
    return spark.createDataFrame(
        rows, "value binary, kafka_key binary, source string, partition int, offset long, ord long"
    )


def event(type_: str, unique: str, session: str, id_: str = "e") -> bytes:
    return json.dumps(
        {"id": id_, "uniqueValue": unique, "type": type_, "timestamp": 1_700_000_000, "session": session}
    ).encode()


def test_the_plan_spells_every_key_as_the_domain_does(spark):
    from adapters.spark.stream import DedupPlan

    values = (
        [event("APP", u, s) for u in UNIQUE for s in ("c", "\x1f", "\x1e1", "")]
        + [event("APP", "u", s) for s in TRICKY]
        + [event("W\x1fB\x1e", u, "x") for u in UNIQUE]
    )
    got = [row["key"] for row in DedupPlan(RULES).operator_input(records(spark, values)).orderBy("ord").collect()]
    expected = [RULES.rules[parse_event(v).type].state_key(parse_event(v)) for v in values]
    assert got == expected
    assert len(set(got)) == len(got)  # no two events share a key


TYPED = [
    "1",
    "-0",
    "0",
    "true",
    "false",
    "9223372036854775807",
    "-9223372036854775808",
    '"1"',
    '"true"',
    "1.0",
    "1.5",
    "1e2",
    "100.000",
    "9223372036854775808",
    "[]",
    "[1]",
    '{"a":1}',
    "null",
    '"\\u001e"',
]


def test_the_plan_types_every_key_value_as_the_domain_does(spark):
    """Integers and booleans are typed parts, any other non-string is ``wrong_type``, missing and
    null are ``missing_field``: the same keys and reasons as ``Event.field_value``."""
    from adapters.spark.stream import DedupPlan
    from domain import InvalidEvent

    values = [
        b'{"id":"e","uniqueValue":"u","type":"APP","timestamp":1700000000,"session":%s}' % v.encode() for v in TYPED
    ] + [b'{"id":"e","uniqueValue":"u","type":"APP","timestamp":1700000000}']
    rows = DedupPlan(RULES).operator_input(records(spark, values)).orderBy("ord").collect()
    expected = []
    for value in values:
        try:
            expected.append((RULES.rules["APP"].state_key(parse_event(value)), None))
        except InvalidEvent as error:
            expected.append((None, error.reason))
    assert [(row["key"] if row["judged"] else None, row["reason"]) for row in rows] == expected
    keys = [key for key, _ in expected if key]
    assert (len(keys), len(set(keys))) == (10, 9)  # -0 is 0; 1 and "1", true and "true": four keys, not two


def test_the_key_expressions_mirror_the_domain(spark):
    from pyspark.sql import functions as F

    from adapters.spark.shared import from_legacy_column, rule_column, unescaped

    keys = [RULES.rules["APP"].state_key(parse_event(event("APP", u, "c"))) for u in UNIQUE] + [
        RULES.rules["W\x1fB\x1e"].state_key(parse_event(event("W\x1fB\x1e", u, "c"))) for u in UNIQUE
    ]
    legacy = ["\x1f".join(("APP", u, "c")) for u in TRICKY] + ["APP\x1f", "\x1fa", "APP\x1f\x1f"]
    df = spark.createDataFrame(
        [(k, legacy[i % len(legacy)], escape(TRICKY[i % len(TRICKY)])) for i, k in enumerate(keys)],
        "key string, legacy string, part string",
    )
    rows = df.select(
        rule_column(F.col("key")).alias("rule"),
        from_legacy_column(F.col("legacy")).alias("current"),
        unescaped(F.col("part")).alias("unescaped"),
        "key",
        "legacy",
    ).collect()
    assert [r["rule"] for r in rows] == [rule_of(k) for k in keys] == [decode_key(k)[0] for k in keys]
    assert [r["current"] for r in rows] == [from_legacy(r["legacy"]) for r in rows]
    assert [r["unescaped"] for r in rows] == [TRICKY[i % len(TRICKY)] for i in range(len(rows))]


def test_events_whose_values_only_shift_the_separator_are_both_emitted(files):
    first, second = event("APP", "a\x1fb", "c", "1"), event("APP", "a", "b\x1fc", "2")
    files.add(first, second, event("APP", "a", "b\x1fc", "3"))
    result = files.run(RuleSet({"APP": DedupRule("APP", 30, key_fields=("uniqueValue", "session"))}))
    assert result.out_ids == ["1", "2"]
    assert (result.counts["in"], result.counts["out"], result.counts["duplicates"]) == (3, 2, 1)


def test_a_checkpoint_of_the_legacy_key_format_is_refused_then_migrated_with_its_keys_respelled(files, spark):
    from adapters.spark.checkpoint import STATE_FORMAT, migrate, plan_migration
    from domain import IncompatibleState

    rules = RuleSet({"APP": DedupRule("APP", 30)})
    # 1. a job keeps the key of uniqueValue "a\x1eb", "APP\x1fa\x1e0b"; its manifest is then made to say
    #    state format 1, as an older version's did: read that way, the key is uniqueValue "a\x1e0b"'s
    files.add(event("APP", "a\x1eb", "-", "1"))
    files.engine(rules, sink="out-v1", dead_letters="dlq-v1", checkpoint="v1").run(available_now=True)
    manifest = files.dir / "v1" / "streamdedup" / "manifest.json"
    stored = json.loads(manifest.read_text())
    stored["operators"]["window-dedup"]["state_format"] = 1
    manifest.write_text(json.dumps(stored))
    (manifest.parent / ".manifest.json.crc").unlink(missing_ok=True)  # Hadoop's checksum of the file as it was
    # 2. this version refuses it, and says how to migrate
    with pytest.raises(IncompatibleState, match=f"state_format changed from 1 to {STATE_FORMAT}.*dedup state migrate"):
        files.engine(rules, sink="out-v1", dead_letters="dlq-v1", checkpoint="v1").run(available_now=True)
    # 3. the migration respells the old keys: the old emission now belongs to "a\x1e0b"
    plan = plan_migration(spark, str(files.dir / "v1"), str(files.dir / "v2"), rules)
    assert plan.legacy_keys and any(line.startswith("respell the old keys") for line in plan.describe())
    migrate(spark, plan)
    files.add(event("APP", "a\x1e0b", "-", "2"), event("APP", "a\x1eb", "-", "3"))
    counts = files.engine(rules, sink="out-v2", dead_letters="dlq-v2", checkpoint="v2").run(available_now=True)
    out = [
        json.loads(line)["id"]
        for path in sorted((files.dir / "out-v2").glob("batch=*/part-*"))
        for line in path.read_text().splitlines()
        if line
    ]
    assert (out, counts.duplicates) == (["3"], 1)
