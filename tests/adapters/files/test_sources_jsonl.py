"""The input contract against the JSONL file source (records appended to a real file)."""

from __future__ import annotations

import os

import pytest

from adapters.files import JsonlSource
from domain import SetupError, SourcePosition
from tests.domain.ports.source_contract import EventSourceContract, read


class TestJsonlSource(EventSourceContract):
    bounded = True

    @pytest.fixture(autouse=True)
    def _path(self, tmp_path):
        self.path = tmp_path / "in.jsonl"
        self.path.touch()

    def append(self, values):
        with open(self.path, "ab") as file:
            file.writelines(value + b"\n" for value in values)

    def make_source(self):
        return JsonlSource(str(self.path))

    def position_of(self, index):
        return SourcePosition(str(self.path), 0, index + 1)

    def test_blank_lines_are_framing_not_records_but_still_count_as_lines(self):
        self.path.write_bytes(b'{"a": 1}\n\n   \t\n{"b": 2}\r\n\n{"c": 3}')
        source = self.make_source()
        records = read(source, 3)
        assert [(r.value, r.position.offset) for r in records] == [(b'{"a": 1}', 1), (b'{"b": 2}', 4), (b'{"c": 3}', 6)]
        assert source.exhausted is True
        source.close()

    def test_lines_end_as_the_spark_engine_ends_them_and_unicode_blanks_are_framing(self):
        nbsp, separator = "\u00a0".encode(), b"\x1f"
        self.path.write_bytes(
            b'{"a": 1}\r{"b": 2}\r\n' + nbsp + b"\n" + separator + b" \x1e\r" + b"\xff\n" + b'{"c": 3}\r'
        )
        source = self.make_source()
        records = read(source, 4)
        assert [(r.value, r.position.offset) for r in records] == [
            (b'{"a": 1}', 1),
            (b'{"b": 2}', 2),
            (b"\xff", 5),
            (b'{"c": 3}', 6),
        ]
        source.close()

    def test_a_cr_at_the_end_of_what_came_so_far_waits_for_the_next_byte_before_it_ends_a_line(self, tmp_path):
        fifo = tmp_path / "in.fifo"
        os.mkfifo(fifo)
        writer = os.open(fifo, os.O_RDWR)  # a writer that is already there: opening the reader does not block
        source = JsonlSource(str(fifo))
        os.write(writer, b'{"a": 1}\r')
        assert source.poll(10, 0.1) == []  # the \r may be the first half of a \r\n
        os.write(writer, b'\n{"b": 2}\r')
        assert [r.value for r in source.poll(10, 0.1)] == [b'{"a": 1}']
        os.close(writer)
        assert [r.value for r in source.poll(10, 0.5)] == [b'{"b": 2}']
        assert source.exhausted is True
        source.close()

    def test_a_missing_file_is_a_setup_error_never_retried(self):
        with pytest.raises(SetupError, match="cannot read"):
            JsonlSource(str(self.path.parent / "missing.jsonl"))
