"""Records as an attacker would send them, mixed with honest ones, under rules with a
composite key (APP: ``uniqueValue`` + ``session``).

Every engine, with either state store, must judge the honest records exactly as the domain
core reads them in order (``expected``) and dead-letter each bad record once, with its
original bytes and reason.

Some rows are dated against the wall clock (``hostile``): records from the near future and
a producer whose clock is fast, then honest records of the same partitions a little ahead
of the clock, which must not be judged late. Build the table just before the run and judge
it (``expected``) within ``ON_TIME_BUDGET`` seconds.
"""

from __future__ import annotations

import json
import time

from adapters import SystemClock
from adapters.memory import InMemoryStateStore
from domain import Deduplicator, DedupRule, RawRecord, RuleSet, SourcePosition, Verdict

T = 1_700_000_000
RULES = RuleSet({"APP": DedupRule("APP", 30, key_fields=("uniqueValue", "session")), "WEB": DedupRule("WEB", 600)})
ENV = {"DEDUP_RULES__APP__KEY_FIELDS": "uniqueValue,session"}


def event(id_: str, unique_value: str, type_: str = "APP", t: int = T, **extra) -> bytes:
    return json.dumps(
        {
            "id": id_,
            "uniqueValue": unique_value,
            "type": type_,
            "timestamp": t,
            **({"session": "s"} if type_ == "APP" else {}),
            **extra,
        }
    ).encode()


STATIC = (  # (original bytes, reason; None: an honest record, judged)
    (event("h1", "u1"), None),
    (event("h2", "u1", t=T + 1), None),  # a duplicate
    (event("f1", "far", t=253_402_300_799), "future"),
    (event("h3", "u2", t=T + 2), None),  # not late: the far-future record moved nothing
    (json.dumps({"id": "m1", "uniqueValue": "u3", "type": "APP", "timestamp": T}).encode(), "missing_field"),
    (b'{"id":"s1","uniqueValue":"\\ud800","type":"APP","session":"s","timestamp":1700000000}', "not_utf8"),
    (b'{"id":"s2","uniqueValue":"x","type":"APP","session":"\\udfff","timestamp":1700000000}', "not_utf8"),
    (b'{"id":"s3","uniqueValue":"\\ud83d\\ude00","type":"APP","session":"s","timestamp":1700000000}', None),
    (
        b'{"id":"n1","uniqueValue":"n","type":"APP","session":"s","timestamp":1700000000,"x":'
        + b"[" * 5000
        + b"]" * 5000
        + b"}",
        "not_json",
    ),
    (b"[" * 20_000, "not_json"),
    (event("c1", "a\u001fb", session="c"), None),  # composite keys that a plain separator confuses
    (event("c2", "a", session="b\u001fc"), None),
    (event("c3", "a\u001eb", session="c"), None),
    (b'{"id":"z1","uniqueValue":"nul\x00byte","type":"APP","session":"s","timestamp":1700000000}', "not_json"),
    (event("z2", "nul\u0000escaped"), None),
    (b"\xef\xbb\xbf" + event("b1", "bom"), "not_json"),
    (event("r1", "crlf") + b"\r", None),
    (b"\xc3\x28 not utf-8", "not_utf8"),
    (b"not json at all", "not_json"),
    (event("w1", "more") + b" x", "not_json"),  # more after the object: a JSON parser may stop at its end
    (event("w2", "two") + event("w3", "objects"), "not_json"),
    (b"42", "not_object"),
    (b"null", "not_object"),
    (b'{"id":"t1","uniqueValue":"t","type":"APP","session":"s","timestamp":1700000000.5}', "wrong_type"),
    (b'{"id":"t2","uniqueValue":"t","type":"APP","session":"s","timestamp":"1700000000"}', "wrong_type"),
    (b'{"id":"t3","uniqueValue":"t","type":"APP","session":"s","timestamp":false}', "wrong_type"),
    (b'{"id":"t4","uniqueValue":"t","type":"APP","session":"s","timestamp":-5}', "out_of_range"),
    (b'{"id":"t5","uniqueValue":"t","type":"APP","session":"s","timestamp":1700000000000}', "out_of_range"),
    (b'{"id":"t6","uniqueValue":"t","type":"APP","session":"s","timestamp":1e400}', "wrong_type"),
    (b'{"id":"e1","uniqueValue":"","type":"APP","session":"s","timestamp":1700000000}', "empty_field"),
    (b'{"id":"e2","uniqueValue":null,"type":"APP","session":"s","timestamp":1700000000}', "null_field"),
    (b'{"id":"e3","type":"APP","session":"s","timestamp":1700000000}', "missing_field"),
    (b'{"id":7,"uniqueValue":"w","type":"APP","session":"s","timestamp":1700000000}', "wrong_type"),
    (event("x1", "mobile", "MOBILE"), None),  # a type without a rule: passed through
    (event("w1", "web"), None),
    (event("w2", "web", "WEB", T + 5), None),
    (event("h4", "u1", t=T + 31), None),  # a window later: emitted again
    (
        b'{"id":"d1","uniqueValue":"dup","uniqueValue":"dup2","type":"APP","session":"s","timestamp":1700000000}',
        "not_json",
    ),  # first-wins and last-wins readers would key it differently
    (b'{"id":"d2","uniqueValue":"d","type":"APP","session":"s","session":"t","timestamp":1700000000}', "not_json"),
    (b'{"id":"d3","uniqueValue":"d","type":"APP","session":"s","timestamp":1700000000,"n":Infinity}', "not_json"),
    (b'{"id":"d4","uniqueValue":"d","type":"APP","session":NaN,"timestamp":1700000000}', "not_json"),
    (event("d5", "d", t=T + 31, session=" \u00a0"), None),  # a key field of whitespace is a value, not a missing field
    (event("y1", "typed", t=T + 31, session=1), None),  # a key field's type is part of its key:
    (event("y2", "typed", t=T + 31, session="1"), None),  # 1 and "1" are two keys,
    (event("y3", "typed", t=T + 31, session=True), None),  # true and "true" too
    (event("y4", "typed", t=T + 31, session="true"), None),
    (event("y5", "typed", t=T + 32, session=1), None),  # a duplicate of y1
    (event("y6", "typed", t=T + 31, session=1.5), "wrong_type"),  # numbers are spelled differently by
    (event("y7", "typed", t=T + 31, session=[]), "wrong_type"),  # each engine's JSON reader: refused
    (event("y8", "typed", t=T + 31, session={"a": 1}), "wrong_type"),
    (event("y9", "typed", t=T + 31, session=2**63), "wrong_type"),
)


