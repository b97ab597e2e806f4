"""Golden scenario tables: the semantics as data, run through every engine.

Each scenario has rules (type → window, lateness) and a stream of steps, each with the
verdict a correct engine gives: ``emit``, ``dup`` (dropped), ``late`` or an invalid code
(dead-lettered). A ``dup`` names the step whose emission it repeats (its index; in an
invalidation scenario ``(batch, index)``): the first copy a duplicate report points at.
Engines run the records in order and report a verdict per record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    type: str
    key: str
    t: int
    verdict: str
    repeats: int | tuple[int, int] | None = None  # a ``dup``'s: the step whose emission it repeats

    def record(self, index: int) -> bytes:
        return json.dumps({"id": f"e{index}", "uniqueValue": self.key, "type": self.type, "timestamp": self.t}).encode()


@dataclass(frozen=True)
class Scenario:
    name: str
    steps: tuple[Step, ...]
    windows: tuple[tuple[str, int], ...] = (("APP", 30), ("WEB", 600))
    lateness: int | None = None

    def records(self) -> list[bytes]:
        return [step.record(i) for i, step in enumerate(self.steps)]

    def expected(self) -> list[str]:
        return [step.verdict for step in self.steps]

    def expected_repeats(self) -> dict[int, int]:
        """For each ``dup`` step, the index of the step whose emission it repeats."""
        return {i: step.repeats for i, step in enumerate(self.steps) if step.verdict == "dup"}


def s(*steps: tuple) -> tuple[Step, ...]:
    return tuple(Step(*step) for step in steps)


T = 1_689_019_596

SCENARIOS = (
    Scenario(
        "in-order duplicate is dropped",
        s(("APP", "a", T, "emit"), ("APP", "a", T + 5, "dup", 0), ("APP", "b", T + 6, "emit")),
    ),
    Scenario(
        "window boundary: W-1 dropped, W emitted",
        s(
            ("APP", "a", T, "emit"),
            ("APP", "a", T + 29, "dup", 0),
            ("APP", "a", T + 30, "emit"),
            ("APP", "a", T + 59, "dup", 2),
            ("APP", "a", T + 60, "emit"),
        ),
    ),
    Scenario(
        "the window is measured from the emitted event, not the last duplicate",
        s(("APP", "a", T, "emit"), ("APP", "a", T + 20, "dup", 0), ("APP", "a", T + 40, "emit")),
    ),
    Scenario(
        "per-type windows are independent",
        s(
            ("APP", "k", T, "emit"),
            ("WEB", "k", T, "emit"),
            ("APP", "k", T + 31, "emit"),
            ("WEB", "k", T + 31, "dup", 1),
            ("WEB", "k", T + 599, "dup", 1),
            ("WEB", "k", T + 600, "emit"),
        ),
    ),
    Scenario(
        "out-of-order duplicate inside the window is dropped",
        s(
            ("WEB", "a", T + 100, "emit"),
            ("WEB", "a", T + 10, "dup", 0),
            ("WEB", "b", T + 50, "emit"),
            ("WEB", "b", T + 49, "dup", 2),
        ),
    ),
    Scenario(
        "out-of-order event a full window older is emitted",
        s(("APP", "a", T + 40, "emit"), ("APP", "a", T + 10, "emit"), ("APP", "a", T + 11, "dup", 0)),
    ),  # the first emission that lies within the window
    Scenario(
        "late events are dead-lettered, not dropped",
        s(
            ("APP", "a", T + 100, "emit"),
            ("APP", "b", T + 69, "late"),
            ("APP", "c", T + 70, "emit"),
            ("WEB", "d", T + 69, "emit"),
        ),
    ),
    Scenario(
        "explicit lateness of zero",
        s(("APP", "a", T + 100, "emit"), ("APP", "b", T + 99, "late"), ("APP", "a", T + 100, "dup", 0)),
        lateness=0,
    ),
    Scenario(
        "a backlog: far-apart repeats are judged by event time",
        s(
            ("APP", "k", T, "emit"),
            ("APP", "k", T + 10, "dup", 0),
            ("APP", "k", T + 10_000, "emit"),
            ("APP", "k", T + 10_005, "dup", 2),
        ),
    ),
    Scenario(
        "the same uniqueValue under two types is two keys",
        s(("APP", "d", T, "emit"), ("WEB", "d", T, "emit"), ("APP", "d", T + 1, "dup", 0)),
    ),
    Scenario(
        "out-of-order window boundary: W-1 earlier dropped, W earlier emitted",
        s(("APP", "f", T + 500, "emit"), ("APP", "f", T + 471, "dup", 0), ("APP", "f", T + 470, "emit")),
    ),
    Scenario(
        "types without a rule pass through",
        s(("MOBILE", "a", T, "emit"), ("MOBILE", "a", T, "emit"), ("APP", "a", T, "emit")),
    ),
    Scenario(
        "a long steady stream forgets old keys but still drops recent repeats",
        s(
            ("APP", "x", T, "emit"),
            *[("APP", f"k{i}", T + i, "emit") for i in range(1, 200)],
            ("APP", "x", T + 200, "emit"),
            ("APP", "k199", T + 210, "dup", 199),
        ),
    ),
)

INVALID_RECORDS = (  # (original bytes, the reason every engine dead-letters them with)
    (b"\x80\x81not utf-8", "not_utf8"),
    (b"not json", "not_json"),
    (b"[1, 2]", "not_object"),
    (b'"text"', "not_object"),
    (b'{"uniqueValue":"k","type":"APP","timestamp":1}', "missing_field"),
    (b'{"id": "a", "type": "APP", "timestamp": 1}', "missing_field"),
    (b'{"id":"1","uniqueValue":"k","type":"APP"}', "missing_field"),
    (b'{"id":null,"uniqueValue":"k","type":"APP","timestamp":1}', "null_field"),
    (b'{"id": "a", "uniqueValue": null, "type": "APP", "timestamp": 1}', "null_field"),
    (b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":null}', "null_field"),
    (b'{"id":1,"uniqueValue":"k","type":"APP","timestamp":1}', "wrong_type"),
    (b'{"id":"1","uniqueValue":["k"],"type":"APP","timestamp":1}', "wrong_type"),
    (b'{"id": "a", "uniqueValue": "u", "type": "APP", "timestamp": "1"}', "wrong_type"),
    (b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":1.0}', "wrong_type"),
    (b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":1e3}', "wrong_type"),
    (b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":true}', "wrong_type"),
    (b'{"id": "a", "uniqueValue": "", "type": "APP", "timestamp": 1}', "empty_field"),
    (b'{"id":"1","uniqueValue":"  ","type":"APP","timestamp":1}', "empty_field"),
    (b'{"id":"1","uniqueValue":"k","type":"","timestamp":1}', "empty_field"),
    (b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":-1}', "out_of_range"),
    (b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":253402300800}', "out_of_range"),
    (b'{"id": "a", "uniqueValue": "u", "type": "APP", "timestamp": 99999999999999}', "out_of_range"),
    (b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":100000000000000000000000}', "out_of_range"),
    # not JSON, though Python's json reads them: one engine must not read what another refuses
    (b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":1,"score":NaN}', "not_json"),
    (b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":1,"score":-Infinity}', "not_json"),
    (b'{"id":"1","uniqueValue":"a","uniqueValue":"b","type":"APP","timestamp":1}', "not_json"),
    (b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":1,"extra":1,"extra":2}', "not_json"),
    (b'{"id":"1","uniqueValue":"k","type":"APP","timestamp":1,"p":{"q":[{"r":1,"r":1}]}}', "not_json"),
)


@dataclass(frozen=True)
class Batch:
    """INVALIDATE notifications ``(type, key, t)`` taking effect, then events judged in order."""

    notes: tuple[tuple[str, str, int], ...]
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class InvalidationScenario:
    name: str
    batches: tuple[Batch, ...]

    def notification(self, note: tuple[str, str, int]) -> bytes:
        event_type, key, t = note
        return json.dumps(
            {
                "notification": "INVALIDATE",
                "exception": "downstream lost it",
                "event": {"id": "n", "uniqueValue": key, "type": event_type, "timestamp": t},
            }
        ).encode()

    def records(self) -> list[list[bytes]]:
        """Each batch's events, with ids unique across the scenario."""
        return [
            [
                json.dumps(
                    {"id": f"b{b}e{i}", "uniqueValue": step.key, "type": step.type, "timestamp": step.t}
                ).encode()
                for i, step in enumerate(batch.steps)
            ]
            for b, batch in enumerate(self.batches)
        ]

    def expected(self) -> list[list[str]]:
        return [[step.verdict for step in batch.steps] for batch in self.batches]

    def expected_repeats(self) -> dict[tuple[int, int], tuple[int, int]]:
        """For each ``dup`` step ``(batch, index)``, the step whose emission it repeats."""
        return {
            (b, i): step.repeats
            for b, batch in enumerate(self.batches)
            for i, step in enumerate(batch.steps)
            if step.verdict == "dup"
        }


