"""The Spark engine against the domain's semantics (domain/_rules.py), over JSONL files.

The golden scenario tables of tests/support/scenarios.py run here as through every engine, all in one
query, each scenario under types of its own; each scenario's events are cut into micro-batches
before each ``late`` step (a record becomes late only against an earlier micro-batch: deviation
1 of docs/design/spark.md). The other
deviations are pinned by the tests named ``test_deviation_*``, each checked against the
in-memory core as the reference model.
"""

from __future__ import annotations

import json
import os

import pytest

from adapters import InMemoryMetrics, SystemClock
from adapters.memory import InMemoryStateStore
from adapters.spark.checkpoint import read_state
from adapters.spark.runtime import TRACK_ROWS
from adapters.spark.shared import SparkSetupError
from domain import Deduplicator, DedupRule, RawRecord, RuleSet, SourcePosition, UnknownTypePolicy, Verdict, decode_key
from tests.adapters.spark.conftest import FileRun
from tests.support.scenarios import INVALID_RECORDS, SCENARIOS, Scenario, Step

pytestmark = pytest.mark.spark

T = 1_700_000_000
EMIT, DUP = "emit", "duplicate"


def event(id_, key, type_, t, **extra):
    return {"id": id_, "uniqueValue": key, "type": type_, "timestamp": T + t, **extra}


def micro_batches(scenario: Scenario) -> list[list[bytes]]:
    batches: list[list[bytes]] = [[]]
    for step, record in zip(scenario.steps, scenario.records()):
        if step.verdict == "late" and batches[-1]:
            batches.append([])
        batches[-1].append(record)
    return batches


def rules_of(scenario: Scenario) -> RuleSet:
    return RuleSet({t: DedupRule(t, w, allowed_lateness=scenario.lateness) for t, w in scenario.windows})


def scoped(scenario: Scenario, n: int) -> tuple[list[list[bytes]], RuleSet]:
    """The scenario's micro-batches and rules with its types renamed ``TYPE_s<n>`` and its ids ``s<n>-e<i>``."""
    steps = [Step(f"{step.type}_s{n}", step.key, step.t, step.verdict) for step in scenario.steps]
    renamed = Scenario(
        scenario.name, tuple(steps), tuple((f"{t}_s{n}", w) for t, w in scenario.windows), scenario.lateness
    )
    ids = {
        record: json.dumps({**json.loads(record), "id": f"s{n}-e{i}"}).encode()
        for i, record in enumerate(renamed.records())
    }
    return [[ids[record] for record in batch] for batch in micro_batches(renamed)], rules_of(renamed)


def test_every_scenario_in_one_stream(files):
    """The golden scenarios at once, in one query: each under types of its own, so its rules and
    their watermarks are its own; micro-batch k holds every scenario's k-th. Verdicts as alone,
    and each duplicate's report names the record of the step it repeats."""
    runs = [scoped(scenario, n) for n, scenario in enumerate(SCENARIOS)]
    for k in range(max(len(batches) for batches, _ in runs)):
        files.add(*[record for batches, _ in runs if k < len(batches) for record in batches[k]])
    result = files.run(RuleSet({t: rule for _, rules in runs for t, rule in rules.rules.items()}))
    emitted, reasons = {e["id"] for e in result.out}, result.reasons()
    for _n, (scenario, (batches, _)) in enumerate(zip(SCENARIOS, runs)):
        records = sorted((r for batch in batches for r in batch), key=lambda r: int(json.loads(r)["id"].split("e")[-1]))
        labels = ["emit" if json.loads(r)["id"] in emitted else reasons.get(r, "dup") for r in records]
        assert labels == scenario.expected(), scenario.name
        step = {r: int(json.loads(r)["id"].split("e")[-1]) for r in records}
        assert {
            step[d.record.value]: step[files.line_of(d.first.source, d.first.offset)]
            for d in result.duplicates
            if d.record.value in step
        } == scenario.expected_repeats(), scenario.name
    assert len(result.duplicates) == result.counts["duplicates"]
    assert result.counts["in"] == result.counts["out"] + result.counts["duplicates"] + result.counts["dead_lettered"]


