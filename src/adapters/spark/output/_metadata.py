"""``domain._metadata``'s encodings as Spark column expressions: a record with metadata fields.

Spark cannot call the domain's encoders per row without leaving the JVM, so the outputs that
carry metadata (dead letters, duplicate reports) build the same encodings from their
definition's ``FIELDS`` over a judged batch's columns: ``headers_column`` (Kafka ``dedup.*``
headers, a field whose value is null left out), ``document_column`` (the JSON document, a
null field left out, ``key`` null when the record had none) and ``bounded_record``
(``domain._metadata.cut_to``). Each definition's module holds its columns to the domain by a
parity test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import reduce

from pyspark.sql import Column
from pyspark.sql import functions as F

from domain import Field, metadata, nest

HEADERS_TYPE = "array<struct<key:string,value:binary>>"


def bounded_record(max_bytes: int) -> dict[str, Column]:
    """The record's ``key`` and ``value`` (``domain._metadata.cut_to``): as they are when they fit
    ``max_bytes`` together, else the key's first ``max_bytes // 2`` bytes and the value's first
    bytes up to ``max_bytes``."""
    key, value = F.col("kafka_key"), F.col("value")
    fits = F.octet_length(value) + F.coalesce(F.octet_length(key), F.lit(0)) <= F.lit(max_bytes)
    cut_key = F.substring(key, 1, max_bytes // 2)
    cut_value = value.substr(F.lit(1), F.lit(max_bytes) - F.coalesce(F.octet_length(cut_key), F.lit(0)))
    return {"key": F.when(fits, key).otherwise(cut_key), "value": F.when(fits, value).otherwise(cut_value)}


def headers_column(fields: Sequence[Field], columns: Mapping[str, Column], optional: bool = False) -> Column:
    """The ``headers`` column (``domain._metadata.to_headers``); ``optional``: fields whose value is null are left out."""
    headers = F.array(
        *[
            F.struct(F.lit(f.header).alias("key"), text(f, columns[f.name]).cast("binary").alias("value"))
            for f in fields
        ]
    )
    return F.filter(headers, lambda header: header["value"].isNotNull()) if optional else headers


def no_headers() -> Column:
    """The ``headers`` of a record that carries no metadata."""
    return F.lit(None).cast(HEADERS_TYPE)


def document_column(fields: Sequence[Field], columns: Mapping[str, Column], record: Mapping[str, Column]) -> Column:
    """The JSON document as a string (``domain._metadata.to_document``): the fields (a null one left
    out, a nested object whose fields are all null too), then ``key`` (null when none) and ``value``."""
    flat = {f.name: seconds(columns[f.name]) if f.kind == metadata.TIME else columns[f.name] for f in fields}
    meta = F.to_json(_struct(nest(flat)))  # nulls are left out (ignoreNullFields, Spark's default)
    key = F.coalesce(F.concat(F.lit('"'), base64(record["key"]), F.lit('"')), F.lit("null"))
    return F.concat(
        meta.substr(F.lit(1), F.length(meta) - 1),
        F.when(F.length(meta) > 2, F.lit(",")).otherwise(F.lit("")),
        F.lit('"key":'),
        key,
        F.lit(',"value":"'),
        base64(record["value"]),
        F.lit('"}'),
    )


def seconds(millis: Column) -> Column:
    """A time in milliseconds as seconds with three decimals, exactly (a decimal: JSON shows
    ``1795771270.327``, where a double would show ``1.795771270327E9``)."""
    return (millis.cast("decimal(20,0)") / 1000).cast("decimal(20,3)")


def text(field: Field, column: Column) -> Column:
    """A field's header text: text as it is, an integer in decimal, a time as ``<seconds>.<3 digits>``."""
    if field.kind == metadata.TIME:
        seconds = ((column - F.pmod(column, F.lit(1000))) / 1000).cast("long")
        return F.concat(seconds.cast("string"), F.lit("."), F.lpad(F.pmod(column, F.lit(1000)).cast("string"), 3, "0"))
    return column.cast("string") if field.kind == metadata.INTEGER else column


def base64(column: Column) -> Column:
    """Base64 on one line: Spark's ``base64`` breaks it every 76 characters (MIME) unless
    ``spark.sql.chunkBase64String.enabled`` is off; the definition has no line breaks."""
    return F.regexp_replace(F.base64(column), "[\\r\\n]", "")


def _struct(tree: dict) -> Column:
    """The nested struct of ``tree``; a nested one is null when all its fields are (left out of the JSON)."""
    parts = []
    for name, value in tree.items():
        if isinstance(value, dict):
            leaves = _leaves(value)
            value = F.when(reduce(lambda a, b: a | b, [leaf.isNotNull() for leaf in leaves]), _struct(value))
        parts.append(value.alias(name))
    return F.struct(*parts)


def _leaves(tree: dict) -> list[Column]:
    return [leaf for value in tree.values() for leaf in (_leaves(value) if isinstance(value, dict) else [value])]
