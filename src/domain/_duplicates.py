"""The duplicate report: why a record did not come out, for every engine.

A record judged a duplicate can be written to the optional duplicates output
(``--duplicates``) as a report: its original key and value, untouched, and its metadata:
the rule (``rule``, the event type) and its ``window`` in seconds; the duplicate's own time
under the rule (``event_time``: its event time, or the time it was judged for a
processing-time rule) and where it came from (``source.topic`` — a topic or a file —,
``source.partition``, ``source.offset``, the line for a file); the emission it repeats, the
first copy: where that came from (``repeats.topic``, ``repeats.partition``,
``repeats.offset``; missing when the state does not know it, e.g. an emission an old state
format kept), its time (``repeats.time``) and how far apart the two are (``apart``, seconds,
less than the window); and when it was judged (``time``, epoch seconds to the millisecond).
A report larger than its output takes carries its record cut, with ``original.size`` and
``original.sha256`` naming the original (as a dead letter does).

Encoded like a dead letter (``domain._metadata``): on Kafka the original value and key with
``dedup.*`` headers, in a JSONL file one document per report with the same names nested
(``{"repeats": {"topic": …, "offset": …, "time": …}, …}``). A consumer reads either with
:func:`from_headers` / :func:`from_document`, whichever engine wrote it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from domain._events import RawRecord, SourcePosition
from domain._metadata import INTEGER, TEXT, TIME, Field, Original, cut_to, millis
from domain._metadata import from_document as metadata_from_document
from domain._metadata import from_headers as metadata_from_headers
from domain._metadata import to_document as metadata_document
from domain._metadata import to_headers as metadata_headers
from domain._state import Emission

FIELDS = (
    Field("rule", TEXT),
    Field("window", INTEGER),
    Field("event_time", INTEGER),
    Field("source.topic", TEXT),
    Field("source.partition", INTEGER),
    Field("source.offset", INTEGER),
    Field("repeats.topic", TEXT, required=False),
    Field("repeats.partition", INTEGER, required=False),
    Field("repeats.offset", INTEGER, required=False),
    Field("repeats.time", INTEGER),
    Field("apart", INTEGER),
    Field("time", TIME),
    Field("original.size", INTEGER, required=False),
    Field("original.sha256", TEXT, required=False),
)
WHAT = "duplicate report"


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A record judged a duplicate of an earlier emission under ``rule``.

    ``first`` is the position of the record that made the emission it repeats (None when the
    state does not know it), ``first_time`` that emission's time; ``time`` is when it was judged.
    """

    record: RawRecord
    rule: str
    window: int
    event_time: int
    first_time: int
    first: SourcePosition | None
    time: float
    original: Original | None = None  # set when ``record`` holds only the first bytes (:func:`bounded`)

    @classmethod
    def of(
        cls, record: RawRecord, rule: str, window: int, event_time: int, repeats: Emission, time: float
    ) -> Duplicate:
        """The report of ``record``, a duplicate of the emission ``repeats`` (its owner is a position token)."""
        return cls(record, rule, window, event_time, repeats.time, SourcePosition.from_token(repeats.owner), time)

    @property
    def apart(self) -> int:
        """Seconds between the duplicate and the emission it repeats (less than the window)."""
        return abs(self.event_time - self.first_time)


def bounded(duplicate: Duplicate, max_bytes: int) -> Duplicate:
    """``duplicate`` with its key plus value cut to ``max_bytes`` (``domain._metadata.cut_to``) when larger."""
    record = cut_to(duplicate.record, max_bytes)
    if record is duplicate.record:
        return duplicate
    cut = len(record.value) < len(duplicate.record.value)
    return replace(
        duplicate,
        record=record,
        original=(duplicate.original or Original.of(duplicate.record.value)) if cut else duplicate.original,
    )


def metadata(duplicate: Duplicate) -> dict[str, str | int | None]:
    """Each field's value by name (``time`` in milliseconds; ``repeats.*`` None when unknown,
    ``original.*`` None unless the record is carried cut)."""
    position, first, original = duplicate.record.position, duplicate.first, duplicate.original
    return {
        "rule": duplicate.rule,
        "window": duplicate.window,
        "event_time": duplicate.event_time,
        "source.topic": position.source,
        "source.partition": position.partition,
        "source.offset": position.offset,
        "repeats.topic": first.source if first else None,
        "repeats.partition": first.partition if first else None,
        "repeats.offset": first.offset if first else None,
        "repeats.time": duplicate.first_time,
        "apart": duplicate.apart,
        "time": millis(duplicate.time),
        "original.size": original.size if original else None,
        "original.sha256": original.sha256 if original else None,
    }


def to_headers(duplicate: Duplicate) -> list[tuple[str, bytes]]:
    """The Kafka headers of ``duplicate``, in ``FIELDS`` order (key and value go as they are)."""
    return metadata_headers(FIELDS, metadata(duplicate))


def to_message(
    duplicate: Duplicate, max_bytes: int | None = None
) -> tuple[bytes, bytes | None, list[tuple[str, bytes]]]:
    """The Kafka message of ``duplicate``, :func:`bounded` by ``max_bytes`` when given: ``(value, key, headers)``."""
    if max_bytes is not None:
        duplicate = bounded(duplicate, max_bytes)
    return duplicate.record.value, duplicate.record.key, to_headers(duplicate)


def from_headers(value: bytes, key: bytes | None, headers: Iterable[tuple[str, bytes]]) -> Duplicate:
    """The report a Kafka message carries. Raises ``ValueError`` when a field is missing or malformed."""
    return _duplicate(value, key, metadata_from_headers(FIELDS, headers, WHAT))


def to_document(duplicate: Duplicate) -> dict[str, Any]:
    """The JSON document of ``duplicate`` (a JSONL line once dumped)."""
    record = duplicate.record
    return metadata_document(FIELDS, metadata(duplicate), record.key, record.value)


def from_document(document: dict[str, Any]) -> Duplicate:
    """The report a JSON document carries. Raises ``ValueError`` when a field is missing or malformed."""
    values, key, value = metadata_from_document(FIELDS, document, WHAT)
    return _duplicate(value, key, values)


def _duplicate(value: bytes, key: bytes | None, values: dict[str, Any]) -> Duplicate:
    position = SourcePosition(values["source.topic"], values["source.partition"], values["source.offset"])
    first = None
    if all(f"repeats.{part}" in values for part in ("topic", "partition", "offset")):
        first = SourcePosition(values["repeats.topic"], values["repeats.partition"], values["repeats.offset"])
    original = None
    if "original.size" in values and "original.sha256" in values:
        original = Original(values["original.size"], values["original.sha256"])
    return Duplicate(
        RawRecord(value, position, key),
        values["rule"],
        values["window"],
        values["event_time"],
        values["repeats.time"],
        first,
        values["time"] / 1000,
        original,
    )
