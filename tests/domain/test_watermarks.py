"""Per-partition watermarks (domain._watermarks) and what they mean for lateness."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.memory import InMemoryStateStore
from adapters.testing import FakeClock, SharedStateStore
from domain import Deduplicator, DedupRule, RawRecord, RuleSet, SourcePosition, Verdict, Watermarks, clock_bound


def test_an_expected_partition_not_heard_from_holds_the_watermark_back_until_it_goes_idle():
    marks = Watermarks(idle_timeout=60)
    marks.expect(["t:0", "t:1"], now=0)
    marks.observe("APP", "t:0", 1000, now=50)
    assert marks.of("APP", now=50) is None
    assert marks.of("APP", now=60) == 1000  # t:1 idle since it was first expected


def test_the_watermark_is_the_minimum_over_partitions_and_never_goes_back():
    marks = Watermarks(idle_timeout=60)
    marks.expect(["t:0", "t:1"], now=0)
    marks.observe("APP", "t:0", 1000, now=0)
    marks.observe("APP", "t:1", 900, now=0)
    assert marks.of("APP", now=1) == 900
    marks.observe("APP", "t:1", 1100, now=2)
    assert marks.of("APP", now=2) == 1000
    marks.observe("APP", "t:0", 900, now=3)
    assert marks.of("APP", now=3) == 1000


def test_a_partition_gained_holds_the_watermark_back_and_may_take_it_back():
    marks = Watermarks(idle_timeout=60)
    marks.expect(["t:0", "t:1"], now=0)
    marks.observe("APP", "t:0", 5000, now=0)
    marks.observe("APP", "t:1", 5100, now=0)
    assert marks.of("APP", now=1) == 5000
    marks.expect(["t:0", "t:1", "t:2"], now=2)  # a rebalance brings t:2, read elsewhere up to 3000
    assert marks.of("APP", now=2) is None  # held back until it shows an event
    marks.observe("APP", "t:2", 3000, now=3)
    assert marks.of("APP", now=3) == 3000
    assert marks.horizon("APP", "t:2", 3000) == 3000  # its events are not late against t:0's time


def test_a_partition_revoked_and_given_back_starts_afresh():
    marks = Watermarks(idle_timeout=60)
    marks.expect(["t:0", "t:1"], now=0)
    marks.observe("APP", "t:0", 5000, now=0)
    marks.observe("APP", "t:1", 2000, now=0)
    marks.expect(["t:0"], now=1)
    assert marks.newest("APP", "t:1") is None
    marks.observe("APP", "t:0", 6000, now=200)
    marks.expect(["t:0", "t:1"], now=200)  # back after 200 s: not idle, not at its old time
    assert marks.of("APP", now=201) is None
    marks.observe("APP", "t:0", 6100, now=261)
    assert marks.of("APP", now=261) == 6100  # t:1 idle since it came back


def test_an_idle_partition_is_left_out_and_a_revoked_one_no_longer_counts():
    marks = Watermarks(idle_timeout=60)
    marks.expect(["t:0", "t:1"], now=0)
    marks.observe("APP", "t:0", 1000, now=0)
    marks.observe("APP", "t:1", 500, now=0)
    marks.observe("APP", "t:0", 2000, now=100)
    assert marks.of("APP", now=100) == 2000  # t:1 silent for 100 s
    marks.observe("APP", "t:1", 600, now=101)
    marks.expect(["t:0"], now=101)
    assert marks.of("APP", now=101) == 2000


def test_rules_have_their_own_watermarks():
    marks = Watermarks()
    marks.observe("APP", "t:0", 5000, now=0)
    marks.observe("WEB", "t:0", 100, now=0)
    assert (marks.of("APP", now=0), marks.of("WEB", now=0)) == (5000, 100)


def test_the_document_restores_the_watermarks():
    marks = Watermarks(idle_timeout=60)
    marks.expect(["t:0"], now=0)
    marks.observe("APP", "t:0", 1000, now=0)
    marks.of("APP", now=0)
    again = Watermarks.from_document(json.loads(json.dumps(marks.to_document())), idle_timeout=60)
    assert (again.of("APP", now=1), again.newest("APP", "t:0")) == (1000, 1000)


WINDOW, LATENESS = 10, 10


def _event(key: str, t: int) -> bytes:
    return json.dumps({"id": f"{key}@{t}", "uniqueValue": key, "type": "APP", "timestamp": t}).encode()


def _verdicts(core: Deduplicator, records: list[RawRecord], batch: int) -> dict[SourcePosition, str]:
    got = {}
    for start in range(0, len(records), batch):
        outcomes, counts = core.process(records[start : start + batch])
        assert counts.balanced
        for outcome in outcomes:
            got[outcome.record.position] = outcome.dead_letter.reason if outcome.dead_letter else outcome.verdict.value
    return got


KEYS = "abcdefgh"
ticks = st.lists(
    st.tuples(st.integers(0, 8), st.sets(st.sampled_from(KEYS)), st.sets(st.sampled_from(KEYS))), max_size=12
)


@settings(max_examples=200, deadline=None)
@given(stream=ticks, partitions=st.integers(1, 8), chunk=st.integers(1, 30), batch=st.integers(1, 50))
def test_verdicts_do_not_depend_on_partition_count_interleaving_or_batch_size(stream, partitions, chunk, batch):
    """A keyed stream as producers write it (every key, so every partition, has events all
    along), with disorder and records far behind: read in order from one partition, or
    spread by key over ``partitions`` read chunk after chunk as a Kafka consumer does,
    every record gets the same verdict."""
    t, events = 1000, []
    for tick, (step, behind, far_behind) in enumerate(stream):
        t += step
        for key in KEYS:
            events.append((key, t - step // 2 if key in behind else t))
            if key in far_behind and tick:
                events.append((key, t - 100))
    in_order = [RawRecord(_event(k, t), SourcePosition("one", 0, i)) for i, (k, t) in enumerate(events)]
    spread: dict[int, list[RawRecord]] = {}
    for i, (key, t) in enumerate(events):
        spread.setdefault(ord(key) % partitions, []).append(RawRecord(_event(key, t), SourcePosition("one", 0, i)))
    chunked = []
    while any(spread.values()):
        for part, records in sorted(spread.items()):
            chunked += [RawRecord(r.value, SourcePosition("many", part, r.position.offset)) for r in records[:chunk]]
            del records[:chunk]
    rules = RuleSet({"APP": DedupRule("APP", WINDOW, allowed_lateness=LATENESS)})
    reference = _verdicts(Deduplicator(rules, InMemoryStateStore(), FakeClock()), in_order, len(in_order) or 1)
    core = Deduplicator(rules, InMemoryStateStore(), FakeClock())
    core.expect([f"many:{p}" for p in range(partitions)])
    got = _verdicts(core, chunked, batch)
    assert {p.offset: v for p, v in got.items()} == {p.offset: v for p, v in reference.items()}


@settings(max_examples=200, deadline=None)
@given(
    stream=ticks,
    partitions=st.integers(2, 6),
    chunk=st.integers(1, 10),
    speeds=st.lists(st.integers(1, 4), min_size=2, max_size=3),
    moves=st.lists(st.tuples(st.integers(0, 12), st.integers(0, 5), st.integers(0, 2)), max_size=6),
)
def test_verdicts_do_not_depend_on_which_instance_reads_a_partition(stream, partitions, chunk, speeds, moves):
    """Instances of one group share one store, each with its own watermarks, reading at their
    own pace; rebalances move partitions between them (a partition resumes where its last
    reader stopped). Every record gets the verdict it gets read in order by one reader. No
    record is far behind: lateness is the one verdict that depends on a partition's past,
    which its new reader does not know (as after a restart)."""
    t, events = 1000, []
    for step, behind, _ in stream:
        t += step
        for key in KEYS:
            events.append((key, t - step // 2 if key in behind else t))
    rules = RuleSet({"APP": DedupRule("APP", WINDOW, allowed_lateness=LATENESS)})
    in_order = [RawRecord(_event(k, t), SourcePosition("one", 0, i)) for i, (k, t) in enumerate(events)]
    reference = _verdicts(Deduplicator(rules, InMemoryStateStore(), FakeClock()), in_order, len(in_order) or 1)
    queues: dict[int, list[RawRecord]] = {p: [] for p in range(partitions)}
    for i, (key, t) in enumerate(events):
        queues[ord(key) % partitions].append(
            RawRecord(_event(key, t), SourcePosition("many", ord(key) % partitions, i))
        )
    store = SharedStateStore()
    cores = [Deduplicator(rules, store, FakeClock()) for _ in speeds]
    owner = {p: p % len(cores) for p in range(partitions)}
    got, round_ = {}, 0
    while any(queues.values()):
        for when, partition, instance in moves:
            if when == round_ and partition < partitions:
                owner[partition] = instance % len(cores)
        for instance, (core, speed) in enumerate(zip(cores, speeds)):
            mine = sorted(p for p, o in owner.items() if o == instance)
            batch = []
            for partition in mine:
                batch += queues[partition][: chunk * speed]
                del queues[partition][: chunk * speed]
            core.expect([f"many:{p}" for p in mine])
            got.update(_verdicts(core, batch, len(batch) or 1))
        round_ += 1
    assert {p.offset: v for p, v in got.items()} == {p.offset: v for p, v in reference.items()}


def test_a_far_future_time_is_dead_lettered_and_moves_no_watermark():
    clock = FakeClock(1_700_000_000)
    core = Deduplicator(RuleSet({"APP": DedupRule("APP", 30)}), InMemoryStateStore(), clock)
    records = [
        RawRecord(_event(k, t), SourcePosition("t", 0, i))
        for i, (k, t) in enumerate(
            [("a", 1_700_000_000), ("b", 253_402_300_799), ("c", 1_700_000_001), ("d", 1_700_000_000 + 299)]
        )
    ]
    outcomes, counts = core.process(records)
    assert [o.dead_letter.reason if o.dead_letter else o.verdict for o in outcomes] == [
        Verdict.EMIT,
        "future",
        Verdict.EMIT,
        Verdict.EMIT,
    ]
    assert (counts.invalid, counts.late) == (1, 0)


def _judge(records: list[tuple[int, str, int]], clock: FakeClock, rules: RuleSet | None = None) -> list[str]:
    """Records ``(partition, key, t)`` judged in order with the wall clock standing still."""
    core = Deduplicator(rules or RuleSet(), InMemoryStateStore(), clock)
    raw = [
        RawRecord(
            json.dumps({"id": str(i), "uniqueValue": key, "type": "APP", "timestamp": t}).encode(),
            SourcePosition("t", partition, i),
        )
        for i, (partition, key, t) in enumerate(records)
    ]
    outcomes, counts = core.process(raw)
    assert counts.balanced
    return [o.dead_letter.reason if o.verdict is Verdict.DEAD_LETTER else o.verdict.value for o in outcomes]


def test_one_record_from_the_near_future_makes_no_on_time_event_of_its_partition_late():
    now = 1_800_000_000
    verdicts = _judge(
        [(0, "ahead", now + 290), (0, "a", now + 1), (0, "b", now + 2), (0, "c", now - 29)], FakeClock(now)
    )
    assert verdicts == ["emit", "emit", "emit", "emit"]
    assert _judge([(0, "ahead", now + 290), (0, "old", now - 31)], FakeClock(now))[1] == "late"


def test_a_producer_whose_clock_is_a_minute_fast_blinds_no_other_producer_of_its_partitions():
    now = 1_800_000_000
    fast = [(p, f"fast{p}-{i}", now + 60 + i) for i in range(3) for p in range(4)]
    honest = [(p, f"honest{p}-{i}", now + i) for i in range(3) for p in range(4)]
    assert set(_judge(fast + honest, FakeClock(now))) == {"emit"}


def test_a_record_from_the_future_does_not_make_the_state_forget_an_emission_early():
    now = 1_800_000_000
    clock = FakeClock(now)
    verdicts = _judge([(0, "k", now), (0, "ahead", now + 290), (0, "k", now + 20)], clock)
    assert verdicts == ["emit", "emit", "duplicate"]


def test_a_backlog_behind_the_clock_is_judged_by_its_own_times():
    now = 1_800_000_000
    verdicts = _judge(
        [(0, "a", now - 10_000), (0, "b", now - 10_000 - 31), (0, "c", now - 10_000 - 29)], FakeClock(now)
    )
    assert verdicts == ["emit", "late", "emit"]


class _Recomputed(Watermarks):
    """Watermarks that compute every answer afresh (the remembered one is dropped first)."""

    def of(self, rule, now):
        self._known.clear()
        return super().of(rule, now)


_steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("observe"),
            st.sampled_from(["APP", "WEB"]),
            st.sampled_from(["t:0", "t:1", "t:2"]),
            st.integers(min_value=0, max_value=40),
        ),
        st.tuples(st.just("of"), st.sampled_from(["APP", "WEB"])),
        st.tuples(st.just("tick"), st.sampled_from([0, 1, 30, 61])),
        st.tuples(st.just("expect"), st.sets(st.sampled_from(["t:0", "t:1", "t:2"]), min_size=1)),
    ),
    max_size=60,
)


def _step_both(step: tuple, one: Watermarks, other: Watermarks, now: float) -> float:
    """Apply a ``tick``, ``expect`` or ``observe`` step to both watermarks; the wall time after it."""
    if step[0] == "tick":
        return now + step[1]
    if step[0] == "expect":
        one.expect(step[1], now)
        other.expect(step[1], now)
    elif step[0] == "observe":
        one.observe(*step[1:], now)
        other.observe(*step[1:], now)
    return now


@settings(max_examples=400, deadline=None)
@given(_steps)
def test_a_remembered_watermark_is_the_one_computed_afresh(steps):
    fast, fresh, now = Watermarks(idle_timeout=60), _Recomputed(idle_timeout=60), 0.0
    for step in steps:
        now = _step_both(step, fast, fresh, now)
        assert fast.of("APP", now) == fresh.of("APP", now)
        assert fast.of("WEB", now) == fresh.of("WEB", now)


_judged_steps = st.lists(
    st.one_of(
        st.tuples(
            st.sampled_from(["observe", "judge"]),
            st.sampled_from(["APP", "WEB"]),
            st.sampled_from(["t:0", "t:1", "t:2"]),
            st.integers(min_value=0, max_value=40),
        ),
        st.tuples(st.just("tick"), st.sampled_from([0, 0.5, 1, 30, 61])),
        st.tuples(st.just("expect"), st.sets(st.sampled_from(["t:0", "t:1", "t:2"]), min_size=1)),
    ),
    max_size=60,
)


@settings(max_examples=400, deadline=None)
@given(_judged_steps, st.booleans())
def test_judge_answers_as_observe_then_the_clock_bound_watermark_and_horizon(steps, ask_between):
    """``judge`` (one call per record) gives what its three steps give one after the other."""
    one_call, three, now = Watermarks(idle_timeout=60), _Recomputed(idle_timeout=60), 0.0
    for step in steps:
        if step[0] != "judge":
            now = _step_both(step, one_call, three, now)
        else:
            rule, partition, t = step[1:]
            three.observe(rule, partition, t, now)
            mark = clock_bound(three.of(rule, now), now)
            assert one_call.judge(rule, partition, t, now) == (
                mark,
                clock_bound(three.horizon(rule, partition, mark), now),
            )
        if ask_between:
            assert one_call.of("APP", now) == three.of("APP", now)
    assert one_call.table(now) == three.table(now)


class _Recording(SharedStateStore):
    """A shared store that keeps every claim it was given."""

    def __init__(self):
        super().__init__()
        self.claims = []

    def check_and_set_many(self, claims):
        self.claims += claims
        return super().check_and_set_many(claims)


def test_a_batch_s_claims_carry_the_watermark_it_began_with_however_far_its_records_move_it():
    state = _Recording()
    core = Deduplicator(RuleSet(), state, FakeClock(1_800_000_000))

    def batch(times: list[int], first: int) -> list[RawRecord]:
        return [
            RawRecord(
                json.dumps(
                    {"id": str(first + i), "uniqueValue": f"u{first + i}", "type": "APP", "timestamp": t}
                ).encode(),
                SourcePosition("t", 0, first + i),
            )
            for i, t in enumerate(times)
        ]

    core.process(batch([1000, 1100, 1200], 0))
    core.process(batch([1300, 1400], 3))
    assert [(c.now, c.settled, c.sweeps_until()) for c in state.claims] == [
        (1000, 0, 0),
        (1100, 0, 0),
        (1200, 0, 0),
        (1300, 1200, 1200),
        (1400, 1200, 1200),
    ]
