"""The kafka engine with output topics smaller than some records: it moves on (issue 17).

Before, a unique event larger than the events topic took was refused at delivery, dead-
lettered with the same bytes, refused again, and the engine stopped (``PolicyExhausted``)
without ever committing its offsets. The same when the topics' ``max.message.bytes`` cannot
be read (ACLs that forbid describing them: issue 31): the broker's refusals are learned from.
"""

from __future__ import annotations

import pytest

from adapters import SystemClock
from adapters.kafka import build_kafka_engine
from adapters.memory import InMemoryStateStore
from domain import Deduplicator, RuleSet
from tests.support.kafka_io import committed_offsets, produce, read_topic
from tests.support.oversize import check_output, small_topics, stream

pytestmark = pytest.mark.kafka


@pytest.mark.parametrize("limit_read", [True, False], ids=["limits read", "limits unreadable"])
@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_records_too_large_for_the_topics_are_dead_lettered_cut_and_the_engine_moves_on(
    kafka_bootstrap, exactly_once, limit_read, monkeypatch
):
    if not limit_read:  # what the engine sees when DescribeConfigs is denied (_topics.max_message_bytes: None)
        monkeypatch.setattr("adapters.kafka._engine.max_message_bytes", lambda *args, **kwargs: None)
    topics, run = small_topics(kafka_bootstrap), stream()
    produce(kafka_bootstrap, topics["in"], run.records)
    core = Deduplicator(RuleSet(), InMemoryStateStore(), SystemClock())
    engine = build_kafka_engine(
        core,
        f"kafka://{kafka_bootstrap}/{topics['in']}?group=dedup",
        f"kafka://{kafka_bootstrap}/{topics['out']}",
        f"kafka://{kafka_bootstrap}/{topics['dlq']}",
        exactly_once=exactly_once,
        batch_size=5,
        stop_at_end=True,
        flush_timeout=10,
    )

    totals = engine.run()

    check_output(
        run,
        read_topic(kafka_bootstrap, topics["out"]),
        read_topic(kafka_bootstrap, topics["dlq"]),
        totals.as_dict(),
        limit_read,
    )
    assert committed_offsets(kafka_bootstrap, "dedup", topics["in"]) == [len(run.records)]
