"""Deduplication rules: what counts as the same event, and for how long.

Semantics (the contract every engine meets; docs/semantics.md explains it):

* Keys are scoped to their rule: the state key is the rule's name plus the values of its
  ``key_fields`` (``uniqueValue`` by default), so the same ``uniqueValue`` under two types
  never collides; the parts are escaped (``domain._keys``), so no value can forge another key.
* Each event has a time ``t``: its ``timestamp`` (event time, the default) or the wall
  clock when the engine reads it (processing time).
* An event is a **duplicate**, and dropped, when an event with the same key was already
  emitted whose time is less than ``window`` away from ``t`` (``|t - t_emitted| < window``,
  in either direction, so out-of-order arrivals are judged the same way). Otherwise it is
  **emitted** and remembered.
* Events are judged in arrival order: of two events within the window of each other, the
  one that arrives first is emitted.
* An event with ``t < horizon - allowed_lateness`` is **late**, where ``horizon`` is the
  highest ``t`` its own source partition showed for the rule (``domain._watermarks``): it
  goes to the dead-letter output with reason ``late``, never silently dropped. Everything
  newer is judged exactly. With one partition the horizon is the highest ``t`` seen.
* Each rule has a watermark: the minimum over the source's partitions of the highest
  ``t`` seen in each. A remembered emission is needed only while a non-late event could
  still fall inside its window, so it may be forgotten once
  ``watermark >= t_emitted + window + allowed_lateness``.
* An event-time event more than ``max_ahead`` seconds (default 300) past the wall clock
  is dead-lettered with reason ``future`` and moves no watermark.
* Events whose type has no rule are passed through untouched (the default) or
  dead-lettered with reason ``unknown_type``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property

from domain._errors import InvalidEvent, UnknownEventType
from domain._events import Event
from domain._keys import escape, join_parts, key_prefix

DEFAULT_MAX_AHEAD = 300
UNIQUE_VALUE_ONLY = ("uniqueValue",)


class TimeBasis(str, Enum):
    EVENT_TIME = "event-time"
    PROCESSING_TIME = "processing-time"


class UnknownTypePolicy(str, Enum):
    PASS = "pass"
    DEAD_LETTER = "dead-letter"


@dataclass(frozen=True)
class DedupRule:
    """Deduplication for one event type. Times are whole seconds."""

    event_type: str
    window: int
    key_fields: tuple[str, ...] = UNIQUE_VALUE_ONLY
    time_basis: TimeBasis = TimeBasis.EVENT_TIME
    allowed_lateness: int | None = None
    max_ahead: int = DEFAULT_MAX_AHEAD

    def __post_init__(self) -> None:
        if self.window <= 0:
            raise ValueError(f"rule {self.event_type}: window must be positive, got {self.window}")
        if not self.key_fields:
            raise ValueError(f"rule {self.event_type}: key_fields must not be empty")
        if self.allowed_lateness is not None and self.allowed_lateness < 0:
            raise ValueError(f"rule {self.event_type}: allowed_lateness must be >= 0")
        if self.max_ahead < 0:
            raise ValueError(f"rule {self.event_type}: max_ahead must be >= 0")

    @cached_property
    def lateness(self) -> int:
        """Allowed lateness; defaults to the window itself."""
        return self.window if self.allowed_lateness is None else self.allowed_lateness

    @cached_property
    def retention(self) -> int:
        """How long after an emission its memory is needed (window plus lateness)."""
        return self.window + self.lateness

    def check_not_ahead(self, t: int, now: float) -> None:
        """Raise ``InvalidEvent("future")`` when event time ``t`` lies more than ``max_ahead``
        seconds past the wall clock ``now``: such a time is implausible and would move the
        watermark past every honest event."""
        if t > now + self.max_ahead:
            raise InvalidEvent(
                "future", f"time {t} is more than max_ahead {self.max_ahead} s past the clock ({int(now)})", "timestamp"
            )

    def state_key(self, event: Event) -> str:
        """The event's state key: this rule's name and the key fields' values (``domain._keys``)."""
        if self.key_fields == UNIQUE_VALUE_ONLY:
            return self.key_prefix + escape(event.unique_value)  # typed_part of a string
        return self.key_prefix + join_parts([event.field_value(name) for name in self.key_fields])

    @cached_property
    def key_prefix(self) -> str:
        return key_prefix(self.event_type)


DEFAULT_RULES = (DedupRule("APP", 30), DedupRule("WEB", 600))


@dataclass(frozen=True)
class RuleSet:
    rules: dict[str, DedupRule] = field(default_factory=lambda: {r.event_type: r for r in DEFAULT_RULES})
    unknown_types: UnknownTypePolicy = UnknownTypePolicy.PASS

    def rule_for(self, event: Event) -> DedupRule | None:
        """The rule for the event's type; ``None`` means pass through untouched."""
        rule = self.rules.get(event.type)
        if rule is None and self.unknown_types is UnknownTypePolicy.DEAD_LETTER:
            raise UnknownEventType(event.type)
        return rule

    @property
    def max_retention(self) -> int:
        return max((r.retention for r in self.rules.values()), default=0)
