"""Records larger than the output topics take, among good records: the stream and what a
consumer must read back, for the kafka engine's test and the Spark engine's alike."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from deploy.local import services
from domain import DeadLetter, dead_letters
from tests.support.kafka_io import create_topics, unique

LIMIT = 20_000  # max.message.bytes of the output and dead-letter topics
T = 1_700_000_000


def event(id_: str, unique_value: str, **extra) -> bytes:
    return json.dumps({"id": id_, "uniqueValue": unique_value, "type": "WEB", "timestamp": T, **extra}).encode()


@dataclass(frozen=True)
class Stream:
    """Good records, a repeat, an oversize unique event and an oversize bad record; the keys are
    this stream's own (a shared Redis state holds no earlier run's)."""

    good: list[bytes]
    big: bytes  # valid and unique, too large for the events topic
    big_bad: bytes  # not JSON, and too large for the dead-letter topic as it is
    records: list[bytes]


def stream() -> Stream:
    run = unique("u")
    good = [event(f"g{i}", f"{run}-{i}") for i in range(10)]
    big, big_bad = event("big", f"{run}-big", blob="x" * 50_000), b"{" + b"y" * 60_000
    return Stream(good, big, big_bad, [*good[:4], big, event("dup", f"{run}-0"), *good[4:7], big_bad, *good[7:]])


def small_topics(bootstrap: str) -> dict[str, str]:
    """A fresh input topic (the broker's default size), and output and dead-letter topics taking ``LIMIT`` bytes."""
    names = {role: unique(role) for role in ("in", "out", "dlq")}
    create_topics(bootstrap, names["in"])
    services.create_topics(bootstrap, names["out"], names["dlq"], config={"max.message.bytes": LIMIT}, exists_ok=False)
    return names


def check_output(run: Stream, out: list, dead: list, counts: dict, limit_read: bool = True) -> None:
    """The good records come out, each oversize record is dead-lettered once, cut to fit, with the
    size and digest of the original, and the accounting balances."""
    assert sorted(m.value for m in out) == sorted(run.good)  # each once (Spark keeps no order within a batch)
    letters = {d.reason: d for d in (dead_letters.from_headers(m.value, m.key, m.raw_headers) for m in dead)}
    assert len(dead) == 2 and set(letters) == {"oversize", "not_json"}
    check_cut(letters["oversize"], run.big, run.records.index(run.big))
    check_cut(letters["not_json"], run.big_bad, run.records.index(run.big_bad))
    if limit_read:
        assert f"larger than the {LIMIT} bytes topic" in letters["oversize"].error
    else:
        assert "its limit could not be read; it refused a message of" in letters["oversize"].error
    assert all(m.headers["dedup.original.sha256"] and len(m.value) < LIMIT for m in dead)
    assert (counts["in"], counts["out"], counts["duplicates"], counts["dead_lettered"]) == (len(run.records), 10, 1, 2)
    assert counts["in"] == counts["out"] + counts["duplicates"] + counts["dead_lettered"] + counts["skipped"]


def check_cut(letter: DeadLetter, original: bytes, offset: int) -> None:
    assert letter.original.size == len(original) and letter.original.sha256 == hashlib.sha256(original).hexdigest()
    assert 0 < len(letter.record.value) < len(original) and original.startswith(letter.record.value)
    assert (letter.record.position.offset, letter.error_class, letter.attempts) == (offset, "invalid", 1)
