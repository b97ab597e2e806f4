"""The output contracts against the JSONL file adapters (read back from the file)."""

from __future__ import annotations

import base64
import json

import pytest

from adapters.files.jsonl import JsonlDeadLetterSink, JsonlSink
from tests.contracts.sink_contract import DeadLetterSinkContract, EventSinkContract, ReadDeadLetter


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
        return JsonlDeadLetterSink(str(self.path))

    def written(self):
        if not self.path.exists():
            return []
        return [read(json.loads(line)) for line in self.path.read_bytes().splitlines()]


def read(doc: dict) -> ReadDeadLetter:
    value = base64.b64decode(doc["value_b64"])
    assert doc["value"] == (value.decode() if _utf8(value) else None)
    return ReadDeadLetter(value, doc["reason"], doc["error"], doc["error_class"], doc["source"]["name"],
                          doc["source"]["partition"], doc["source"]["offset"], doc["attempts"], doc["time"])


def _utf8(value: bytes) -> bool:
    try:
        value.decode()
    except UnicodeDecodeError:
        return False
    return True
