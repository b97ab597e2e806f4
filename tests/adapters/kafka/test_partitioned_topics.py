"""The kafka engine on keyed multi-partition topics: the verdicts do not depend on partitions.

A consumer reads partitions in chunks, one after another; once, the first chunk's event
times declared the other partitions' events late (106,736 of 144,615 records on four
partitions). Every case must give exactly the reference's output and dead letters.
"""

from __future__ import annotations

from collections import Counter

import pytest

from adapters import SystemClock
from adapters.kafka import build_kafka_engine
from adapters.memory import InMemoryStateStore
from app import StreamSpec
from domain import Deduplicator, RuleSet
from tests.support.kafka_io import create_topics, read_topic, unique
from tests.support.partitioned import keyed_topic, produce_keyed

pytestmark = pytest.mark.kafka

SPEC = StreamSpec(uniques=4000, seed=17)


@pytest.mark.parametrize(
    "partitions,batch_size,lagging",
    [
        (1, 5000, None),
        (3, 100, None),
        (8, 1000, None),
        (8, 37, None),
        (4, 500, 2),
    ],
    ids=[
        "1-partition",
        "3-partitions-small-batches",
        "8-partitions",
        "8-partitions-tiny-batches",
        "4-partitions-one-lagging-an-hour",
    ],
)
def test_the_kafka_engine_emits_what_the_reference_emits(kafka_bootstrap, partitions, batch_size, lagging):
    keyed = keyed_topic(partitions, SPEC, lagging)
    topics = {role: unique(f"parts-{role}") for role in ("in", "out", "dlq")}
    produce_keyed(kafka_bootstrap, topics["in"], keyed)
    create_topics(kafka_bootstrap, topics["out"], topics["dlq"])
    core = Deduplicator(RuleSet(), InMemoryStateStore(), SystemClock())
    engine = build_kafka_engine(
        core,
        f"kafka://{kafka_bootstrap}/{topics['in']}?group=g",
        f"kafka://{kafka_bootstrap}/{topics['out']}",
        f"kafka://{kafka_bootstrap}/{topics['dlq']}",
        batch_size=batch_size,
        stop_at_end=True,
    )

    totals = engine.run()

    emitted, dead = keyed.expected()
    assert Counter(m.value for m in read_topic(kafka_bootstrap, topics["out"])) == emitted
    assert Counter(m.value for m in read_topic(kafka_bootstrap, topics["dlq"])) == dead
    assert totals.balanced and totals.records_in == len(keyed.records)
    assert totals.late == SPEC.late
