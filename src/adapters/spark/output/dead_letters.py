"""The dead letter as Spark column expressions, mirroring ``domain.dead_letters``.

Spark cannot call the domain's encoders per row without leaving the JVM, so this module
builds the same encodings from ``domain.dead_letters.FIELDS`` in native expressions over a
judged batch's columns (``reason``, ``detail``, ``source``, ``partition``, ``offset``,
``value``, ``kafka_key``): ``kafka_headers()`` is the Kafka ``headers`` column
(``array<struct<key: string, value: binary>>``), ``bounded_record(max_bytes)`` the key and
value the Kafka record carries (``domain.dead_letters.bounded``) and ``json_document()`` the
JSONL document. ``tests/spark/output/test_dead_letters.py`` holds them to the domain's encoders,
field by field.

The Spark engine dead-letters invalid and late records only, each once: ``error_class`` is
``invalid`` and ``attempts`` 1; ``time`` is ``current_timestamp()`` of the micro-batch's
write (one instant per micro-batch). Its ``error`` texts for invalid records are its parser's own
(docs/semantics.md, "Dead letters").
"""

from __future__ import annotations

from typing import Mapping

from pyspark.sql import Column
from pyspark.sql import functions as F

from domain.dead_letters import DEFAULT_MAX_BYTES, FIELDS, INTEGER, MAX_ERROR_CHARS, TIME, Field, nest

HEADERS_TYPE = "array<struct<key:string,value:binary>>"


def field_columns(overrides: Mapping[str, Column] | None = None) -> dict[str, Column]:
    """Each field of ``FIELDS`` by name, typed as the definition (``time`` in milliseconds).

    ``overrides``: columns to use instead of the engine's (``error_class``, ``attempts``, ``time``)."""
    columns = {
        "reason": F.col("reason"),
        "error": F.substring(F.coalesce(F.col("detail"), F.lit("")), 1, MAX_ERROR_CHARS),
        "error_class": F.lit("invalid"),
        "source.topic": F.col("source"),
        "source.partition": F.col("partition").cast("long"),
        "source.offset": F.col("offset").cast("long"),
        "attempts": F.lit(1).cast("long"),
        "time": F.unix_millis(F.current_timestamp()),
        "original.size": F.octet_length(F.col("value")).cast("long"),
        "original.sha256": F.sha2(F.col("value"), 256),
    }
    return {**columns, **(overrides or {})}


def bounded_record(max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Column]:
    """The dead letter's ``key`` and ``value`` (``domain.dead_letters.bounded``): as they are when
    they fit ``max_bytes`` together, else the key's first ``max_bytes // 2`` bytes and the value's
    first bytes up to ``max_bytes``."""
    key, value = F.col("kafka_key"), F.col("value")
    fits = F.octet_length(value) + F.coalesce(F.octet_length(key), F.lit(0)) <= F.lit(max_bytes)
    cut_key = F.substring(key, 1, max_bytes // 2)
    cut_value = value.substr(F.lit(1), F.lit(max_bytes) - F.coalesce(F.octet_length(cut_key), F.lit(0)))
    return {"key": F.when(fits, key).otherwise(cut_key), "value": F.when(fits, value).otherwise(cut_value)}


def kafka_headers(columns: Mapping[str, Column] | None = None) -> Column:
    """The ``headers`` column of a dead letter's Kafka record (``domain.dead_letters.to_headers``)."""
    columns = field_columns(columns)
    return F.array(*[F.struct(F.lit(f.header).alias("key"), _text(f, columns[f.name]).cast("binary").alias("value"))
                     for f in FIELDS])


def no_headers() -> Column:
    """The ``headers`` of a record that is not a dead letter."""
    return F.lit(None).cast(HEADERS_TYPE)


def json_document(columns: Mapping[str, Column] | None = None, max_bytes: int = DEFAULT_MAX_BYTES) -> Column:
    """The dead letter's JSON document as a string (``domain.dead_letters.to_document``)."""
    columns, record = field_columns(columns), bounded_record(max_bytes)
    flat = {f.name: (columns[f.name] / 1000).cast("double") if f.kind == TIME else columns[f.name] for f in FIELDS}
    flat.update(key=_base64(record["key"]), value=_base64(record["value"]))
    return F.to_json(_struct(nest(flat)), {"ignoreNullFields": "false"})


def _text(field: Field, column: Column) -> Column:
    if field.kind == TIME:
        seconds = ((column - F.pmod(column, F.lit(1000))) / 1000).cast("long")
        return F.concat(seconds.cast("string"), F.lit("."), F.lpad(F.pmod(column, F.lit(1000)).cast("string"), 3, "0"))
    return column.cast("string") if field.kind == INTEGER else column


def _base64(column: Column) -> Column:
    """Base64 on one line: Spark's ``base64`` breaks it every 76 characters (MIME) unless
    ``spark.sql.chunkBase64String.enabled`` is off; the definition has no line breaks."""
    return F.regexp_replace(F.base64(column), "[\\r\\n]", "")


def _struct(tree: dict) -> Column:
    return F.struct(*[(_struct(value) if isinstance(value, dict) else value).alias(name) for name, value in tree.items()])
