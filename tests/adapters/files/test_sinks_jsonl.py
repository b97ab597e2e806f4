"""The output contracts against the JSONL file adapters (read back from the file)."""

from __future__ import annotations

import json

import pytest

from adapters.files import JsonlDeadLetterSink, JsonlSink
from domain import dead_letters
from tests.domain.ports.sink_contract import BOUND, DeadLetterSinkContract, EventSinkContract


class TestJsonlSink(EventSinkContract):
    @pytest.fixture(autouse=True)
    def _path(self, tmp_path):
        self.path = tmp_path / "out" / "unique.jsonl"

    def make_sink(self):
        return JsonlSink(str(self.path))

    def written(self):
        return self.path.read_bytes().splitlines() if self.path.exists() else []


class TestJsonlDeadLetterSink(DeadLetterSinkContract):
    @pytest.fixture(autouse=True)
    def _path(self, tmp_path):
        self.path = tmp_path / "dead.jsonl"

    def make_sink(self):
        return JsonlDeadLetterSink(str(self.path), BOUND)

    def written(self):
        if not self.path.exists():
            return []
        return [dead_letters.from_document(json.loads(line)) for line in self.path.read_bytes().splitlines()]
