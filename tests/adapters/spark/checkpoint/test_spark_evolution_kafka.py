"""Upgrading a Spark job that reads Kafka: the new version starts at the old one's offsets.

On the real broker: v1 reads a topic into its checkpoint; ``migrate`` prepares v2's
checkpoint (the key of WEB becomes uniqueValue + type); v2 reads only what came after v1's
last committed offsets and still drops repeats of v1's emissions. With exactly-once output
v2 carries v1's identity over and does not produce again what v1 committed to Kafka.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from adapters.spark import build_spark_engine
from adapters.spark.checkpoint import migrate, plan_migration
from app import StreamSpec, generate
from domain import Policies
from tests.adapters.spark.checkpoint.test_spark_evolution import V1, V2, event
from tests.adapters.spark.output.test_spark_eos import crash_before_checkpoint_commit, engine, topics  # noqa: F401
from tests.support.kafka_io import create_topics, produce, read_topic, unique
from tests.support.streams import reference

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def test_v2_starts_at_v1s_kafka_offsets_and_keeps_its_memory(kafka_spark, kafka_bootstrap, tmp_path):
    names = {role: unique(role) for role in ("in", "out1", "dlq1", "out2", "dlq2")}
    create_topics(kafka_bootstrap, *names.values())
    uri = {role: f"kafka://{kafka_bootstrap}/{topic}" for role, topic in names.items()}

    def run(rules, out, dlq, checkpoint):
        engine = build_spark_engine(
            rules,
            Policies(),
            source=uri["in"],
            sink=uri[out],
            dead_letters=uri[dlq],
            checkpoint=str(tmp_path / checkpoint),
            spark=kafka_spark,
            master="local[2]",
        )
        return engine.run(available_now=True).as_dict()

    produce(
        kafka_bootstrap,
        names["in"],
        [
            event("w1", "w", "WEB", 0).encode(),
            event("a1", "a", "APP", 0).encode(),
            event("x1", "x", "WEB", 10).encode(),
        ],
    )
    assert run(V1, "out1", "dlq1", "v1")["out"] == 3

    plan = plan_migration(kafka_spark, str(tmp_path / "v1"), str(tmp_path / "v2"), V2)
    assert json.loads(plan.source_offsets[0]) == {names["in"]: {"0": 3}}
    migrate(kafka_spark, plan)

    produce(
        kafka_bootstrap,
        names["in"],
        [
            event("w2", "w", "WEB", 300).encode(),
            event("n1", "n", "WEB", 300).encode(),
            event("a2", "a", "APP", 20).encode(),
        ],
    )
    counts = run(V2, "out2", "dlq2", "v2")
    assert (counts["in"], counts["out"], counts["duplicates"]) == (3, 1, 2)
    assert [json.loads(m.value)["id"] for m in read_topic(kafka_bootstrap, names["out2"], committed=False)] == ["n1"]


def test_an_exactly_once_migration_does_not_produce_again_what_the_old_job_committed(
    kafka_spark,
    kafka_bootstrap,
    topics,  # noqa: F811 (the fixture)
    tmp_path,
):
    records, _ = generate(StreamSpec(uniques=900, seed=12, late=0))
    half = len(records) // 2
    produce(kafka_bootstrap, topics["in"], records[:half])
    # 1. v1 writes every batch; its last one reaches Kafka but not its checkpoint (it dies in between)
    v1 = engine(kafka_spark, kafka_bootstrap, topics, tmp_path / "v1", "exactly-once", per_batch=300)
    v1.run(available_now=True)
    pending = crash_before_checkpoint_commit(tmp_path / "v1")
    # 2. the upgrade: v2's checkpoint starts at v1's last committed batch, the one before that
    plan = plan_migration(kafka_spark, str(tmp_path / "v1"), str(tmp_path / "v2"), V1)
    assert plan.batch == pending - 1
    assert f"the old job's batch {pending}, planned but not committed" in "\n".join(plan.describe())
    migrate(kafka_spark, plan)
    # 3. v2 reads v1's last batch again and then the rest: under v1's transactional id, and v1's batch once
    produce(kafka_bootstrap, topics["in"], records[half:])
    v2 = engine(kafka_spark, kafka_bootstrap, topics, tmp_path / "v2", "exactly-once", per_batch=300)
    v2.run(available_now=True)
    assert v2.writer.identity.transactional_id == v1.writer.identity.transactional_id
    assert Counter(m.value for m in read_topic(kafka_bootstrap, topics["out"])) == Counter(reference(records).emitted)
