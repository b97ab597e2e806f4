"""JSONL files, stdin and stdout: one record per line.

Blank lines are framing, not records. A source's position is (path, 0, line number).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import BinaryIO, Sequence

from domain.errors import SinkUnavailable, SourceUnavailable
from domain.events import Event, RawRecord, SourcePosition
from domain.dead_letters import DeadLetter, to_document

STDIO = "-"


class JsonlSource:
    def __init__(self, path: str):
        self.name = "stdin" if path == STDIO else path
        try:
            self._file: BinaryIO = sys.stdin.buffer if path == STDIO else open(path, "rb")
        except OSError as exc:
            raise SourceUnavailable(f"cannot read {path}: {exc.strerror}") from None
        self._line = 0
        self._exhausted = False
        self.committed_line = 0

    def poll(self, max_records: int, timeout: float) -> list[RawRecord]:
        records = []
        while len(records) < max_records:
            line = self._file.readline()
            if not line:
                self._exhausted = True
                break
            self._line += 1
            value = line.rstrip(b"\r\n")
            if value.strip():
                records.append(RawRecord(value, SourcePosition(self.name, 0, self._line)))
        return records

    @property
    def exhausted(self) -> bool:
        return self._exhausted

    def assignment(self) -> list[str]:
        return [SourcePosition(self.name, 0, 0).partition_name()]

    def commit(self, records: Sequence[RawRecord]) -> None:
        if records:
            self.committed_line = records[-1].position.offset

    def close(self) -> None:
        if self._file is not sys.stdin.buffer:
            self._file.close()


class _LineWriter:
    def __init__(self, path: str):
        self.path = path
        try:
            if path == STDIO:
                self._file: BinaryIO = sys.stdout.buffer
            else:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                self._file = open(path, "ab")
        except OSError as exc:
            raise SinkUnavailable(f"cannot write {path}: {exc.strerror}") from None

    def _write_line(self, data: bytes) -> None:
        try:
            self._file.write(data + b"\n")
        except OSError as exc:
            raise SinkUnavailable(f"cannot write {self.path}: {exc.strerror}") from None

    def flush(self) -> None:
        try:
            self._file.flush()
        except OSError as exc:
            raise SinkUnavailable(f"cannot flush {self.path}: {exc.strerror}") from None

    def close(self) -> None:
        self.flush()
        if self._file is not sys.stdout.buffer:
            self._file.close()


class JsonlSink(_LineWriter):
    """Writes each unique event's original bytes, one per line."""

    def write(self, record: RawRecord, event: Event) -> None:
        self._write_line(record.value)


class JsonlDeadLetterSink(_LineWriter):
    """Writes one JSON document per dead letter, as ``domain.dead_letters.to_document`` defines it."""

    def write(self, dead_letter: DeadLetter) -> None:
        self._write_line(json.dumps(to_document(dead_letter)).encode())
