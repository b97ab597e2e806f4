"""The latency benchmark's pure logic (bench/latency_model.py) and its command line: a load
generator that holds its rate or says it did not, percentiles, the stream's verdicts checked
against the domain's own deduplicator, and the accounting of what came out."""

import json
from collections import Counter

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.memory import InMemoryStateStore
from adapters.testing import FakeClock
from bench import latency_bench
from bench.latency_model import (
    Drain,
    GeneratorBehind,
    LoadStream,
    Mix,
    Schedule,
    account,
    latencies,
    pace,
    partition_of,
    percentile,
    phase_of,
    summarize,
    timeline,
)
from domain import Deduplicator, RawRecord, RuleSet, SourcePosition, Verdict


class Sender:
    """``send`` for ``pace``: notes the clock at each send and spends ``cost`` seconds of it."""

    def __init__(self, clock: FakeClock, cost: float = 0.0):
        self.clock, self.cost, self.times = clock, cost, []

    def __call__(self) -> None:
        self.times.append(self.clock.now())
        self.clock.time += self.cost


# --- holding the rate ----------------------------------------------------------------------


def test_the_schedule_counts_the_records_due_and_how_late_the_first_unsent_one_is():
    schedule = Schedule(rate=100, start=10.0, total=50)
    assert [schedule.due(t) for t in (9.0, 10.0, 10.0099, 10.01, 10.5, 99.0)] == [0, 1, 1, 2, 50, 50]
    assert schedule.behind(10.05, sent=6) == 0.0  # records 0..5 due, all sent
    assert schedule.behind(10.05, sent=2) == pytest.approx(0.03)  # record 2 was due at 10.02


def test_a_sender_that_keeps_up_sends_every_record_in_the_tick_it_is_due_and_reaches_the_rate():
    clock = FakeClock(0.0)
    send = Sender(clock, cost=0.00001)
    done = pace(1000, 2.0, send, clock.now, clock.sleep, tick=0.005).check()
    assert done.sent == 2000 == len(send.times)
    assert all(i / 1000 - 1e-9 <= t < i / 1000 + 0.005 for i, t in enumerate(send.times))
    assert done.reached == pytest.approx(1000, rel=0.01)
    assert done.worst_behind <= 0.005


def test_sleeps_that_overshoot_do_not_add_up_on_an_absolute_schedule():
    clock = FakeClock(0.0)

    def oversleeping(seconds: float) -> None:
        clock.sleep(seconds + 0.003)

    done = pace(500, 10.0, Sender(clock), clock.now, oversleeping, tick=0.005).check()
    assert done.reached == pytest.approx(500, rel=0.01)
    assert done.worst_behind < 0.01


def test_a_sender_too_slow_for_the_rate_is_stopped_once_a_second_behind():
    clock = FakeClock(0.0)
    with pytest.raises(GeneratorBehind, match=r"fell 1\.0\d s behind its schedule of 1,000 events/s"):
        pace(1000, 30.0, Sender(clock, cost=0.0015), clock.now, clock.sleep)
    assert clock.now() < 4  # stopped at once, not at the end of the 30 s


def test_a_sender_slightly_too_slow_never_a_second_behind_fails_the_rate_check():
    clock = FakeClock(0.0)
    done = pace(100, 2.0, Sender(clock, cost=0.0105), clock.now, clock.sleep)
    assert done.worst_behind < 1.0
    assert done.reached == pytest.approx(100 / 1.05, rel=0.005)
    with pytest.raises(GeneratorBehind, match=r"reached 95 events/s of the 100 requested \(95\.\d% < 97%\)"):
        done.check(min_share=0.97)


# --- percentiles -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values, p, expected",
    [
        (list(range(1, 101)), 50, 50),
        (list(range(1, 101)), 90, 90),
        (list(range(1, 101)), 99, 99),
        (list(range(1, 101)), 99.9, 100),
        (list(range(1, 1001)), 99.9, 999),
        (list(range(1, 1001)), 100, 1000),
        ([7.5], 50, 7.5),
        ([1, 2], 50, 1),
        ([1, 2], 51, 2),
    ],
)
def test_percentiles_are_nearest_rank(values, p, expected):
    assert percentile(values, p) == expected


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.floats(0, 100, allow_nan=False), min_size=1, max_size=300), p=st.sampled_from([50, 90, 99, 99.9])
)
def test_percentiles_agree_with_numpys_inverted_cdf(values, p):
    assert percentile(sorted(values), p) == numpy.percentile(values, p, method="inverted_cdf")


