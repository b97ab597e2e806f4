"""INVALIDATE notifications from and to JSONL files.

The source follows its file: each poll returns the lines appended since the last one,
so notifications written while the engine runs take effect between batches. Lines end and
blank lines are skipped as in the event files (``\n``, ``\r\n`` or a lone ``\r``;
``domain._events.is_blank_line``). A line that is not a valid notification is logged and
skipped (it names no key to forget).
"""

from __future__ import annotations

import logging
import re

from adapters.files._jsonl import _LineWriter, opening_failed
from domain import InvalidEvent, Notification, SourceUnavailable, encode_notification, is_blank_line, parse_notification

log = logging.getLogger(__name__)
_LONE_CR = re.compile(rb"\r(?!\n)")


class JsonlNotificationSource:
    def __init__(self, path: str):
        self.path = path
        try:
            self._file = open(path, "rb")
        except OSError as exc:
            raise opening_failed(exc, f"cannot read notifications {path}", SourceUnavailable) from None
        self.rejected = 0

    def poll(self, timeout: float, final: bool = False) -> list[Notification]:
        notes = []
        for line in iter(self._file.readline, b""):
            if not line.endswith(b"\n") and not is_blank_line(line) and not final:
                self._file.seek(-len(line), 1)  # a line still being written: read it next time
                break
            for part in _LONE_CR.split(line):  # lines end as in the event files (adapters.files._jsonl)
                if not is_blank_line(part):
                    notes += self._parse(part.strip())
        return notes

    def _parse(self, line: bytes) -> list[Notification]:
        try:
            return [parse_notification(line)]
        except InvalidEvent as exc:
            self.rejected += 1
            log.warning("ignored notification in %s: %s (%s)", self.path, exc.code, exc.detail)
            return []

    def commit(self) -> None:
        pass

    def close(self) -> None:
        self._file.close()


class JsonlNotificationSink(_LineWriter):
    def publish(self, notification: Notification) -> None:
        self._write_line(encode_notification(notification))
        self.flush()