def reference_verdicts(events, rules: RuleSet) -> dict[str, str]:
    core = Deduplicator(rules, InMemoryStateStore(), SystemClock())
    records = [RawRecord(json.dumps(e).encode(), SourcePosition("ref", 0, i)) for i, e in enumerate(events)]
    outcomes, _ = core.process(records)
    return {
        e["id"]: {Verdict.EMIT: EMIT, Verdict.DUPLICATE: DUP}.get(o.verdict, o.verdict.value)
        for e, o in zip(events, outcomes)
    }


def test_invalid_records_are_dead_lettered_with_their_bytes_and_reason(files):
    # blank lines (also Unicode and \x1c-\x1f blanks) are framing, not records; a lone \r ends a line
    # (the memory engine's file source agrees: tests/adapters/files/test_sources_jsonl.py)
    files.add(
        *[raw for raw, _ in INVALID_RECORDS], b"", b"   ", b"\x1f", "\u00a0\u3000".encode(), b"not json A\rnot json B"
    )
    result = files.run()
    invalid = dict(INVALID_RECORDS) | {b"not json A": "not_json", b"not json B": "not_json"}
    assert result.reasons() == invalid
    assert len(result.dead_letters) == len(invalid)
    assert result.counts["in"] == result.counts["dead_lettered"] == result.counts["invalid"] == len(invalid)
    assert result.out == []


def test_unknown_type_is_dead_lettered_when_configured(files):
    files.add(event("u1", "u", "OTHER", 0), event("u2", "u", "APP", 0))
    result = files.run(RuleSet(unknown_types=UnknownTypePolicy.DEAD_LETTER))
    assert result.out_ids == ["u2"]
    assert [d["reason"] for d in result.dead_letters] == ["unknown_type"]


def test_a_static_spark_setting_is_kept_when_the_session_has_it_and_refused_when_not(files, spark):
    """``spark.conf`` may hold static SQL settings (fixed when a session starts): one the running
    session has passes; another value stops the engine before any work, naming the setting."""
    key = "spark.sql.ui.retainedExecutions"
    files.add(event("s1", "s", "APP", 0), event("s2", "s", "APP", 1))
    with pytest.raises(SparkSetupError, match=rf"spark\.conf: {key}='7' is a static Spark setting"):
        files.run(conf={key: "7"})
    assert not (files.dir / "out").exists() or not any((files.dir / "out").iterdir())
    result = files.run(conf={key: spark.conf.get(key)})
    assert result.out_ids == ["s1"]


def test_window_holds_across_micro_batches(files):
    # APP times trail the WEB times by less than APP's lateness (the watermark is shared)
    files.add(event("x1", "x", "APP", 570), event("y1", "y", "WEB", 0))
    files.add(event("x2", "x", "APP", 599), event("y2", "y", "WEB", 599))
    files.add(event("x3", "x", "APP", 600), event("y3", "y", "WEB", 600))
    result = files.run()
    assert result.out_ids == ["x1", "x3", "y1", "y3"]
    assert result.counts["duplicates"] == 2


def test_late_event_is_dead_lettered_not_dropped(files):
    files.add(event("l1", "l", "APP", 1000))
    # watermark 1000, APP lateness 30: 969 is late, 970 is judged (and is a new key here)
    files.add(event("l2", "m", "APP", 969), event("l3", "n", "APP", 970))
    result = files.run()
    assert result.out_ids == ["l1", "l3"]
    assert [d["reason"] for d in result.dead_letters] == ["late"]
    assert result.counts["late"] == 1 and result.counts["dead_lettered"] == 1


def test_restart_continues_from_the_checkpoint(files):
    files.add(event("r1", "r", "APP", 0))
    first = files.run()
    files.add(event("r2", "r", "APP", 10), event("r3", "r", "APP", 40))
    second = files.run()
    assert first.counts["in"] == 1 and second.counts["in"] == 2  # each run counts only its batches
    assert second.out_ids == ["r1", "r3"]