def test_the_summary_sorts_its_input_and_has_no_figures_without_values():
    summary = summarize([0.3, 0.1, 0.2, 0.4])
    assert summary == {
        "count": 4,
        "mean": pytest.approx(0.25),
        "p50": 0.2,
        "p90": 0.4,
        "p99": 0.4,
        "p99.9": 0.4,
        "max": 0.4,
    }
    assert summarize([]) == {
        "count": 0,
        "mean": None,
        "p50": None,
        "p90": None,
        "p99": None,
        "p99.9": None,
        "max": None,
    }


# --- accounting ------------------------------------------------------------------------------


def test_missing_doubled_and_unexpected_are_counted_by_id():
    arrivals = {"a": [1.0], "b": [1.2, 1.5, 2.0], "d": [3.0], "e": [3.0, 3.1]}
    outcome = account({"a", "b", "c"}, arrivals)
    assert outcome.missing == ["c"]
    assert outcome.doubled == {"b": 3, "e": 2}  # a duplicate let through twice is doubled and unexpected
    assert outcome.unexpected == ["d", "e"]
    assert not outcome.exact
    assert account({"a"}, {"a": [1.0]}).exact


def test_a_latency_runs_from_the_send_to_the_first_arrival():
    sent = {"a": 10.0, "b": 10.5, "c": 11.0}
    assert latencies(sent, {"a": [10.25, 12.0], "b": [11.0]}, ["a", "b", "c"]) == [0.25, 0.5]


def test_the_drain_is_over_a_grace_after_everything_came_out_or_at_its_deadline():
    drain = Drain({"a", "b"}, dead_letters=1, deadline=100.0, grace=1.0)
    drain.seen("a")
    drain.seen("b")
    assert not drain.over(dead_letters_seen=0, now=10.0)  # a dead letter still to come
    assert not drain.over(dead_letters_seen=1, now=11.0)  # complete: one second of grace for copies
    assert drain.over(dead_letters_seen=1, now=12.0)
    assert Drain({"a"}, 0, deadline=100.0).over(0, now=100.0)


# --- the stream ----------------------------------------------------------------------------


def stream_of(seconds: float, rate: float, mix: Mix | None = None) -> tuple[LoadStream, list]:
    """Probes on every partition and type, then ``seconds`` of the mix at ``rate``; with send times."""
    stream, t0, sent = LoadStream("run1", partitions=4, mix=mix or Mix(), seed=3), 1_700_000_000.0, []
    for partition in range(4):
        for type_ in ("APP", "WEB"):
            sent.append((stream.probe(partition, type_, t0), t0))
    for i in range(int(seconds * rate)):
        now = t0 + 0.1 + i / rate
        sent.append((stream.next("measure", now), now))
    return stream, sent


def test_the_stream_has_the_mix_asked_for_each_record_keyed_on_its_partition():
    stream, sent = stream_of(60, 500)
    shares = {verdict: n / len(sent) for verdict, n in stream.verdicts.items()}
    assert shares["duplicate"] == pytest.approx(0.18, abs=0.01)
    assert shares["late"] == pytest.approx(0.005, abs=0.001)
    assert shares["not_json"] + shares["missing_field"] == pytest.approx(0.005, abs=0.001)
    for record, _ in sent:
        if record.key is not None:
            assert record.key == json.loads(record.value)["uniqueValue"].encode()
            assert record.partition == partition_of(record.key, 4)
    assert {phase_of(r.id) for r, _ in sent} == {"probe", "measure"}
    assert stream.expected == {r.id for r, _ in sent if r.verdict == "unique"}


