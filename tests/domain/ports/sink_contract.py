"""The output contracts: every EventSink and DeadLetterSink adapter must pass these.

An adapter's test module subclasses ``EventSinkContract`` or ``DeadLetterSinkContract`` and
implements ``make_sink`` (a fresh sink; a dead-letter sink bounded by ``BOUND`` bytes) and
``written`` (what the sink made durable, in order: the values for events, for dead letters
each one as ``domain._dead_letters`` decodes what the medium holds).
Reading back goes through the adapter's real medium (the file, the topic), never the
sink object itself.
"""

from __future__ import annotations

from dataclasses import replace

from domain import (
    MAX_ERROR_CHARS,
    DeadLetter,
    DeadLetterSink,
    Event,
    EventSink,
    Original,
    RawRecord,
    SourcePosition,
    dead_letters,
)

T = 1_689_019_596
BOUND = 4096  # a dead-letter sink's max_bytes in the contract


def record(value: bytes, offset: int, source: str = "events-in", partition: int = 3) -> RawRecord:
    return RawRecord(value, SourcePosition(source, partition, offset), key=b"k%d" % offset)


def event(uid: str, t: int = T, type_: str = "WEB") -> Event:
    return Event(id=f"{uid}@{t}", unique_value=uid, type=type_, timestamp=t)


# Original bytes the sinks must not touch: odd spacing, key order, escapes, non-ASCII text.
UNIQUE_VALUES = [
    b'{"id": "a@1", "uniqueValue": "a", "type": "WEB", "timestamp": 1689019596}',
    b'{ "timestamp":1689019597,"type":"APP","uniqueValue":"b","id":"b@2" , "extra": [1, 2]}',
    '{"id": "c@3", "uniqueValue": "c\\u00e9 \u2603", "type": "WEB", "timestamp": 1689019598}'.encode(),
]


class SinkContract:
    """What both kinds of sink share: built fresh per test, read back through their medium."""

    def make_sink(self):
        raise NotImplementedError

    def written(self) -> list:
        raise NotImplementedError

    def test_flush_with_nothing_written_writes_nothing(self):
        sink = self.make_sink()
        sink.flush()
        assert self.written() == []
        sink.close()


class EventSinkContract(SinkContract):
    def make_sink(self) -> EventSink:
        raise NotImplementedError

    def test_each_unique_event_is_written_once_with_its_original_bytes_in_order(self):
        sink = self.make_sink()
        for i, value in enumerate(UNIQUE_VALUES):
            sink.write(record(value, 10 + i), event(f"u{i}"))
        sink.flush()
        assert self.written() == UNIQUE_VALUES
        sink.close()

    def test_flush_makes_earlier_writes_durable_and_later_ones_follow(self):
        sink = self.make_sink()
        sink.write(record(UNIQUE_VALUES[0], 1), event("u0"))
        sink.flush()
        assert self.written() == UNIQUE_VALUES[:1]
        sink.write(record(UNIQUE_VALUES[1], 2), event("u1"))
        sink.flush()
        assert self.written() == UNIQUE_VALUES[:2]
        sink.close()


DEAD_LETTERS = [
    DeadLetter(
        record(b"not json at all", 7), "not_json", "Expecting value: line 1 column 1", "invalid", 1, 1_700_000_000.125
    ),
    DeadLetter(
        replace(record(b"\xff\xfe\x00 binary, not UTF-8", 8, partition=0), key=b"\x00\xffkey"),
        "not_utf8",
        "'utf-8' codec can't decode byte 0xff",
        "invalid",
        1,
        1_700_000_001.5,
    ),
    DeadLetter(
        replace(record(UNIQUE_VALUES[0], 9, source="other-topic"), key=None),
        "late",
        "event time is older than the watermark minus the rule's lateness",
        "invalid",
        3,
        1_700_000_002.0,
    ),
    DeadLetter(record(UNIQUE_VALUES[2], 10), "bug", "KeyError: 'caf\u00e9 \u2603'", "bug", 2, 1_700_000_003.999),
]


class DeadLetterSinkContract(SinkContract):
    def make_sink(self) -> DeadLetterSink:
        raise NotImplementedError

    def test_each_dead_letter_keeps_its_original_bytes_key_reason_position_attempts_and_time(self):
        sink = self.make_sink()
        for dead_letter in DEAD_LETTERS:
            sink.write(dead_letter)
        sink.flush()
        assert self.written() == DEAD_LETTERS
        sink.close()

    def test_the_error_is_cut_to_its_bound_and_the_time_to_the_millisecond(self):
        sink = self.make_sink()
        sink.write(replace(DEAD_LETTERS[0], error="x" * (MAX_ERROR_CHARS + 5), time=1_700_000_000.1236))
        sink.flush()
        assert self.written() == [replace(DEAD_LETTERS[0], error="x" * MAX_ERROR_CHARS, time=1_700_000_000.124)]
        sink.close()

    def test_a_dead_letter_over_the_bound_keeps_its_first_bytes_and_the_original_size_and_digest(self):
        sink = self.make_sink()
        big = replace(DEAD_LETTERS[0], record=record(b"z" * (3 * BOUND), 11))
        sink.write(big)
        sink.write(DEAD_LETTERS[1])
        sink.flush()
        [cut, whole] = self.written()
        assert cut == dead_letters.bounded(big, BOUND) and whole == DEAD_LETTERS[1]
        assert len(cut.record.value) + len(cut.record.key) == BOUND
        assert cut.original == Original.of(b"z" * (3 * BOUND))
        sink.close()
