"""The input contract: every EventSource adapter must pass these.

An adapter's test module subclasses ``EventSourceContract`` and implements:

* ``append(values)``: add one record per value to the input through its real medium (lines
  appended to the file, messages produced to the topic). The input exists and is empty when
  a test starts;
* ``make_source()``: a fresh source over that input; a second one is a restart (the same file,
  the same consumer group);
* ``position_of(index)``: the position the ``index``-th record appended (0-based) must carry
  (a file counts lines from 1, a topic counts offsets from 0);
* ``bounded``: True if the source is ``exhausted`` once read to its end, False if it never is.

Only what the port promises is shared here; what adapters do differently (a restart resuming
after the committed records, blank lines, keys) is tested in the adapters' own modules.
"""

from __future__ import annotations

import time

from domain import EventSource, RawRecord, SourcePosition
from tests.domain.ports.sink_contract import UNIQUE_VALUES

# Bytes a source must hand over untouched; it does not parse them, so invalid ones are included.
VALUES = [*UNIQUE_VALUES, b"not json at all", b"\xff\xfe\x00 binary, not UTF-8", b'  {"padded": true} \t']
SLACK = 3.0  # how much later than its timeout a poll may return on a busy machine


def read(source: EventSource, want: int, max_records: int = 100, timeout: float = 30.0) -> list[RawRecord]:
    """Poll until ``want`` records came (a Kafka consumer joins its group first), then until a poll brings none."""
    records, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch = source.poll(max_records, 0.5)
        records += batch
        if len(records) >= want and not batch:
            break
    return records


class EventSourceContract:
    bounded: bool

    def append(self, values: list[bytes]) -> None:
        raise NotImplementedError

    def make_source(self) -> EventSource:
        raise NotImplementedError

    def position_of(self, index: int) -> SourcePosition:
        raise NotImplementedError

    def test_records_come_back_in_order_with_their_original_bytes_untouched(self):
        self.append(VALUES)
        source = self.make_source()
        assert [r.value for r in read(source, len(VALUES))] == VALUES
        source.close()

    def test_a_sole_reader_retains_every_record_it_read(self):
        self.append(VALUES)
        source = self.make_source()
        records = read(source, len(VALUES))
        assert source.retain(list(records)) == records
        source.close()

    def test_each_record_carries_the_position_that_identifies_it(self):
        self.append(VALUES[:3])
        self.append(VALUES[3:5])
        source = self.make_source()
        records = read(source, 5)
        assert [r.position for r in records] == [self.position_of(i) for i in range(5)]
        assert len({r.position for r in records}) == 5
        assert [r.value for r in records] == VALUES[:5]
        source.close()

    def test_poll_returns_at_most_max_records(self):
        self.append(VALUES[:5])
        source = self.make_source()
        batches, deadline = [], time.monotonic() + 30
        while sum(map(len, batches)) < 5 and time.monotonic() < deadline:
            batches.append(source.poll(2, 0.5))
        assert all(len(batch) <= 2 for batch in batches)
        assert [r.value for batch in batches for r in batch] == VALUES[:5]
        source.close()

    def test_poll_on_an_empty_input_returns_nothing_within_about_the_timeout(self):
        source = self.make_source()
        started = time.monotonic()
        assert source.poll(10, 0.5) == []
        assert time.monotonic() - started < 0.5 + SLACK
        source.close()

    def test_poll_after_the_last_record_returns_nothing_within_about_the_timeout(self):
        self.append(VALUES[:2])
        source = self.make_source()
        assert len(read(source, 2)) == 2
        started = time.monotonic()
        assert source.poll(10, 1.0) == []
        assert time.monotonic() - started < 1.0 + SLACK
        source.close()

    def test_not_exhausted_while_records_remain(self):
        self.append(VALUES[:5])
        source = self.make_source()
        assert source.exhausted is False
        records, deadline = [], time.monotonic() + 30
        while not records and time.monotonic() < deadline:
            records = source.poll(2, 0.5)
        assert 0 < len(records) <= 2
        assert source.exhausted is False
        source.close()

    def test_exhausted_after_the_last_record_if_bounded_never_if_unbounded(self):
        self.append(VALUES[:3])
        source = self.make_source()
        records = read(source, 3)
        for _ in range(10):  # a bounded source may learn that it reached the end a poll later
            records += source.poll(10, 0.3)
            if source.exhausted:
                break
        assert [r.value for r in records] == VALUES[:3]
        assert source.exhausted is self.bounded
        assert source.poll(10, 0.3) == []
        assert source.exhausted is self.bounded
        source.close()

    def test_a_fresh_source_reads_the_uncommitted_records_again(self):
        self.append(VALUES[:4])
        source = self.make_source()
        records = read(source, 4)
        source.commit(records[:2])
        source.close()
        again = self.make_source()
        replayed = read(again, 2)
        assert len(records) == 4
        assert replayed[-2:] == records[2:]  # same bytes, positions and keys (at-least-once)
        again.close()

    def test_committing_no_records_acknowledges_nothing(self):
        self.append(VALUES[:3])
        source = self.make_source()
        records = read(source, 3)
        source.commit([])
        source.close()
        again = self.make_source()
        assert read(again, 3) == records
        again.close()
