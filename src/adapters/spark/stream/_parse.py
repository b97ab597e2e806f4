"""Strict parsing and validation of the wire format, in native Spark expressions.

``parse(raw)`` takes a DataFrame with the record's bytes in ``value`` and adds
``reason`` (``None`` for a valid event, else one of ``domain._events``' codes), ``detail``,
``field`` and the typed fields ``id``, ``uniqueValue``, ``type``, ``timestamp``. The
checks run in the domain's order (``parse_event``): UTF-8, JSON, object, then each
required field (missing, null, type, empty / range). JSON is parsed once, into a VARIANT;
the only second look at the text is for a non-integral-looking timestamp (``1.0``), which
the variant normalises to an integer.

Fast path: most records are plain, valid events. A JVM scanner
(``jvm/streamdedup/stream/PlainEvent.java``, one pass over the bytes, no per-record parser
or reader) *certifies* such a record and returns its fields; it is sound by construction
(a record it cannot vouch for gets null). Only records that are not certified go through
the strict VARIANT checks: their text is passed on, a certified record's text is replaced
by null, so the strict expressions cost next to nothing for it. Rules with extra key
fields use the strict path for every record.
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from adapters.spark.runtime import PLAIN_EVENT_CLASS, TRAILING_CONTENT_CLASS
from adapters.spark.shared import escaped
from adapters.spark.stream._whitespace import BLANK
from domain import BOOLEAN_PART, INTEGER_PART, MAX_TIMESTAMP, REQUIRED_STRING_FIELDS

INTEGER_TYPES = ("BIGINT", "INT", "SMALLINT", "TINYINT")
FAST_FIELDS = (*REQUIRED_STRING_FIELDS, "timestamp")
FAST_SCHEMA = "id string, uniqueValue string, type string, timestamp bigint"
PLAIN_EVENT = "streamdedup_plain_event"
TRAILING_CONTENT = "streamdedup_trailing_content"

# A \uD800-\uDBFF escape not followed by a \uDC00-\uDFFF one, or one of those not preceded by the
# first kind, after an even run of backslashes (domain._events refuses lone surrogates).
_HIGH, _LOW = r"\\u[dD][89abAB][0-9a-fA-F]{2}", r"\\u[dD][c-fC-F][0-9a-fA-F]{2}"
LONE_SURROGATE = rf"(?:^|[^\\])(?:\\\\)*(?:{_HIGH}(?!{_LOW})|(?<!{_HIGH}){_LOW})"
# The same escape, its even run of backslashes in group 1 (replaced by ``$1\uFFFD``): Spark 4.2's
# JSON parser refuses a lone surrogate, so a record that is JSON apart from one would read
# ``not_json``; parsed with U+FFFD in its place, it reads ``not_utf8`` as in the domain.
LONE_SURROGATE_ESCAPE = rf"(?<!\\)((?:\\\\)*)(?:{_HIGH}(?!{_LOW})|(?<!{_HIGH}){_LOW})"


def json_path(name: str) -> str:
    if name.isidentifier():
        return f"$.{name}"
    return "$['" + name.replace("\\", "\\\\").replace("'", "\\'") + "']"


def field_variant(name: str) -> Column:
    return F.try_variant_get(F.col("_json"), json_path(name), "variant")


def parse(raw: DataFrame, extra_fields: tuple[str, ...] = ()) -> DataFrame:
    """``raw`` plus ``reason``, ``detail``, ``field`` and the typed event fields (null when invalid)."""
    text = F.col("value").cast("string")
    if extra_fields:
        return _strict(raw, text, extra_fields)
    df = raw.withColumns({"_raw": text, "_fast": plain_event(raw)})
    df = _strict(
        df.withColumn("_certified", F.col("_fast").isNotNull()), F.when(~F.col("_certified"), F.col("_raw")), ()
    )
    fields = {n: F.when(F.col("_certified"), F.col(f"_fast.{n}")).otherwise(F.col(n)) for n in FAST_FIELDS}
    outcome = {c: F.when(~F.col("_certified"), F.col(c)) for c in ("reason", "detail", "field")}
    return df.withColumns({**fields, **outcome})


def plain_event(raw: DataFrame) -> Column:
    """The fast path's fields of ``value`` (struct per ``FAST_SCHEMA``), null unless certified."""
    raw.sparkSession.udf.registerJavaFunction(PLAIN_EVENT, PLAIN_EVENT_CLASS, FAST_SCHEMA)
    return F.call_function(PLAIN_EVENT, F.col("value"))


def _strict(raw: DataFrame, text: Column, extra_fields: tuple[str, ...]) -> DataFrame:
    names = (*REQUIRED_STRING_FIELDS, "timestamp", *extra_fields)
    apart_from_surrogates = F.when(
        text.rlike(LONE_SURROGATE), F.try_parse_json(F.regexp_replace(text, LONE_SURROGATE_ESCAPE, r"$1\\uFFFD"))
    )
    raw.sparkSession.udf.registerJavaFunction(TRAILING_CONTENT, TRAILING_CONTENT_CLASS, "boolean")
    df = raw.withColumns({"_text": text, "_json": F.coalesce(F.try_parse_json(text), apart_from_surrogates)})
    df = df.withColumns({f"_v_{n}": field_variant(n) for n in names})
    df = df.withColumns({f"_t_{n}": F.schema_of_variant(F.col(f"_v_{n}")) for n in names})
    outcome = _outcome()
    df = df.withColumn("_check", outcome.pop("_check")).withColumns(outcome)
    valid = F.col("reason").isNull()
    typed = {
        n: F.when(valid, F.try_variant_get(F.col("_json"), json_path(n), "string")) for n in REQUIRED_STRING_FIELDS
    }
    typed["timestamp"] = F.when(valid, F.try_variant_get(F.col("_json"), "$.timestamp", "bigint"))
    return df.withColumns(typed)


