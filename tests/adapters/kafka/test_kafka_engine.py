"""The kafka engine end to end through a real broker: outputs read back as downstream sees them."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter

import pytest

from adapters import InMemoryMetrics, SystemClock
from adapters.kafka import KafkaConfigurationError, build_kafka_engine
from adapters.memory import InMemoryStateStore
from adapters.redis import RedisStateStore
from app import StreamSpec, generate
from deploy.local import services
from domain import Deduplicator, Original, RuleSet, SinkUnavailable, SourceUnavailable, parse_event
from domain import duplicates as duplicate_codec
from tests.support.kafka_io import committed_offsets, create_topics, produce, read_topic, unique
from tests.support.streams import golden_stream, reference, unique_value

pytestmark = pytest.mark.kafka


@pytest.fixture
def topics(kafka_bootstrap):
    """Fresh input, output and dead-letter topics (one partition: the stream order is the verdict order)."""
    names = {role: unique(role) for role in ("in", "out", "dlq")}
    create_topics(kafka_bootstrap, *names.values())
    return names


def uris(bootstrap: str, topics: dict, group: str) -> tuple[str, str, str]:
    return (
        f"kafka://{bootstrap}/{topics['in']}?group={group}",
        f"kafka://{bootstrap}/{topics['out']}",
        f"kafka://{bootstrap}/{topics['dlq']}",
    )


def kafka_engine(bootstrap, topics, state=None, group="dedup", **options):
    core = Deduplicator(RuleSet(), state or InMemoryStateStore(), SystemClock())
    options.setdefault("stop_at_end", True)
    return build_kafka_engine(
        core, *uris(bootstrap, topics, group), batch_size=options.pop("batch_size", 100), **options
    )


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_golden_stream_gives_exactly_the_expected_events_and_dead_letters(kafka_bootstrap, topics, exactly_once):
    rows = golden_stream()
    produce(kafka_bootstrap, topics["in"], [r.value for r in rows])
    duplicates = unique("dups")
    create_topics(kafka_bootstrap, duplicates)

    totals = kafka_engine(
        kafka_bootstrap, topics, exactly_once=exactly_once, duplicates_uri=f"kafka://{kafka_bootstrap}/{duplicates}"
    ).run()

    # events: exactly the emitted rows, in stream order, keyed by uniqueValue
    out = read_topic(kafka_bootstrap, topics["out"])
    assert [m.value for m in out] == [r.value for r in rows if r.verdict == "emit"]
    assert [m.key for m in out] == [unique_value(m.value) for m in out]
    # dead letters: the original bytes, with reason and source position in headers
    dead = read_topic(kafka_bootstrap, topics["dlq"])
    expected_dead = [(i, r) for i, r in enumerate(rows) if r.dead_lettered]
    assert [m.value for m in dead] == [r.value for _, r in expected_dead]
    assert [m.headers["dedup.reason"] for m in dead] == [r.verdict for _, r in expected_dead]
    assert [int(m.headers["dedup.source.offset"]) for m in dead] == [i for i, _ in expected_dead]
    assert {
        (
            m.headers["dedup.source.topic"],
            m.headers["dedup.source.partition"],
            m.headers["dedup.attempts"],
            m.headers["dedup.error_class"],
        )
        for m in dead
    } == {(topics["in"], "0", "1", "invalid")}
    assert all(m.headers["dedup.error"] and float(m.headers["dedup.time"]) > 0 for m in dead)
    # accounting, and the input acknowledged up to its end
    verdicts = Counter("dead" if r.dead_lettered else r.verdict for r in rows)
    assert (totals.records_in, totals.out, totals.duplicates, totals.dead_lettered) == (
        len(rows),
        verdicts["emit"],
        verdicts["dup"],
        verdicts["dead"],
    )
    assert totals.late == sum(r.verdict == "late" for r in rows) and totals.balanced
    assert committed_offsets(kafka_bootstrap, "dedup", topics["in"]) == [len(rows)]
    # duplicate reports: each duplicate once, its bytes and key, and the offset of the first copy it repeats
    reports = [
        duplicate_codec.from_headers(m.value, m.key, m.raw_headers) for m in read_topic(kafka_bootstrap, duplicates)
    ]
    assert [(r.record.position.offset, r.first.offset) for r in reports] == [
        (i, r.repeats) for i, r in enumerate(rows) if r.verdict == "dup"
    ]
    assert [(r.record.value, r.record.key) for r in reports] == [
        (r.value, None) for r in rows if r.verdict == "dup"
    ]  # produced without a key
    assert {(r.record.position.source, r.first.source, r.first.partition) for r in reports} == {
        (topics["in"], topics["in"], 0)
    }
    assert all(0 <= r.apart < r.window for r in reports)


def test_a_duplicate_larger_than_the_reports_topic_takes_is_reported_cut_naming_its_original(kafka_bootstrap, topics):
    first = json.dumps(
        {"id": "e1", "uniqueValue": "k", "type": "APP", "timestamp": 1_689_019_596, "pad": "x" * 6000}
    ).encode()
    repeat = first.replace(b'"e1"', b'"e2"')
    produce(kafka_bootstrap, topics["in"], [first, repeat])
    duplicates = unique("dups")
    services.create_topics(kafka_bootstrap, duplicates, config={"max.message.bytes": "3000"}, exists_ok=False)

    totals = kafka_engine(kafka_bootstrap, topics, duplicates_uri=f"kafka://{kafka_bootstrap}/{duplicates}").run()

    assert (totals.out, totals.duplicates) == (1, 1)
    [message] = read_topic(kafka_bootstrap, duplicates)
    report = duplicate_codec.from_headers(message.value, message.key, message.raw_headers)
    assert len(message.value) < 3000 and repeat.startswith(message.value)
    assert report.original == Original.of(repeat) and report.first.offset == 0


@pytest.mark.redis
def test_generated_backlog_with_redis_state_matches_its_expected_counts_and_reports(kafka_bootstrap, topics, redis_url):
    records, expected = generate(StreamSpec(uniques=5000, seed=11))
    produce(kafka_bootstrap, topics["in"], records)
    state = RedisStateStore(redis_url, key_prefix=f"{unique('e2e')}:")
    duplicates = unique("dups")
    create_topics(kafka_bootstrap, duplicates)

    totals = kafka_engine(
        kafka_bootstrap, topics, state=state, batch_size=500, duplicates_uri=f"kafka://{kafka_bootstrap}/{duplicates}"
    ).run()

    counts = totals.as_dict()
    assert {name: counts[name] for name in expected.as_accounting()} == expected.as_accounting()
    want = reference(records)
    out = [m.value for m in read_topic(kafka_bootstrap, topics["out"])]
    assert out == want.emitted
    assert len(read_topic(kafka_bootstrap, topics["dlq"])) == expected.dead_lettered
    # each duplicate's report names the record whose emission it repeats, as Redis remembered it
    reports = [
        duplicate_codec.from_headers(m.value, m.key, m.raw_headers) for m in read_topic(kafka_bootstrap, duplicates)
    ]
    assert [(r.record.value, records[r.first.offset]) for r in reports] == want.repeats
    assert {(r.first.source, r.first.partition) for r in reports} == {(topics["in"], 0)}
    # the backlog spans 6,400 s of event time read in seconds: Redis keeps what the window may
    # still meet (a key one retention past its emission's expiry), not the whole backlog
    assert state.key_count() <= len(still_needed(records, RuleSet())) + 2 * 500
    assert state.key_count() < len(still_needed(records, RuleSet(), everything=True)) / 2
    state.close()


def still_needed(records: list[bytes], rules: RuleSet, everything: bool = False) -> set[tuple[str, str]]:
    """The (type, uniqueValue) keys of the ruled events whose newest emission the state must
    still hold after ``records``: kept until one retention past its expiry, against the watermark
    (the newest event time less the lateness); ``everything``: every key of the stream."""
    newest: dict[tuple[str, str], int] = {}
    for value in records:
        try:
            event = json.loads(value)
            key, t = (event["type"], event["uniqueValue"]), event["timestamp"]
        except (ValueError, KeyError, TypeError):
            continue
        if key[0] in rules.rules and isinstance(t, int) and t < 2_000_000_000:
            newest[key] = max(newest.get(key, t), t)
    end = max(newest.values())
    return {
        key
        for key, t in newest.items()
        if everything or t + 2 * rules.rules[key[0]].retention > end - rules.rules[key[0]].lateness
    }


def test_an_aborted_transaction_is_invisible_and_its_batch_is_read_again(kafka_bootstrap, topics):
    produce(kafka_bootstrap, topics["in"], [r.value for r in golden_stream() if r.verdict == "emit"][:10])
    engine = kafka_engine(kafka_bootstrap, topics, exactly_once=True)
    pipeline = engine.pipeline
    committer, sink = pipeline.committer, pipeline.delivery.sink
    try:
        batch = poll_until(pipeline.source, 10)
        committer.begin()
        for record in batch:
            sink.write(record, parse_event(record.value))
        sink.flush()
        committer.abort()
        assert len(read_topic(kafka_bootstrap, topics["out"], committed=False)) == 10
        assert read_topic(kafka_bootstrap, topics["out"]) == []
        again = poll_until(pipeline.source, 10)
        assert [r.position for r in again] == [r.position for r in batch]
        pipeline.step(again)
        assert len(read_topic(kafka_bootstrap, topics["out"])) == 10
    finally:
        engine.close()


def poll_until(source, count: int, attempts: int = 40) -> list:
    records = []
    for _ in range(attempts):
        records += source.poll(count - len(records), 0.5)
        if len(records) >= count:
            return records
    raise AssertionError(f"only {len(records)} of {count} records arrived")


def test_an_unreachable_broker_fails_at_start_with_one_line(topics):
    with pytest.raises(SourceUnavailable) as error:
        kafka_engine("127.0.0.1:1", topics, metadata_timeout=2)
    message = str(error.value)
    assert "kafka broker 127.0.0.1:1 unreachable (source" in message and "\n" not in message


@pytest.mark.parametrize("role", ["in", "out", "dlq"])
def test_a_missing_topic_is_named_at_start(kafka_bootstrap, topics, role):
    with pytest.raises(KafkaConfigurationError) as error:
        kafka_engine(kafka_bootstrap, {**topics, role: "no-such-topic"})
    assert "kafka topic 'no-such-topic'" in str(error.value) and "does not exist" in str(error.value)
    assert {"in": "(source)", "out": "(sink)", "dlq": "(dlq)"}[role] in str(error.value)


def test_secrets_never_reach_errors_or_logs(kafka_bootstrap, topics, caplog):
    caplog.set_level(logging.DEBUG)
    secret = "hunter2-secret-value"
    settings = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "u",
        "sasl.password": secret,
    }
    with pytest.raises((SourceUnavailable, SinkUnavailable)) as error:
        kafka_engine(kafka_bootstrap, topics, kafka_settings=settings, metadata_timeout=2)
    assert secret not in str(error.value) and secret not in caplog.text


def test_an_unknown_setting_is_a_one_line_configuration_error(kafka_bootstrap, topics):
    with pytest.raises(KafkaConfigurationError, match=r"no\.such\.property"):
        kafka_engine(kafka_bootstrap, topics, kafka_settings={"no.such.property": "1"})


def test_uri_parameters_become_client_settings_and_bounded_runs(kafka_bootstrap, topics):
    produce(kafka_bootstrap, topics["in"], [r.value for r in golden_stream()[:5]])
    core = Deduplicator(RuleSet(), InMemoryStateStore(), SystemClock())
    engine = build_kafka_engine(
        core,
        f"kafka://{kafka_bootstrap}/{topics['in']}?group=g&stop_at_end=true&client.id=dedup-test",
        f"kafka://{kafka_bootstrap}/{topics['out']}",
        f"kafka://{kafka_bootstrap}/{topics['dlq']}",
    )
    assert engine.run().records_in == 5
    assert json.loads(read_topic(kafka_bootstrap, topics["out"])[0].value)["id"] == "s0-e0"


@pytest.mark.redis
@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_a_trickle_of_events_comes_out_long_before_its_batch_would_fill(
    kafka_bootstrap, topics, redis_url, exactly_once
):
    """One event at a time, a batch of 1,000 never fills: each comes out once it has waited
    ``max_batch_delay``, far sooner than an idle poll lasts (``poll_timeout``, 10 s here)."""
    poll_timeout, metrics = 10.0, InMemoryMetrics()
    state = RedisStateStore(redis_url, key_prefix=f"{unique('trickle')}:") if exactly_once else None
    engine = kafka_engine(
        kafka_bootstrap,
        topics,
        state,
        stop_at_end=False,
        exactly_once=exactly_once,
        batch_size=1000,
        poll_timeout=poll_timeout,
        max_batch_delay=0.05,
        metrics=metrics,
    )
    stop = threading.Event()
    runner = threading.Thread(target=engine.run, args=(stop,))
    runner.start()
    try:
        for n in range(1, 4):
            produce(
                kafka_bootstrap,
                topics["in"],
                [
                    json.dumps(
                        {"id": f"t{n}", "uniqueValue": f"trickle-{n}", "type": "APP", "timestamp": int(time.time())}
                    ).encode()
                ],
            )
            started = time.monotonic()
            while len(read_topic(kafka_bootstrap, topics["out"])) < n:
                assert time.monotonic() - started < poll_timeout / 2, f"event {n} waited for a batch to fill"
                time.sleep(0.05)
    finally:
        stop.set()
        runner.join(60)
    latencies = metrics.observations["end_to_end_latency_seconds"]
    assert len(latencies) == 3 and all(0 <= latency < poll_timeout / 2 for latency in latencies)
