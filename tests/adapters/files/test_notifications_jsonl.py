"""The notification contract against the JSONL file adapters (one notification per line of a real file)."""

from __future__ import annotations

import logging

import pytest

from adapters.files import JsonlNotificationSink, JsonlNotificationSource
from domain import SetupError, encode_notification
from tests.domain.ports.notification_contract import MALFORMED, NOTES, NotificationContract, poll


class TestJsonlNotifications(NotificationContract):
    @pytest.fixture(autouse=True)
    def _path(self, tmp_path):
        self.path = tmp_path / "notifications.jsonl"
        self.path.touch()

    def make_sink(self):
        return JsonlNotificationSink(str(self.path))

    def make_source(self):
        return JsonlNotificationSource(str(self.path))

    def append_raw(self, values):
        with open(self.path, "ab") as file:
            file.writelines(value + b"\n" for value in values)

    def published(self):
        return [line for line in self.path.read_bytes().splitlines() if line.strip()]

    def test_lines_end_and_blank_lines_are_skipped_as_in_the_event_files(self):
        one, two = (encode_notification(note) for note in NOTES[:2])
        self.path.write_bytes(one + b"\r" + two + b"\r\n\x1f\n" + "\u00a0".encode() + b"\n")
        source = self.make_source()
        assert source.poll(0) == list(NOTES[:2])
        assert source.rejected == 0

    def test_a_malformed_line_is_logged_and_skipped(self, caplog):
        caplog.set_level(logging.WARNING, logger="adapters.files._notifications")
        self.append_raw(MALFORMED)
        source = self.make_source()
        assert source.poll(0) == []
        assert source.rejected == len(MALFORMED)
        prefix = f"ignored notification in {self.path}: "
        assert all(r.message.startswith(prefix) for r in caplog.records)
        assert [r.message[len(prefix) :].split()[0] for r in caplog.records] == ["bad_notification"] * 4 + [
            "missing_field"
        ] + ["bad_notification"] * 2  # the fifth one's event lacks its uniqueValue
        source.close()

    def test_a_line_still_being_written_is_read_once_it_is_complete(self):
        line = encode_notification(NOTES[0])
        source = self.make_source()
        with open(self.path, "ab") as file:
            file.write(line[:20])
            file.flush()
            assert source.poll(0) == []
            file.write(line[20:] + b"\n")
        assert poll(source, 1) == NOTES[:1]
        source.close()

    def test_a_missing_file_is_a_setup_error_never_retried(self):
        with pytest.raises(SetupError, match="cannot read notifications"):
            JsonlNotificationSource(str(self.path.parent / "missing.jsonl"))
