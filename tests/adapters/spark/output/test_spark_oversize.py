"""The Spark engine with output topics smaller than some records: it moves on (issue 17).

Before, Spark's Kafka writer failed the micro-batch on a record over the topic's
``max.message.bytes``, its replay failed again, and the query never committed the batch.
The same stream and checks as the kafka engine's (``tests/support/oversize.py``).
"""

from __future__ import annotations

import pytest

from adapters.spark import build_spark_engine
from adapters.spark.runtime import connector_jars
from domain import Policies, RuleSet
from tests.support.kafka_io import produce, read_topic
from tests.support.oversize import check_output, small_topics, stream

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


@pytest.mark.parametrize(
    "delivery, state", [("at-least-once", "checkpoint"), ("exactly-once", "checkpoint"), ("at-least-once", "redis")]
)
def test_records_too_large_for_the_topics_are_dead_lettered_cut_and_the_query_moves_on(
    spark, kafka_bootstrap, tmp_path, request, delivery, state
):
    if not connector_jars():
        pytest.skip("Spark's Kafka connector jars are not in .cache/jars/spark-kafka (scripts/bootstrap --services)")
    topics, run = small_topics(kafka_bootstrap), stream()
    produce(kafka_bootstrap, topics["in"], run.records)
    uri = {role: f"kafka://{kafka_bootstrap}/{topic}" for role, topic in topics.items()}
    engine = build_spark_engine(
        RuleSet(),
        Policies(),
        source=uri["in"],
        sink=uri["out"],
        dead_letters=uri["dlq"],
        checkpoint=str(tmp_path / "checkpoint"),
        delivery=delivery,
        spark=spark,
        master="local[2]",
        max_offsets_per_trigger=5,
        state=request.getfixturevalue("redis_url") if state == "redis" else "checkpoint",
    )

    totals = engine.run(available_now=True)

    check_output(
        run, read_topic(kafka_bootstrap, topics["out"]), read_topic(kafka_bootstrap, topics["dlq"]), totals.as_dict()
    )
    assert engine.guard.checkpoint.last_committed() == 2  # three micro-batches of at most 5, all committed