def key_field_part(name: str) -> Column:
    """An extra key field's value as a key part (``domain._keys.typed_part`` of ``Event.field_value``):
    a string escaped, an integer or a boolean typed; null when ``key_field_problem`` is not."""
    v, kind = F.col(f"_v_{name}"), F.col(f"_t_{name}")
    return (
        F.when(v.isNull() | F.is_variant_null(v), F.lit(None))
        .when(kind == "STRING", escaped(F.variant_get(v, "$", "string")))
        .when(kind.isin(*INTEGER_TYPES), F.concat(F.lit(INTEGER_PART), F.to_json(v)))
        .when(kind == "BOOLEAN", F.concat(F.lit(BOOLEAN_PART), F.to_json(v)))
    )


def key_field_problem(name: str) -> Column:
    """Why an extra key field makes no key part (``Event.field_value``'s reason), or null. The
    VARIANT holds an integer beyond 64 bits, and any number written with a fraction or an
    exponent, as a DECIMAL or a DOUBLE: both ``wrong_type``, as in the domain."""
    v, kind = F.col(f"_v_{name}"), F.col(f"_t_{name}")
    return F.when(v.isNull() | F.is_variant_null(v), F.lit("missing_field")).when(
        ~(kind.isin("STRING", "BOOLEAN", *INTEGER_TYPES)), F.lit("wrong_type")
    )


def drop_work_columns(df: DataFrame) -> DataFrame:
    return df.drop(*[c for c in df.columns if c.startswith("_")])


def _checks() -> list[tuple[Column, str, Column, str | None]]:
    """(failed, code, detail, field) in the order ``parse_event`` applies them."""
    text = F.col("_text")
    checks: list[tuple[Column, str, Column, str | None]] = [
        (~F.is_valid_utf8(text), "not_utf8", F.lit("record is not UTF-8"), None),
        (F.col("_json").isNull(), "not_json", F.lit("record is not JSON"), None),
        (
            F.call_function(TRAILING_CONTENT, text.cast("binary")),
            "not_json",
            F.lit("record is not JSON: more after its value"),
            None,
        ),
        (text.rlike(LONE_SURROGATE), "not_utf8", F.lit("record holds a lone UTF-16 surrogate"), None),
        (~text.rlike(r"^[ \t\r\n]*\{"), "not_object", F.lit("record is a JSON value, not an object"), None),
    ]
    for name in REQUIRED_STRING_FIELDS:
        checks += _presence(name)
        kind = F.col(f"_t_{name}")
        checks.append(
            (
                kind != "STRING",
                "wrong_type",
                F.concat(F.lit(f"field '{name}' must be a string, got "), _json_type(kind)),
                name,
            )
        )
        checks.append(
            (
                F.variant_get(F.col(f"_v_{name}"), "$", "string").rlike(BLANK),
                "empty_field",
                F.lit(f"field '{name}' is empty"),
                name,
            )
        )
    return checks + _presence("timestamp") + _timestamp_checks()


def _presence(name: str) -> list[tuple[Column, str, Column, str]]:
    v = F.col(f"_v_{name}")
    return [
        (v.isNull(), "missing_field", F.lit(f"field '{name}' is missing"), name),
        (F.is_variant_null(v), "null_field", F.lit(f"field '{name}' is null"), name),
    ]


def _timestamp_checks() -> list[tuple[Column, str, Column, str]]:
    kind = F.col("_t_timestamp")
    integral = kind.isin(*INTEGER_TYPES) | (
        kind.rlike(r"^DECIMAL\(\d+,0\)$") & F.get_json_object(F.col("_text"), "$.timestamp").rlike(r"^-?[0-9]+$")
    )
    as_decimal = F.try_variant_get(F.col("_v_timestamp"), "$", "decimal(38,0)")
    in_range = as_decimal.isNotNull() & as_decimal.between(0, MAX_TIMESTAMP)
    return [
        (
            ~integral,
            "wrong_type",
            F.concat(F.lit("field 'timestamp' must be an integer (epoch seconds), got "), _json_type(kind)),
            "timestamp",
        ),
        (
            ~in_range,
            "out_of_range",
            F.lit(f"field 'timestamp' is not epoch seconds in 0..{MAX_TIMESTAMP}"),
            "timestamp",
        ),
    ]


def _json_type(kind: Column) -> Column:
    return (
        F.when(kind == "STRING", "string")
        .when(kind == "BOOLEAN", "boolean")
        .when(kind.startswith("OBJECT"), "object")
        .when(kind.startswith("ARRAY"), "array")
        .otherwise("number")
    )


def _outcome() -> dict[str, Column]:
    """The first failing check's reason, detail and field: one CASE picks it, lookups follow."""
    checks = _checks()
    index = reduce(lambda acc, item: acc.when(item[1][0], item[0]), enumerate(checks[1:], 1), F.when(checks[0][0], 0))

    def pick(values):
        return F.when(F.col("_check").isNotNull(), F.element_at(F.array(*values), F.col("_check") + 1))

    detail = reduce(
        lambda acc, item: acc.when(F.col("_check") == item[0], item[1][2]),
        enumerate(checks[1:], 1),
        F.when(F.col("_check") == 0, checks[0][2]),
    )
    return {
        "_check": index,
        "reason": pick([F.lit(c[1]) for c in checks]),
        "detail": detail,
        "field": pick([F.lit(c[3]).cast("string") for c in checks]),
    }
