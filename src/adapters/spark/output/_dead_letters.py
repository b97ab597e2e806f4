"""The dead letter as Spark column expressions, mirroring ``domain._dead_letters``.

Spark cannot call the domain's encoders per row without leaving the JVM, so this module
builds the same encodings from ``domain._dead_letters.FIELDS`` in native expressions
(``output._metadata``) over a judged batch's columns (``reason``, ``detail``, ``source``, ``partition``, ``offset``,
``value``, ``kafka_key``): ``kafka_headers()`` is the Kafka ``headers`` column
(``array<struct<key: string, value: binary>>``), ``bounded_record(max_bytes)`` the key and
value the Kafka record carries (``domain._dead_letters.bounded``) and ``json_document()`` the
JSONL document. ``tests/adapters/spark/output/test_spark_dead_letters.py`` holds them to the domain's encoders,
field by field.

The Spark engine dead-letters invalid and late records only, each once: ``error_class`` is
``invalid`` and ``attempts`` 1; ``time`` is the micro-batch's time (``adapters.spark.shared._batch_time.CLOCK``:
one instant per micro-batch, the same on a replay). Its ``error`` texts for invalid records are its parser's own
(docs/semantics.md, "Dead letters").
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column
from pyspark.sql import functions as F

from adapters.spark.output._metadata import bounded_record as bounded_metadata_record
from adapters.spark.output._metadata import (
    document_column,
    headers_column,
    no_headers,  # noqa: F401 - re-exported for the writers
)
from adapters.spark.shared import clock_millis
from domain import DEFAULT_MAX_BYTES, MAX_ERROR_CHARS, dead_letters


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
        "time": clock_millis(),
        "original.size": F.octet_length(F.col("value")).cast("long"),
        "original.sha256": F.sha2(F.col("value"), 256),
    }
    return {**columns, **(overrides or {})}


def bounded_record(max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Column]:
    """The dead letter's ``key`` and ``value`` (``domain._dead_letters.bounded``)."""
    return bounded_metadata_record(max_bytes)


def kafka_headers(columns: Mapping[str, Column] | None = None) -> Column:
    """The ``headers`` column of a dead letter's Kafka record (``domain._dead_letters.to_headers``)."""
    return headers_column(dead_letters.FIELDS, field_columns(columns))


def json_document(columns: Mapping[str, Column] | None = None, max_bytes: int = DEFAULT_MAX_BYTES) -> Column:
    """The dead letter's JSON document as a string (``domain._dead_letters.to_document``)."""
    return document_column(dead_letters.FIELDS, field_columns(columns), bounded_record(max_bytes))