def b(notes: tuple = (), *steps: tuple) -> Batch:
    return Batch(tuple(notes), s(*steps))


INVALIDATION_SCENARIOS = (
    InvalidationScenario(
        "an invalidated event passes again when re-sent inside its window",
        (
            b((), ("APP", "a", T, "emit"), ("APP", "a", T + 5, "dup", (0, 0))),
            b((("APP", "a", T),), ("APP", "a", T + 6, "emit"), ("APP", "a", T + 10, "dup", (1, 0))),
        ),
    ),
    InvalidationScenario(
        "invalidation is scoped to the rule's type",
        (
            b((), ("WEB", "a", T, "emit"), ("APP", "a", T, "emit")),
            b((("APP", "a", T),), ("WEB", "a", T + 5, "dup", (0, 0)), ("APP", "a", T + 5, "emit")),
        ),
    ),
    InvalidationScenario(
        "every live emission of the key is forgotten",
        (
            b((), ("APP", "a", T, "emit"), ("APP", "a", T + 30, "emit")),
            b((("APP", "a", T + 30),), ("APP", "a", T + 31, "emit"), ("APP", "a", T + 40, "dup", (1, 0))),
        ),
    ),
    InvalidationScenario(
        "invalidating a key never emitted changes nothing else",
        (
            b((), ("APP", "b", T, "emit")),
            b((("APP", "z", T),), ("APP", "b", T + 1, "dup", (0, 0)), ("APP", "z", T + 2, "emit")),
        ),
    ),
    InvalidationScenario(
        "a notification for a type without a rule changes nothing",
        (b((), ("APP", "a", T, "emit")), b((("MOBILE", "a", T),), ("APP", "a", T + 1, "dup", (0, 0)))),
    ),
)