def test_each_repeat_follows_its_first_occurrence_within_five_seconds_with_its_type():
    _stream, sent = stream_of(30, 200)
    first: dict[tuple[str, str], float] = {}
    for record, now in sent:
        event = json.loads(record.value) if record.verdict in ("unique", "duplicate") else None
        if record.verdict == "unique":
            first[event["type"], event["uniqueValue"]] = now
        elif record.verdict == "duplicate":
            assert 0 <= now - first[event["type"], event["uniqueValue"]] <= 5.0


@pytest.mark.parametrize("batch", [1, 37, 1000])
def test_the_verdicts_are_those_of_the_domains_deduplicator(batch):
    """The reference: the stream through ``domain._dedup`` with the default rules, each record at
    its partition's next offset, in send order, in batches of any size."""
    stream, sent = stream_of(40, 250)
    core = Deduplicator(RuleSet(), InMemoryStateStore(), FakeClock(sent[-1][1]))
    offsets: Counter = Counter()
    records = []
    for record, _ in sent:
        records.append(
            RawRecord(record.value, SourcePosition("in", record.partition, offsets[record.partition]), record.key)
        )
        offsets[record.partition] += 1
    emitted, dead = set(), Counter()
    for start in range(0, len(records), batch):
        for outcome in core.process(records[start : start + batch])[0]:
            if outcome.dead_letter is not None:
                dead[outcome.dead_letter.reason] += 1
            elif outcome.verdict is Verdict.EMIT:
                emitted.add(json.loads(outcome.record.value)["id"])
    assert emitted == stream.expected
    assert dead == stream.dead
    assert set(dead) == {"late", "not_json", "missing_field"}


# --- the command line ----------------------------------------------------------------------


def test_settings_are_given_to_the_engine_as_dedup_variables():
    assert latency_bench.setting("spark.trigger=200ms") == ("DEDUP_SPARK__TRIGGER", "200ms")
    assert latency_bench.setting("max_batch_delay=20ms") == ("DEDUP_MAX_BATCH_DELAY", "20ms")
    assert latency_bench.setting('spark.conf={"a.b": "1"}') == ("DEDUP_SPARK__CONF", '{"a.b": "1"}')


def test_every_combination_an_engine_runs_is_a_configuration_and_exactly_once_on_memory_is_skipped(capsys):
    args = latency_bench.parse_args(
        [
            "--engine",
            "kafka",
            "--delivery",
            "at-least-once,exactly-once",
            "--state",
            "memory,redis",
            "--rate",
            "100,200",
            "--rate",
            "5000",
        ]
    )
    assert len(args.configs) == 9
    assert {c.label for c in args.configs} >= {"kafka exactly-once redis 5000/s", "kafka at-least-once memory 100/s"}
    assert not any(c.delivery == "exactly-once" and c.state == "memory" for c in args.configs)
    assert "skipping kafka exactly-once memory" in capsys.readouterr().err
    spark = latency_bench.parse_args(["--engine", "spark"]).configs
    assert [c.label for c in spark] == ["spark at-least-once checkpoint 200/s"]


def test_exactly_once_on_memory_alone_is_refused(capsys):
    with pytest.raises(SystemExit):
        latency_bench.parse_args(["--engine", "kafka", "--delivery", "exactly-once", "--state", "memory"])
    assert "no configuration to run" in capsys.readouterr().err


def test_a_state_the_engine_does_not_have_is_refused(capsys):
    with pytest.raises(SystemExit):
        latency_bench.parse_args(["--engine", "kafka", "--state", "checkpoint"])
    assert "--state checkpoint is not a state of the kafka engine" in capsys.readouterr().err


def test_the_timeline_summarizes_each_five_seconds_of_sends():
    sent = {f"e{i}": 100.0 + i for i in range(12)}  # one a second from t=100
    arrivals = {f"e{i}": [100.0 + i + (0.1 if i < 5 else 0.5 + i / 100)] for i in range(12) if i != 7}
    buckets = timeline(sent, arrivals, sent)
    assert [(b["from_s"], b["count"]) for b in buckets] == [(0.0, 5), (5.0, 4), (10.0, 2)]
    assert buckets[0]["max"] == pytest.approx(0.1)
    assert buckets[2]["p50"] == pytest.approx(0.6)
    assert timeline(sent, {}, sent) == []
