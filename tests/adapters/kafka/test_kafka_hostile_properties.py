"""Arbitrary records through the kafka engine and a real broker: no poison pill, nothing lost."""

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters import SystemClock
from adapters.kafka import build_kafka_engine
from adapters.memory import InMemoryStateStore
from domain import Deduplicator, DedupRule, RuleSet, dead_letters
from tests.support.hostile_records import records
from tests.support.kafka_io import create_topics, produce, read_topic, unique

pytestmark = pytest.mark.kafka
RULES = RuleSet({"APP": DedupRule("APP", 30, key_fields=("uniqueValue", "session")), "WEB": DedupRule("WEB", 600)})


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(records, min_size=1, max_size=40), batch=st.integers(1, 25))
def test_every_arbitrary_record_ends_in_exactly_one_place(kafka_bootstrap, values, batch):
    topics = {role: unique(f"prop-{role}") for role in ("in", "out", "dlq")}
    create_topics(kafka_bootstrap, topics["in"], partitions=2)
    create_topics(kafka_bootstrap, topics["out"], topics["dlq"])
    produce(kafka_bootstrap, topics["in"], values)
    uri = {role: f"kafka://{kafka_bootstrap}/{topic}" for role, topic in topics.items()}
    engine = build_kafka_engine(
        Deduplicator(RULES, InMemoryStateStore(), SystemClock()),
        uri["in"] + "?group=p",
        uri["out"],
        uri["dlq"],
        batch_size=batch,
        stop_at_end=True,
    )

    totals = engine.run()

    out = [m.value for m in read_topic(kafka_bootstrap, topics["out"])]
    dead = [
        dead_letters.from_headers(m.value, m.key, m.raw_headers) for m in read_topic(kafka_bootstrap, topics["dlq"])
    ]
    assert totals.balanced and totals.records_in == len(values)
    assert (len(out), len(dead)) == (totals.out, totals.dead_lettered)
    assert Counter(out) + Counter(d.record.value for d in dead) <= Counter(values)
    assert all(d.reason for d in dead)
