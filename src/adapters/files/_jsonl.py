"""JSONL files, stdin and stdout: one record per line.

A line ends at ``\n``, ``\r\n`` or a lone ``\r``; blank lines (``domain._events.is_blank_line``)
are framing, not records. Both as the Spark engine reads a directory. A source's position is (path, 0, line number), and its
owner token says when a record read again is a replay of itself (:class:`JsonlSource`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import secrets
import select
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from domain import (
    DEFAULT_MAX_BYTES,
    DeadLetter,
    DedupError,
    Duplicate,
    Event,
    RawRecord,
    SetupError,
    SinkUnavailable,
    SourcePosition,
    SourceUnavailable,
    dead_letters,
    duplicates,
    is_blank_line,
)

STDIO = "-"
_WONT_HEAL = {errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EACCES, errno.EPERM, errno.EROFS}


def opening_failed(exc: OSError, what: str, transient: type[DedupError]) -> DedupError:
    """A file that cannot be opened: a ``SetupError`` when waiting cannot help (missing, a
    directory, not permitted), else ``transient`` (e.g. out of file descriptors)."""
    kind = SetupError if exc.errno in _WONT_HEAL else transient
    return kind(f"{what}: {exc.strerror}")


@dataclass(eq=False, slots=True)
class LinePosition(SourcePosition):
    """A line of a JSONL input: equal to, and hashed as, the ``SourcePosition`` (path or
    ``stdin``, 0, line) that dead letters and logs show. Its ``token``, the record's owner in
    the state, adds ``identity``: a record read again is a replay only when the token matches."""

    identity: str = ""

    def token(self) -> str:
        """``source:0:line#identity``, always valid UTF-8 (a path that is not is escaped)."""
        source = self.source.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        return f"{source}:{self.partition}:{self.offset}#{self.identity}"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SourcePosition):
            return NotImplemented
        return (self.source, self.partition, self.offset) == (other.source, other.partition, other.offset)

    __hash__ = SourcePosition.__hash__


class JsonlSource:
    """A JSONL file, or stdin (``-``), read from its first line on every run.

    What a record read again means (its owner token, :class:`LinePosition`):

    * **A file** is read again from its start by every run, and this is how a run that crashed
      is recovered (the file keeps no acknowledged position). A line with the same bytes at the
      same line of the same path is the same record: a *replay*, which gets its first verdict
      again (``domain._state.Claim.replays``). So a run after a crash loses nothing
      (at-least-once), and a second run over a file already processed emits its unique events
      again. A different record at that line (the file was replaced) is new input: the token
      holds a digest of the line's bytes. New input belongs in a new file.
    * **stdin** cannot be read again: what a new run reads there is always new input, never a
      replay. Its tokens hold an id of this run, so an event an earlier run emitted (kept in a
      snapshot or in Redis) is a duplicate; within the run the tokens stay the same, so a batch
      retried after a transient error still gets its verdicts back.
    """

    def __init__(self, path: str):
        self.name = "stdin" if path == STDIO else path
        self._run = f"run-{secrets.token_hex(8)}" if path == STDIO else None
        if path == STDIO and sys.stdin is None:
            raise SetupError("stdin is closed: pipe the events in, or read a file (file:PATH)")
        try:
            self._file: BinaryIO = sys.stdin.buffer if path == STDIO else open(path, "rb")
        except OSError as exc:
            raise opening_failed(exc, f"cannot read {path}", SourceUnavailable) from None
        self._lines = _Lines(self._file.fileno())
        self._line = 0
        self.committed_line = 0

    def poll(self, max_records: int, timeout: float) -> list[RawRecord]:
        """Up to ``max_records`` lines; waits at most ``timeout`` for more when the input (a pipe,
        stdin) has none yet, so an idle input returns an empty batch instead of blocking."""
        records: list[RawRecord] = []
        deadline = time.monotonic() + timeout
        while len(records) < max_records:
            line = self._lines.next(max(0.0, deadline - time.monotonic()))
            if line is None:
                break
            self._line += 1
            value = line.rstrip(b"\r\n")
            if not is_blank_line(value):
                records.append(
                    RawRecord(value, LinePosition(self.name, 0, self._line, self._identity(value)), arrived=time.time())
                )
        return records

    def _identity(self, value: bytes) -> str:
        """This run's id for stdin; for a file, a digest of the line's bytes."""
        return self._run or hashlib.blake2b(value, digest_size=8).hexdigest()

    @property
    def exhausted(self) -> bool:
        return self._lines.ended

    def assignment(self) -> list[str]:
        return [SourcePosition(self.name, 0, 0).partition_name()]

    def retain(self, records: list[RawRecord]) -> list[RawRecord]:
        return records  # one reader per file

    def commit(self, records: Sequence[RawRecord]) -> None:
        if records:
            self.committed_line = records[-1].position.offset

    def close(self) -> None:
        if self._file is not sys.stdin.buffer:
            self._file.close()


