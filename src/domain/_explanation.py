"""What a state remembers of one key: the answer to "why was my event dropped?".

``dedup state explain`` reads a key's emissions from a store (a memory snapshot, Redis, a Spark
checkpoint) and explains each: its time, when it expires (``expires_at``, its time plus the
rule's window and lateness: until then a repeat less than the window away from its time is a
duplicate) and when the store may forget it (``kept_until``), whether it is
live at the moment asked about (``at``: the rule's watermark where the state records it, else
the wall clock), and the source position of the record that made it (``None``: unknown, an
emission an older state format kept without it).

A key with no emission was never emitted, or was forgotten: expired past ``kept_until``, or
removed by an ``INVALIDATE`` notification; the state cannot tell these apart, and says so.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from domain._events import SourcePosition
from domain._keys import KeyValue, display_value, encode_key
from domain._state import Emission

WALL_CLOCK = "the wall clock: this state does not record the job's watermark"
"""What liveness is judged at by default in a state that keeps no watermark (``SavedState.clock``)."""

NOTHING = (
    "nothing is remembered for this key: no event of it was emitted, or its emissions expired and were "
    "forgotten, or an INVALIDATE notification removed them"
)


def dated(epoch_seconds: int) -> str:
    """``1700000000 = 2023-11-14T22:13:20Z``: epoch seconds with their UTC date (the seconds alone
    where no calendar date exists)."""
    try:
        when = datetime.fromtimestamp(epoch_seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return str(epoch_seconds)
    return f"{epoch_seconds} = {when.strftime('%Y-%m-%dT%H:%M:%SZ')}"


@dataclass(frozen=True)
class ExplainedEmission:
    time: int
    expires_at: int
    kept_until: int
    live: bool
    position: SourcePosition | None

    @classmethod
    def of(cls, emission: Emission, at: int) -> ExplainedEmission:
        return cls(
            emission.time,
            emission.expires_at,
            emission.kept_until,
            emission.expires_at > at,
            SourcePosition.from_token(emission.owner),
        )

    def line(self) -> str:
        state = "live: a repeat less than the window away is a duplicate" if self.live else "expired"
        where = (
            f"{self.position.source} partition {self.position.partition} offset {self.position.offset}"
            if self.position
            else "position unknown (kept by an older state format)"
        )
        return f"emitted at {dated(self.time)}, expires at {dated(self.expires_at)} ({state}), made by {where}"

    def as_dict(self) -> dict[str, Any]:
        position = (
            None
            if self.position is None
            else {"topic": self.position.source, "partition": self.position.partition, "offset": self.position.offset}
        )
        return {
            "time": self.time,
            "expires_at": self.expires_at,
            "kept_until": self.kept_until,
            "live": self.live,
            "position": position,
        }


@dataclass
class Explanation:
    store: str
    rule: str
    key: dict[str, KeyValue]
    at: int
    at_source: str  # what ``at`` is: the rule's watermark in the state, the wall clock, or given
    emissions: list[ExplainedEmission] = field(default_factory=list)

    def lines(self) -> list[str]:
        shown = ", ".join(f"{name}={display_value(value)}" for name, value in self.key.items())
        head = [f"{self.store}: rule {self.rule}, key {shown}", f"judged at {dated(self.at)} ({self.at_source})"]
        if not self.emissions:
            return [*head, NOTHING]
        return [*head, *(f"  {e.line()}" for e in self.emissions)]

    def as_dict(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "rule": self.rule,
            "key": self.key,
            "at": self.at,
            "at_source": self.at_source,
            "emissions": [e.as_dict() for e in self.emissions],
        }

    def json(self) -> str:
        return json.dumps(self.as_dict(), indent=2)


def explain(
    store: str, rule: str, key: dict[str, KeyValue], entries: Iterable[Emission], at: int, at_source: str
) -> Explanation:
    """The explanation of ``entries``, the emissions a store keeps for ``key`` under ``rule``, at ``at``."""
    ordered = sorted(entries, key=lambda e: (e.time, e.expires_at))
    return Explanation(store, rule, dict(key), at, at_source, [ExplainedEmission.of(e, at) for e in ordered])


def key_spellings(rule: str, fields: tuple[str, ...], given: dict[str, str]) -> list[tuple[dict[str, KeyValue], str]]:
    """The state keys ``given`` (field → the text a person typed) may name under ``rule``'s key
    ``fields``, each with its typed values: a value is a string, or also an integer or a boolean
    when its text reads as one (``"5"`` and ``5`` are two keys, ``domain._keys``). Raises
    ``ValueError`` naming the fields when ``given`` does not name exactly the rule's."""
    if set(given) != set(fields):
        raise ValueError(f"rule {rule} is keyed by {', '.join(fields)}; got {', '.join(given) or 'no field'}")
    choices = [[given[name], *_typed_readings(given[name])] for name in fields]
    return [(dict(zip(fields, values)), encode_key(rule, values)) for values in itertools.product(*choices)]


def _typed_readings(text: str) -> list[KeyValue]:
    if text in ("true", "false"):
        return [text == "true"]
    try:
        number = int(text)
    except ValueError:
        return []
    return [number] if str(number) == text and -(2**63) <= number < 2**63 else []
