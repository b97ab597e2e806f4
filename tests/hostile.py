"""Records as an attacker would send them, mixed with honest ones, under rules with a
composite key (APP: ``uniqueValue`` + ``session``).

Every engine, with either state store, must judge the honest records exactly as the domain
core reads them in order (``expected``) and dead-letter each bad record once, with its
original bytes and reason.
"""

from __future__ import annotations

import json

from adapters.memory.state_store import InMemoryStateStore
from adapters.system import SystemClock
from domain.dedup import Deduplicator, Verdict
from domain.events import RawRecord, SourcePosition
from domain.rules import DedupRule, RuleSet

T = 1_700_000_000
RULES = RuleSet({"APP": DedupRule("APP", 30, key_fields=("uniqueValue", "session")), "WEB": DedupRule("WEB", 600)})
ENV = {"DEDUP_RULES__APP__KEY_FIELDS": "uniqueValue,session"}


def event(id_: str, unique_value: str, type_: str = "APP", t: int = T, **extra) -> bytes:
    return json.dumps({"id": id_, "uniqueValue": unique_value, "type": type_, "timestamp": t,
                       **({"session": "s"} if type_ == "APP" else {}), **extra}).encode()


HOSTILE = (  # (original bytes, reason; None: an honest record, judged)
    (event("h1", "u1"), None),
    (event("h2", "u1", t=T + 1), None),  # a duplicate
    (event("f1", "far", t=253_402_300_799), "future"),
    (event("h3", "u2", t=T + 2), None),  # not late: the far-future record moved nothing
    (json.dumps({"id": "m1", "uniqueValue": "u3", "type": "APP", "timestamp": T}).encode(), "missing_field"),
    (b'{"id":"s1","uniqueValue":"\\ud800","type":"APP","session":"s","timestamp":1700000000}', "not_utf8"),
    (b'{"id":"s2","uniqueValue":"x","type":"APP","session":"\\udfff","timestamp":1700000000}', "not_utf8"),
    (b'{"id":"s3","uniqueValue":"\\ud83d\\ude00","type":"APP","session":"s","timestamp":1700000000}', None),
    (b'{"id":"n1","uniqueValue":"n","type":"APP","session":"s","timestamp":1700000000,"x":'
     + b"[" * 5000 + b"]" * 5000 + b"}", "not_json"),
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
)


def expected() -> tuple[list[bytes], dict[bytes, str]]:
    """The honest records emitted, and the bad ones' reasons, as the domain core judges them in order."""
    core = Deduplicator(RULES, InMemoryStateStore(), SystemClock())
    outcomes, counts = core.process([RawRecord(v, SourcePosition("t", 0, i)) for i, (v, _) in enumerate(HOSTILE)])
    assert counts.balanced
    emitted = [o.record.value for o in outcomes if o.verdict is Verdict.EMIT]
    dead = {o.record.value: o.dead_letter.reason for o in outcomes if o.verdict is Verdict.DEAD_LETTER}
    return emitted, dead