_LINE_END = re.compile(rb"\r\n?|\n")


def _line_end(buffer: bytearray, start: int, ended: bool) -> int:
    """Where the line at ``start`` ends (past its line end); -1 when no line end came yet, or
    when a ``\r`` is the last byte read and a ``\n`` may still follow it."""
    match = _LINE_END.search(buffer, start)
    if match is None or (match.end() == len(buffer) and match.group() == b"\r" and not ended):
        return -1
    return match.end()


class _Lines:
    """Lines read from a file descriptor without blocking past a deadline (``select``)."""

    def __init__(self, fd: int, chunk: int = 1 << 16):
        self.fd, self.chunk = fd, chunk
        self.ended = False
        self._buffer = bytearray()
        self._start = 0

    def next(self, wait: float) -> bytes | None:
        """The next line (its line end kept, the last one maybe without); None when none came
        within ``wait`` seconds or the input ended. A line ends at ``\n``, ``\r\n`` or a lone
        ``\r``, as Hadoop's line reader (the Spark engine's) ends it."""
        while True:
            end = _line_end(self._buffer, self._start, self.ended)
            if end >= 0:
                return self._take(end)
            if self.ended:
                return self._take(len(self._buffer)) if self._start < len(self._buffer) else None
            if not select.select([self.fd], [], [], wait)[0]:
                return None
            data = os.read(self.fd, self.chunk)
            if not data:
                self.ended = True
            del self._buffer[: self._start]
            self._start = 0
            self._buffer += data

    def _take(self, end: int) -> bytes:
        line = bytes(self._buffer[self._start : end])
        self._start = end
        return line


class _LineWriter:
    def __init__(self, path: str):
        self.path = path
        if path == STDIO and sys.stdout is None:
            raise SetupError("stdout is closed: redirect it, or write a file (file:PATH)")
        try:
            if path == STDIO:
                self._file: BinaryIO = sys.stdout.buffer
            else:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                self._file = open(path, "ab")
        except OSError as exc:
            raise opening_failed(exc, f"cannot write {path}", SinkUnavailable) from None

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
    """Writes one JSON document per dead letter, as ``domain._dead_letters.to_document`` defines it,
    its key plus value bounded by ``max_bytes``."""

    def __init__(self, path: str, max_bytes: int = DEFAULT_MAX_BYTES):
        super().__init__(path)
        self.max_bytes = max_bytes

    def write(self, dead_letter: DeadLetter) -> None:
        self._write_line(json.dumps(dead_letters.to_document(dead_letter, self.max_bytes)).encode())


class JsonlDuplicateSink(_LineWriter):
    """Writes one JSON document per duplicate report, as ``domain._duplicates.to_document`` defines it."""

    def write(self, duplicate: Duplicate) -> None:
        self._write_line(json.dumps(duplicates.to_document(duplicate)).encode())
