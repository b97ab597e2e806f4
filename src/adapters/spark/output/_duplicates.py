"""The duplicate report as Spark column expressions, mirroring ``domain._duplicates``.

Built from ``domain._duplicates.FIELDS`` in native expressions (``output._metadata``) over a
judged batch's columns: ``rule``, ``window``, ``t`` (the duplicate's time under its rule),
``source``, ``partition``, ``offset``, ``value``, ``kafka_key`` and the judge's
``repeats_time`` and ``repeats_owner`` (the emission it repeats and its maker's position
token, ``domain._events.SourcePosition.from_token``; null when the state does not know it).
``time`` is the micro-batch's time (``adapters.spark.shared._batch_time.CLOCK``). ``kafka_headers(max_bytes)``
is the Kafka ``headers`` column, ``bounded_record(max_bytes)`` the key and value the record
carries and ``json_document(max_bytes)`` the JSONL document.
``tests/adapters/spark/output/test_spark_duplicates.py`` holds them to the domain's encoders.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column
from pyspark.sql import functions as F

from adapters.spark.output._metadata import bounded_record as bounded_metadata_record
from adapters.spark.output._metadata import document_column, headers_column
from adapters.spark.shared import clock_millis
from domain import duplicates

TOKEN = r"^(.*):(-?\d+):(\d+)(#.*)?$"  # SourcePosition.token, with what a file's line adds after '#'


def field_columns(max_bytes: int, overrides: Mapping[str, Column] | None = None) -> dict[str, Column]:
    """Each field of ``FIELDS`` by name, typed as the definition (``time`` in milliseconds)."""
    owner = F.col("repeats_owner")
    known = owner.rlike(TOKEN)
    cut = F.octet_length(bounded_metadata_record(max_bytes)["value"]) < F.octet_length(F.col("value"))
    columns = {
        "rule": F.col("rule"),
        "window": F.col("window").cast("long"),
        "event_time": F.col("t").cast("long"),
        "source.topic": F.col("source"),
        "source.partition": F.col("partition").cast("long"),
        "source.offset": F.col("offset").cast("long"),
        "repeats.topic": F.when(known, F.regexp_extract(owner, TOKEN, 1)),
        "repeats.partition": F.when(known, F.regexp_extract(owner, TOKEN, 2).cast("long")),
        "repeats.offset": F.when(known, F.regexp_extract(owner, TOKEN, 3).cast("long")),
        "repeats.time": F.col("repeats_time").cast("long"),
        "apart": F.abs(F.col("t") - F.col("repeats_time")).cast("long"),
        "time": clock_millis(),
        "original.size": F.when(cut, F.octet_length(F.col("value")).cast("long")),
        "original.sha256": F.when(cut, F.sha2(F.col("value"), 256)),
    }
    return {**columns, **(overrides or {})}


def bounded_record(max_bytes: int) -> dict[str, Column]:
    """The report's ``key`` and ``value`` (``domain._duplicates.bounded``)."""
    return bounded_metadata_record(max_bytes)


def kafka_headers(max_bytes: int, columns: Mapping[str, Column] | None = None) -> Column:
    """The ``headers`` column of a report's Kafka record (``domain._duplicates.to_headers``)."""
    return headers_column(duplicates.FIELDS, field_columns(max_bytes, columns), optional=True)


def json_document(max_bytes: int, columns: Mapping[str, Column] | None = None) -> Column:
    """The report's JSON document as a string (``domain._duplicates.to_document``)."""
    return document_column(duplicates.FIELDS, field_columns(max_bytes, columns), bounded_record(max_bytes))
