"""The input contract against the JSONL file source (records appended to a real file)."""

from __future__ import annotations

import pytest

from adapters.files.jsonl import JsonlSource
from domain.errors import SetupError
from domain.events import SourcePosition
from tests.contracts.source_contract import EventSourceContract, read


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
        assert [(r.value, r.position.offset) for r in records] == [(b'{"a": 1}', 1), (b'{"b": 2}', 4),
                                                                   (b'{"c": 3}', 6)]
        assert source.exhausted is True
        source.close()

    def test_a_missing_file_is_a_setup_error_never_retried(self):
        with pytest.raises(SetupError, match="cannot read"):
            JsonlSource(str(self.path.parent / "missing.jsonl"))
