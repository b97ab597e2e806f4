"""The ``INVALIDATE`` notification wire format.

``{"notification": "INVALIDATE", "exception": "…", "event": {…wire event…}}``: forget the
event's deduplication key so the same event, re-sent, is emitted again.
"""

from __future__ import annotations

import json

from domain._errors import InvalidEvent
from domain._events import event_from_object, parse_json
from domain._ports import Notification

INVALIDATE = "INVALIDATE"


def parse_notification(value: bytes) -> Notification:
    """Parse strictly; raises ``InvalidEvent`` (code ``bad_notification`` or an event code)."""
    try:
        obj = parse_json(value, "notification")
    except InvalidEvent as exc:
        raise InvalidEvent("bad_notification", exc.detail) from None
    if not isinstance(obj, dict) or obj.get("notification") != INVALIDATE:
        raise InvalidEvent("bad_notification", 'expected {"notification": "INVALIDATE", ...}', "notification")
    if not isinstance(obj.get("event"), dict):
        raise InvalidEvent("bad_notification", "notification has no event object", "event")
    return Notification(INVALIDATE, str(obj.get("exception", "")), event_from_object(obj["event"]))


def encode_notification(notification: Notification) -> bytes:
    return json.dumps(
        {"notification": notification.kind, "exception": notification.exception, "event": notification.event.to_wire()}
    ).encode()