def test_the_state_rows_gauge_counts_keys_with_and_without_rocksdb_row_tracking(files, tmp_path):
    """The gauge counts keys whether RocksDB counts its rows (tracked: they include the operator's
    expiry queues) or not (the default), removals included, and a restart goes on from the
    count the checkpoint kept."""
    batches = [
        [event("s1", "s", "APP", 0), event("u1", "u", "WEB", 0)],
        [event("x1", "x", "APP", 1000)],
        [event("s2", "s", "APP", 0)],
    ]  # late after x1: s's emission has expired, the key is removed
    (tmp_path / "tracked").mkdir()
    tracked_files = FileRun(files.spark, tmp_path / "tracked")
    for batch in batches:
        files.add(*batch)
        tracked_files.add(*batch)
    tracked, counted = InMemoryMetrics(), InMemoryMetrics()
    try:
        first = tracked_files.run(metrics=tracked, conf={TRACK_ROWS: "true"})
    finally:
        files.spark.conf.unset(TRACK_ROWS)  # the session is shared by the whole test session
    second = files.run(metrics=counted)
    assert first.out_ids == second.out_ids == ["s1", "u1", "x1"]
    assert tracked.gauges["state_rows"] == counted.gauges["state_rows"] == 2  # WEB:u and APP:x
    files.add(event("v1", "v", "WEB", 1000))
    restarted = InMemoryMetrics()
    assert files.run(metrics=restarted).out_ids == ["s1", "u1", "v1", "x1"]
    assert restarted.gauges["state_rows"] == 3


def test_a_backlog_forgets_keys_as_event_time_passes_them_not_the_wall_clock(files, spark):
    """Issue 53: expiry followed the wall clock (a processing-time timeout of the longest
    retention), so a backlog kept every key until 20 minutes of wall time had passed. Each key is
    now woken (its expiry queue's timer) once the event-time watermark passes its emissions' expiry: read or not,
    the keys of a backlog go as its event time moves on, within one run of a few seconds."""
    files.add(event("a1", "a", "APP", 0), event("b1", "b", "APP", 0), event("w1", "w", "WEB", 0))
    files.add(event("c1", "c", "APP", 100))
    files.add(event("d1", "d", "APP", 2000), event("e1", "e", "WEB", 2000))
    files.add(event("f1", "f", "APP", 2001))
    metrics = InMemoryMetrics()
    result = files.run(metrics=metrics)
    assert result.out_ids == ["a1", "b1", "c1", "d1", "e1", "f1", "w1"]
    assert metrics.gauges["state_rows"] == 3
    assert metrics.counters["state_keys_removed"] == 4  # a, b, c and w: expired, none of them read again
    kept = {row["key"] for row in read_state(spark, str(files.dir / "checkpoint")).collect()}
    assert {decode_key(k)[1] for k in kept} == {("d",), ("e",), ("f",)}


def test_a_key_woken_at_an_expiry_it_has_moved_past_stays_and_goes_once_at_its_new_one(files):
    """A key is listed in the expiry queue of its newest emission's expiry and keeps no other
    entry up to date: a newer emission lists it again later and leaves the earlier entry. When
    the earlier queue comes due (x1, y1 move Spark's watermark past a1's expiry) the key stays:
    a3 repeats a2. It goes when its own expiry passes (z1), counted once. The same for 100 keys
    more (k0…k99): a moment's log is cut in lists by key (state format 7), and a key whose leaving
    were read before its joining (another list, read first) would be removed unread, its repeat let through."""
    many = [f"k{i}" for i in range(100)]
    files.add(event("a1", "a", "APP", 0), *[event(f"{k}-1", k, "APP", 0) for k in many])
    # 40 s after a1: emitted, its expiry moves on by 40 s
    files.add(event("a2", "a", "APP", 40), *[event(f"{k}-2", k, "APP", 40) for k in many])
    files.add(event("x1", "x", "APP", 61))
    files.add(event("y1", "y", "APP", 62))  # Spark's watermark is past a1's expiry (60) in this batch
    files.add(event("a3", "a", "APP", 65), *[event(f"{k}-3", k, "APP", 65) for k in many])  # duplicates of a2's
    files.add(event("z1", "z", "APP", 200))
    files.add(event("q1", "q", "APP", 201))  # a, x and y have expired in this batch
    metrics = InMemoryMetrics()
    result = files.run(metrics=metrics)
    assert result.out_ids == sorted(["a1", "a2", "q1", "x1", "y1", "z1", *[f"{k}-{n}" for k in many for n in (1, 2)]])
    assert sorted((json.loads(d.record.value)["id"], d.first_time) for d in result.duplicates) == sorted(
        [("a3", T + 40), *[(f"{k}-3", T + 40) for k in many]]
    )
    assert metrics.counters["state_keys_removed"] == 103  # a and k0…k99 once, x and y
    assert metrics.gauges["state_rows"] == 2  # z and q


