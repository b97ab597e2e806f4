"""Input streams with known outcomes, for the tests that go through a real broker.

``golden_stream`` is the golden scenario table (``tests/support/scenarios.py``) laid end to end, each
scenario shifted in time and in its keys so scenarios cannot meet, with the invalid records
interleaved: every record comes with the verdict stated in the table. ``reference`` judges
records with the domain core and the in-memory store, the engine the scenario tables already
hold to: the expected outputs of a generated stream, record for record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from adapters import SystemClock
from adapters.memory import InMemoryStateStore
from domain import DEFAULT_RULES, Deduplicator, RawRecord, RuleSet, SourcePosition, Verdict
from tests.support.scenarios import INVALID_RECORDS, SCENARIOS

DEFAULT_WINDOWS = tuple((r.event_type, r.window) for r in DEFAULT_RULES)
SCENARIO_SPACING = 100_000
KEPT = ("emit", "dup")


@dataclass(frozen=True)
class Row:
    value: bytes
    verdict: str  # emit, dup, late, or an invalid code
    repeats: int | None = None  # a dup's: the index in the stream of the row whose emission it repeats

    @property
    def dead_lettered(self) -> bool:
        return self.verdict not in KEPT


def golden_stream() -> list[Row]:
    steps: list[tuple[Row, tuple[int, int] | None]] = []  # each row, with (scenario, step) for a dup's first copy
    scenarios = [s for s in SCENARIOS if s.windows == DEFAULT_WINDOWS and s.lateness is None]
    for i, scenario in enumerate(scenarios):
        for j, step in enumerate(scenario.steps):
            event = {
                "id": f"s{i}-e{j}",
                "uniqueValue": f"s{i}-{step.key}",
                "type": step.type,
                "timestamp": step.t + i * SCENARIO_SPACING,
            }
            steps.append((Row(json.dumps(event).encode(), step.verdict), (i, j, step.repeats)))
    for k, (raw, code) in enumerate(INVALID_RECORDS):
        steps.insert(7 + 13 * k, (Row(raw, code), None))
    index_of = {(place[0], place[1]): n for n, (_, place) in enumerate(steps) if place is not None}
    return [
        Row(row.value, row.verdict, index_of[(place[0], place[2])]) if row.verdict == "dup" else row
        for row, place in steps
    ]


def unique_value(value: bytes) -> bytes:
    return json.loads(value)["uniqueValue"].encode()


@dataclass(frozen=True)
class Judged:
    emitted: list[bytes]
    dead_letters: list[bytes]
    repeats: list[tuple[bytes, bytes]]  # (each duplicate's bytes, the bytes of the record whose emission it repeats)


def reference(records: list[bytes]) -> Judged:
    """What a correct engine emits and dead-letters for ``records`` read in order."""
    core = Deduplicator(RuleSet(), InMemoryStateStore(), SystemClock())
    outcomes, _ = core.process([RawRecord(v, SourcePosition("reference", 0, i)) for i, v in enumerate(records)])
    return Judged(
        [o.record.value for o in outcomes if o.verdict is Verdict.EMIT],
        [o.record.value for o in outcomes if o.verdict is Verdict.DEAD_LETTER],
        [(o.record.value, records[o.duplicate.first.offset]) for o in outcomes if o.verdict is Verdict.DUPLICATE],
    )
