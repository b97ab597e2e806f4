"""The notification contract: every NotificationSink and NotificationSource adapter pair over
one medium must pass these.

An adapter's test module subclasses ``NotificationContract`` and implements:

* ``make_sink()``: a fresh sink publishing to the medium (the file, the topic), empty when a test starts;
* ``make_source()``: a fresh source reading that medium; a second one is a restart (the same
  file, the same consumer group);
* ``append_raw(values)``: one record per value added to the medium without the sink (how a
  malformed notification gets there);
* ``published()``: the raw records the medium holds, in order, read back without the adapters.

How a source reports a malformed notification (a dead letter, a log line) and whether a
restart resumes after ``commit`` differ per adapter: they are tested in the adapters' modules.
"""

from __future__ import annotations

import time

from domain import Event, Notification, NotificationSource, parse_notification

T = 1_689_019_596

NOTES = [
    Notification("INVALIDATE", "sink refused the event", Event("a@1", "a", "APP", T)),
    Notification(
        "INVALIDATE",
        "downstream lost it \u2603 caf\u00e9",
        Event("b@2", "b\u00e9", "WEB", T + 1, {"extra": [1, {"x": None}]}),
    ),
    Notification("INVALIDATE", "", Event("c@3", "c", "APP", T + 2, {"region": "eu"})),
]

MALFORMED = [
    b"garbage",
    b"\xff\xfe not UTF-8",
    (
        b'{"notification": "FORGET", "exception": "", "event": {"id": "a@1", "uniqueValue": "a", "type": "APP", '
        b'"timestamp": 1689019596}}'
    ),
    b'{"notification": "INVALIDATE", "exception": "no event"}',
    b'{"notification": "INVALIDATE", "exception": "", "event": {"id": "a@1", "type": "APP", "timestamp": 1}}',
    # issue 31: an event nested 2,000 deep (a RecursionError crashed the engine), a lone surrogate
    b'{"notification": "INVALIDATE", "exception": "", "event": ' + b'{"x": ' * 2000 + b"1" + b"}" * 2000 + b"}",
    (
        b'{"notification": "INVALIDATE", "exception": "\\ud800", "event": {"id": "a@1", "uniqueValue": "a", '
        b'"type": "APP", "timestamp": 1689019596}}'
    ),
]


def full(notes: list[Notification]) -> list[tuple]:
    """Notifications compared with their events' extra fields (``Event`` equality ignores them)."""
    return sorted(((n.kind, n.exception, n.event, sorted(n.event.fields.items(), key=repr)) for n in notes), key=repr)


def poll(source: NotificationSource, want: int, timeout: float = 30.0) -> list[Notification]:
    """Poll until ``want`` notifications came (a Kafka consumer joins its group first), then until one brings none."""
    notes, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch = source.poll(0.5)
        notes += batch
        if len(notes) >= want and not batch:
            break
    return notes


class NotificationContract:
    def make_sink(self):
        raise NotImplementedError

    def make_source(self) -> NotificationSource:
        raise NotImplementedError

    def append_raw(self, values: list[bytes]) -> None:
        raise NotImplementedError

    def published(self) -> list[bytes]:
        raise NotImplementedError

    def test_publish_is_durable_when_it_returns(self):
        sink = self.make_sink()
        sink.publish(NOTES[0])
        assert full([parse_notification(v) for v in self.published()]) == full(NOTES[:1])
        sink.publish(NOTES[1])
        assert full([parse_notification(v) for v in self.published()]) == full(NOTES[:2])
        sink.close()

    def test_published_notifications_come_back_equal(self):
        sink = self.make_sink()
        for note in NOTES:
            sink.publish(note)
        source = self.make_source()
        assert full(poll(source, len(NOTES))) == full(NOTES)
        source.close()
        sink.close()

    def test_each_poll_returns_only_what_arrived_since_the_last_one(self):
        sink, source = self.make_sink(), self.make_source()
        sink.publish(NOTES[0])
        assert poll(source, 1) == NOTES[:1]
        sink.publish(NOTES[1])
        assert poll(source, 1) == NOTES[1:2]
        assert source.poll(0.5) == []
        source.close()
        sink.close()

    def test_malformed_notifications_are_not_returned_and_hold_back_nothing(self):
        sink = self.make_sink()
        self.append_raw(MALFORMED[:3])
        sink.publish(NOTES[0])
        self.append_raw(MALFORMED[3:])
        sink.publish(NOTES[1])
        source = self.make_source()
        assert full(poll(source, 2)) == full(NOTES[:2])
        source.close()
        sink.close()

    def test_notifications_not_committed_come_again_to_a_fresh_source(self):
        sink = self.make_sink()
        sink.publish(NOTES[0])
        source = self.make_source()
        assert poll(source, 1) == NOTES[:1]
        source.close()
        again = self.make_source()
        assert poll(again, 1) == NOTES[:1]
        again.close()
        sink.close()