AHEAD, FAST, HONEST_AHEAD = 295, 240, 200  # s past the clock: under max_ahead (300), apart by over APP's lateness
ON_TIME_BUDGET = HONEST_AHEAD + 30  # s after ``now`` the honest rows would really be late (APP's lateness 30 s)


def clock_rows(now: int) -> tuple:
    """Rows dated against the wall clock ``now``: one near-future record per key spread over
    the partitions, a producer four minutes fast, then honest records a little ahead of the clock."""
    ahead = tuple((event(f"a{i}", f"ahead{i}", t=now + AHEAD), None) for i in range(6))
    fast = tuple((event(f"k{i}", f"fast{i}", t=now + FAST + i), None) for i in range(6))
    honest = tuple((event(f"o{i}", f"ontime{i}", t=now + HONEST_AHEAD + i), None) for i in range(6))
    return ahead + fast + honest


def hostile(now: float | None = None) -> tuple:
    """The whole table, its clock-dated rows dated against ``now`` (the wall clock by default)."""
    return STATIC + clock_rows(int(time.time() if now is None else now))


def expected(table: tuple) -> tuple[list[bytes], dict[bytes, str]]:
    """The honest records emitted, and the bad ones' reasons, as the domain core judges them in order."""
    core = Deduplicator(RULES, InMemoryStateStore(), SystemClock())
    outcomes, counts = core.process([RawRecord(v, SourcePosition("t", 0, i)) for i, (v, _) in enumerate(table)])
    assert counts.balanced
    emitted = [o.record.value for o in outcomes if o.verdict is Verdict.EMIT]
    dead = {o.record.value: o.dead_letter.reason for o in outcomes if o.verdict is Verdict.DEAD_LETTER}
    return emitted, dead
