"""The Spark engine on keyed multi-partition topics: the verdicts do not depend on partitions.

Once, Spark's one watermark (the highest event time of any partition) dead-lettered 1,828
of 144,615 records as late on four partitions. Each case must give exactly the reference's
output and dead letters (tests/support/partitioned.py), state in the checkpoint or in Redis.
The topic's partitions are read in at most ``spark.source_tasks`` tasks (by default a local
master's cores), a task reading whole partitions one after another: the verdicts are the same
whichever partitions share a task, and no stage runs more tasks than that and the state's
partitions.
"""

from __future__ import annotations

from collections import Counter

import pytest

from adapters.spark import build_spark_engine
from adapters.spark.runtime import connector_jars
from app import StreamSpec
from domain import Policies, RuleSet
from tests.support.kafka_io import create_topics, read_topic, unique
from tests.support.partitioned import keyed_topic, produce_keyed

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.redis]

SPEC = StreamSpec(uniques=3000, seed=23)


STATE_PARTITIONS = 2  # the engine's default spark.shuffle_partitions


@pytest.mark.parametrize(
    "partitions,per_batch,lagging,state,source_tasks",
    [
        (3, 800, None, "memory", 3),
        (8, 5000, 5, "memory", None),
        (4, 1500, 1, "redis", None),
    ],
    ids=[
        "3-partitions-small-batches-a-task-each",
        "8-partitions-one-lagging",
        "4-partitions-one-lagging-redis-state",
    ],
)
def test_the_spark_engine_emits_what_the_reference_emits(
    spark, kafka_bootstrap, redis_url, tmp_path, partitions, per_batch, lagging, state, source_tasks
):
    if not connector_jars():
        pytest.skip("Spark's Kafka connector jars are not in .cache/jars/spark-kafka (scripts/bootstrap --services)")
    keyed = keyed_topic(partitions, SPEC, lagging)
    topics = {role: unique(f"spark-parts-{role}") for role in ("in", "out", "dlq")}
    produce_keyed(kafka_bootstrap, topics["in"], keyed)
    create_topics(kafka_bootstrap, topics["out"], topics["dlq"])
    uri = {role: f"kafka://{kafka_bootstrap}/{topic}" for role, topic in topics.items()}
    engine = build_spark_engine(
        RuleSet(),
        Policies(),
        source=uri["in"],
        sink=uri["out"],
        dead_letters=uri["dlq"],
        checkpoint=str(tmp_path / "checkpoint"),
        spark=spark,
        master="local[2]",
        state=redis_url if state == "redis" else "checkpoint",
        max_offsets_per_trigger=per_batch,
        source_tasks=source_tasks,
    )
    stages_before = _stage_tasks(spark)

    totals = engine.run(available_now=True)

    emitted, dead = keyed.expected()
    assert Counter(m.value for m in read_topic(kafka_bootstrap, topics["out"])) == emitted
    assert Counter(m.value for m in read_topic(kafka_bootstrap, topics["dlq"])) == dead
    assert totals.balanced and totals.records_in == len(keyed.records) and totals.late == SPEC.late
    context = spark.sparkContext
    cores = context.defaultParallelism if context.master.startswith("local") else partitions
    source_stage = min(partitions, source_tasks or cores)
    ran = {stage: tasks for stage, tasks in _stage_tasks(spark).items() if stage not in stages_before}
    assert ran and max(ran.values()) == max(source_stage, STATE_PARTITIONS), ran


def _stage_tasks(spark) -> dict[int, int]:
    """Every stage that ran, of the jobs Spark's status store keeps: its id and its number of tasks."""
    store = spark.sparkContext._jsc.sc().statusStore()
    jobs = store.jobsList(None)
    stages = {}
    for job in (jobs.apply(i) for i in range(jobs.size())):
        for stage in (job.stageIds().apply(k) for k in range(job.stageIds().size())):
            try:
                stages[stage] = store.lastStageAttempt(stage).numTasks()
            except Exception:  # skipped (its shuffle output reused): no attempt, no task
                continue
    return stages
