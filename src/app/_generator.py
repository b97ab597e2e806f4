"""A stream generator whose expected accounting is known by construction.

It writes unique events, copies of them inside their window (duplicates, some out of
order), repeats a full window later (emitted again), events of a type with no rule
(passed through), late events and every kind of invalid record. The expected counts
follow from how the stream was built, not from running any deduplication.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import asdict, dataclass

BASE_TIME = 1_689_019_596
INVALID_SAMPLES = (
    b"this is not json",
    b"[1, 2, 3]",
    b'{"id": "x", "type": "WEB", "timestamp": 1689019596}',
    b'{"id": "x", "uniqueValue": null, "type": "WEB", "timestamp": 1689019596}',
    b'{"id": "x", "uniqueValue": "u", "type": "WEB", "timestamp": "1689019596"}',
    b'{"id": "x", "uniqueValue": "", "type": "APP", "timestamp": 1689019596}',
    b'{"id": "x", "uniqueValue": "u", "type": "APP", "timestamp": 1689019596000000}',
    b'\xff\xfe{"id": "x"}',
)


@dataclass
class Expected:
    records: int = 0
    out: int = 0
    duplicates: int = 0
    dead_lettered: int = 0
    late: int = 0
    invalid: int = 0
    passed_through: int = 0

    def as_accounting(self) -> dict[str, int]:
        d = asdict(self)
        return {"in": d.pop("records"), **d, "skipped": 0}


@dataclass
class StreamSpec:
    uniques: int = 10_000
    dup_ratio: float = 0.3
    repeat_ratio: float = 0.05
    unknown_type_ratio: float = 0.01
    late: int = 5
    invalid_per_kind: int = 2
    windows: tuple[tuple[str, int], ...] = (("APP", 30), ("WEB", 600))
    seed: int = 7


def generate(spec: StreamSpec) -> tuple[list[bytes], Expected]:
    """Records in stream order, and the accounting a correct engine must report."""
    records, _, expected = _build(spec)
    return records, expected


def generate_parts(spec: StreamSpec, parts: int) -> tuple[list[list[bytes]], Expected]:
    """The same records as ``generate`` in ``parts`` consecutive chunks, plus a last chunk
    holding the late records, with the same expected accounting.

    For engines that judge lateness against the watermark of earlier micro-batches (Spark,
    docs/design/spark.md deviation 1): read one chunk per micro-batch, every late record
    comes after the events that make it late. Moving late records later keeps them late.
    """
    records, late, expected = _build(spec)
    ordinary = [r for r in records if r not in late]
    size = -(-len(ordinary) // parts)
    chunks = [ordinary[i : i + size] for i in range(0, len(ordinary), size)]
    return chunks + [[r for r in records if r in late]], expected


def _build(spec: StreamSpec) -> tuple[list[bytes], set[bytes], Expected]:
    rng = random.Random(spec.seed)
    expected = Expected()
    timed: list[tuple[int, int, bytes]] = []
    t = BASE_TIME
    for _ in range(spec.uniques):
        t += rng.randint(0, 2)
        _add_unique(spec, rng, t, timed, expected)
    timed.sort(key=lambda item: (item[0], item[1]))
    records = [value for _, _, value in timed]
    _insert_late(spec, rng, records, expected, t)
    late = set(records[len(records) - spec.late :]) if spec.late else set()
    _insert_invalid(spec, rng, records, expected)
    expected.records = len(records)
    return records, late, expected


def _event(rng: random.Random, unique_value: str, event_type: str, t: int) -> bytes:
    return json.dumps(
        {
            "id": str(uuid.UUID(int=rng.getrandbits(128))),
            "uniqueValue": unique_value,
            "type": event_type,
            "timestamp": t,
        }
    ).encode()


def _add_unique(spec: StreamSpec, rng: random.Random, t: int, timed: list, expected: Expected) -> None:
    seq = len(timed)
    if rng.random() < spec.unknown_type_ratio:
        timed.append((t, seq, _event(rng, f"u-{seq}", "MOBILE", t)))
        expected.out += 1
        expected.passed_through += 1
        return
    event_type, window = rng.choice(spec.windows)
    unique_value = f"{uuid.UUID(int=rng.getrandbits(128)).hex[:8]}-{t}"
    timed.append((t, seq, _event(rng, unique_value, event_type, t)))
    expected.out += 1
    if rng.random() < spec.dup_ratio:
        later = t + rng.randint(0, window - 1)
        timed.append((later, seq + 0.5, _event(rng, unique_value, event_type, later)))
        expected.duplicates += 1
    if rng.random() < spec.dup_ratio / 3:
        # out of order: older than the original, arriving right after it, still inside the window
        timed.append((t, seq + 0.25, _event(rng, unique_value, event_type, t - rng.randint(1, window - 1))))
        expected.duplicates += 1
    if rng.random() < spec.repeat_ratio:
        again = t + window + rng.randint(0, window)
        timed.append((again, seq + 0.75, _event(rng, unique_value, event_type, again)))
        expected.out += 1


def _insert_late(spec: StreamSpec, rng: random.Random, records: list[bytes], expected: Expected, last: int) -> None:
    longest = max(w for _, w in spec.windows)
    for i in range(spec.late):
        records.append(_event(rng, f"late-{i}", "WEB", last - 3 * longest - 100))
        expected.dead_lettered += 1
        expected.late += 1


def _insert_invalid(spec: StreamSpec, rng: random.Random, records: list[bytes], expected: Expected) -> None:
    for sample in INVALID_SAMPLES:
        for _ in range(spec.invalid_per_kind):
            records.insert(rng.randint(0, len(records)), sample)
            expected.dead_lettered += 1
            expected.invalid += 1
