"""Redis as the state of the kafka engine, when things go wrong: replays, outages, give-ups."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from adapters import SystemClock
from adapters.kafka import build_kafka_engine
from adapters.redis import RedisStateStore
from app import StreamSpec, generate
from deploy.local.services import find_free_port
from domain import Deduplicator, Policies, PolicyExhausted, RawRecord, RuleSet, SourcePosition, Verdict
from tests.support.faults.injection import run_through_outage
from tests.support.kafka_io import committed_offsets, create_topics, produce, read_topic, unique
from tests.support.streams import reference

pytestmark = pytest.mark.redis


class RecordingClock(SystemClock):
    """The real clock, remembering every sleep the retry policy asked for."""

    def __init__(self):
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        super().sleep(seconds)


def judge(redis_url: str, prefix: str, records: list[RawRecord], batch_size: int) -> list[Verdict]:
    """Verdicts from a freshly started core (new watermarks) over the Redis state under ``prefix``."""
    state = RedisStateStore(redis_url, key_prefix=prefix)
    core = Deduplicator(RuleSet(), state, SystemClock())
    verdicts = []
    for start in range(0, len(records), batch_size):
        outcomes, _ = core.process(records[start : start + batch_size])
        verdicts += [o.verdict for o in outcomes]
    state.close()
    return verdicts


def test_a_batch_replayed_after_a_crash_gets_the_verdicts_of_a_run_without_one_other_positions_are_duplicates(
    redis_url,
):
    """The crash hits a batch after Redis applied its claims, before its offsets were committed;
    the restarted engine (a new watermark) resumes at the batch's start. Redis forgets keys as
    event time passes them, but only up to the watermark its batch began with, so the replay
    finds every emission the first attempt found."""
    values, _ = generate(StreamSpec(uniques=3000, late=0, seed=9))
    records = [RawRecord(v, SourcePosition("events", 0, i)) for i, v in enumerate(values)]
    straight = judge(redis_url, f"{unique('straight')}:", records, batch_size=1000)
    prefix, resume, crash = f"{unique('replay')}:", 1000, 2000
    judge(redis_url, prefix, records[:crash], batch_size=1000)  # the batch [1000, 2000) applied, not committed
    # the same bytes at other positions are genuine duplicates of what was emitted
    moved = [RawRecord(r.value, SourcePosition("events", 1, r.position.offset)) for r in records[resume:crash]]
    elsewhere = judge(redis_url, prefix, moved, batch_size=170)
    # the restart, with other batch boundaries: the verdicts of a run that never crashed
    assert judge(redis_url, prefix, records[resume:], batch_size=170) == straight[resume:]
    once = once_seen_rule_events(values)
    checked = [(a, b) for r, a, b in zip(records[resume:], straight[resume:], elsewhere) if r.value in once]
    assert len(checked) > 100
    assert {(a, b) for a, b in checked} == {(Verdict.EMIT, Verdict.DUPLICATE)}


def once_seen_rule_events(values: list[bytes]) -> set[bytes]:
    """Events of a type with a rule whose uniqueValue occurs once in the stream."""
    events = []
    for value in values:
        try:
            events.append((value, json.loads(value)))
        except ValueError:
            continue
    keyed = [(v, e) for v, e in events if isinstance(e, dict) and e.get("type") in ("APP", "WEB")]
    counts = Counter(e.get("uniqueValue") for _, e in keyed)
    return {v for v, e in keyed if counts[e.get("uniqueValue")] == 1}


@pytest.fixture
def topics(kafka_bootstrap):
    names = {role: unique(role) for role in ("in", "out", "dlq")}
    create_topics(kafka_bootstrap, *names.values())
    return names


def engine_over(kafka_bootstrap, topics, state, clock, transient_policy: str, batch_size: int = 200):
    core = Deduplicator(RuleSet(), state, clock, Policies.from_strings({"transient": transient_policy}))
    return build_kafka_engine(
        core,
        f"kafka://{kafka_bootstrap}/{topics['in']}?group=g",
        f"kafka://{kafka_bootstrap}/{topics['out']}",
        f"kafka://{kafka_bootstrap}/{topics['dlq']}",
        batch_size=batch_size,
        stop_at_end=True,
    )


@pytest.mark.kafka
def test_redis_stopped_mid_run_is_retried_and_nothing_is_lost(kafka_bootstrap, topics, own_redis):
    records, expected = generate(StreamSpec(uniques=4000, seed=3))
    produce(kafka_bootstrap, topics["in"], records)
    clock = RecordingClock()
    state = RedisStateStore(own_redis.url, connect_timeout=0.5, socket_timeout=1)
    engine = engine_over(kafka_bootstrap, topics, state, clock, "retry(attempts=150,backoff=fixed,delay=0.1)>fail")
    # 1. Redis goes away between two batches (after the third), for two seconds
    # 2. it comes back on the same port with its data (append-only file)
    totals = run_through_outage(engine, own_redis, after_records=600, timeout=120)
    # 3. the engine retried through the outage and finished with every verdict right
    assert len(clock.sleeps) >= 5
    counts = totals.as_dict()
    assert {name: counts[name] for name in expected.as_accounting()} == expected.as_accounting()
    assert [m.value for m in read_topic(kafka_bootstrap, topics["out"])] == reference(records).emitted
    state.close()


@pytest.mark.kafka
def test_when_retries_run_out_the_engine_stops_clearly_and_acknowledges_nothing(kafka_bootstrap, topics):
    produce(kafka_bootstrap, topics["in"], generate(StreamSpec(uniques=100))[0])
    port = find_free_port()  # nothing listens there
    state = RedisStateStore(f"redis://127.0.0.1:{port}/0", connect_timeout=0.5)
    engine = engine_over(
        kafka_bootstrap, topics, state, SystemClock(), "retry(attempts=2,backoff=fixed,delay=0.05)>fail"
    )

    with pytest.raises(PolicyExhausted) as error:
        engine.run()

    assert str(error.value).startswith(f"redis unreachable at redis://127.0.0.1:{port}/0")
    assert str(error.value).endswith("(after 3 attempts)")
    assert committed_offsets(kafka_bootstrap, "g", topics["in"])[0] < 0
    assert read_topic(kafka_bootstrap, topics["out"]) == []