def test_lateness_is_judged_record_by_record_inside_a_micro_batch(files):
    """Once deviation 1: the watermark was fixed for a micro-batch, so in one batch [1000, 900]
    900 was judged instead of late. Now each row's horizon includes the newest time its
    input partition showed earlier in the batch (RunningNewest), as the domain's does."""
    files.add(event("p1", "p", "APP", 1000), event("p2", "p2", "APP", 900))
    result = files.run()
    assert result.out_ids == ["p1"] and [d["reason"] for d in result.dead_letters] == ["late"]
    rules = RuleSet()
    assert (
        reference_verdicts([event("p1", "p", "APP", 1000), event("p2", "p2", "APP", 900)], rules)["p2"] == "dead-letter"
    )


@pytest.mark.parametrize("store", ["checkpoint", pytest.param("redis", marks=pytest.mark.redis)])
def test_files_read_in_one_micro_batch_arrive_in_the_order_the_file_source_takes_them(spark, tmp_path, store, request):
    """Once deviation 3: the files of one micro-batch interleaved by byte position (a key's
    copy at the top of a newer file beat its first copy deep in an older one), and small files
    packed into one partition were read largest first (an older file's records were late
    against a newer one's times). Arrival order is now Spark's file source's own: modification
    time, then path, then line; with the state in the checkpoint or in Redis."""
    files = FileRun(spark, tmp_path, files_per_batch=None)
    oldest = files.input / "zz-oldest.jsonl"
    oldest.write_bytes(
        b"".join(json.dumps(event(f"z{i}", f"z{i}", "APP", 0)).encode() + b"\n" for i in range(5))
        + json.dumps(event("m-old", "m", "APP", 1)).encode()
        + b"\n"
    )
    os.utime(oldest, (999_000, 999_000))
    files.add(*[event(f"a{i}", f"a{i}", "APP", i % 20) for i in range(300)], event("first", "k", "APP", 20))
    files.add(
        event("second", "k", "APP", 21),
        event("m-new", "m", "APP", 22),
        event("jump", "j", "APP", 1000),
        *[event(f"b{i}", f"b{i}", "APP", 1000 + i % 20) for i in range(400)],
    )
    packed = {"spark.sql.files.openCostInBytes": "0", "spark.sql.files.minPartitionNum": "1"}  # one partition
    try:
        state = {"state": request.getfixturevalue("own_redis").url} if store == "redis" else {}
        result = files.run(conf=packed, **state)
    finally:
        for name in packed:
            spark.conf.unset(name)
    assert len(list((tmp_path / "out").glob("batch=*"))) == 1
    assert result.dead_letters == []
    assert {"first", "m-old"} <= set(result.out_ids) and not {"second", "m-new"} & set(result.out_ids)
    assert sorted(
        (json.loads(d.record.value)["id"], json.loads(files.line_of(d.first.source, d.first.offset))["id"])
        for d in result.duplicates
    ) == [("m-new", "m-old"), ("second", "first")]
    assert (result.counts["in"], result.counts["out"]) == (710, 708)


def test_each_rule_has_its_own_watermark_and_a_future_record_moves_none(files):
    """Once deviation 2 (one Spark watermark for all rules): a WEB event 601 s behind the APP
    stream was late, and one far-future record made every type late for good."""
    files.add(event("s1", "s", "APP", 10_000), event("f1", "f", "APP", 253_402_300_799 - T))
    files.add(
        event("s2", "s", "WEB", 10_000 - 601), event("s3", "s3", "WEB", 10_000 - 600), event("s4", "s4", "APP", 10_001)
    )
    result = files.run()
    assert result.out_ids == ["s1", "s2", "s3", "s4"]
    assert [d["reason"] for d in result.dead_letters] == ["future"]


def test_key_fields_from_the_rules_scope_the_key(files):
    rules = RuleSet({"APP": DedupRule("APP", 30, key_fields=("uniqueValue", "tenant"))})
    files.add(
        event("k1", "k", "APP", 0, tenant="t1"),
        event("k2", "k", "APP", 1, tenant="t2"),
        event("k3", "k", "APP", 2, tenant="t1"),
        event("k4", "k", "APP", 3),
    )
    result = files.run(rules)
    assert result.out_ids == ["k1", "k2"]
    assert [d["reason"] for d in result.dead_letters] == ["missing_field"]
