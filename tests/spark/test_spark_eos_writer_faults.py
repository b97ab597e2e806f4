"""Exactly-once output written by the executors, through the failures of its writing tasks.

Each output partition of a micro-batch is written by its task in one Kafka transaction
(``adapters.spark.transactional_sink``). The failures are injected by the JVM writer itself
(``spark.streamdedup.test.writerFault``, ``KafkaBatchWriter``'s ``Faults``) at the exact
moments that matter: a task dying after its transaction committed but before Spark saw it
finish, a task dying mid-transaction (its records sent, the transaction left open), and the
whole driver dying (``local[N]``: driver and executor are one JVM) after one partition of a
batch committed and before the others did. ``read_committed`` readers must see every unique
event and every dead letter exactly once.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from adapters.spark.engine import build_spark_engine
from adapters.spark.session import kafka_jars
from adapters.spark.transactional_sink import FAULT_SETTING
from app.generator import StreamSpec, generate
from domain.policies import Policies
from domain.rules import RuleSet
from tests.faults.harness import Topics, engine_process
from tests.integration.kafka_io import create_topics, unique
from tests.integration.partitioned import produce_keyed, spread
from tests.integration.streams import reference
from tests.spark.eos_output import committed, dead_letter_values, markers

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def test_tasks_dying_before_and_after_their_commit_write_each_partition_once(kafka_spark, kafka_bootstrap, tmp_path,
                                                                            caplog):
    records, expected = generate(StreamSpec(uniques=2400, seed=21, late=0))
    topics = {role: unique(f"eos-tasks-{role}") for role in ("in", "out", "dlq")}
    produce_keyed(kafka_bootstrap, topics["in"], spread(records, 4))
    create_topics(kafka_bootstrap, topics["out"], topics["dlq"])
    uri = {role: f"kafka://{kafka_bootstrap}/{topic}" for role, topic in topics.items()}
    engine = build_spark_engine(
        RuleSet(), Policies.from_strings({"transient": "retry(attempts=4,backoff=fixed,delay=0)>fail"}),
        source=uri["in"], sink=uri["out"], dead_letters=uri["dlq"], checkpoint=str(tmp_path / "checkpoint"),
        delivery="exactly-once", spark=kafka_spark, master="local[2]", max_offsets_per_trigger=1200)
    # batch 1: partition 0 dies right after its commit, partition 1 mid-transaction; batch 2: partition 1 again
    kafka_spark.conf.set(FAULT_SETTING, "fail-after-commit:1:0,fail-before-commit:1:1,fail-before-commit:2:1")
    try:
        with caplog.at_level("INFO", logger="adapters.spark.batch_writers"):
            counts = engine.run(available_now=True).as_dict()
    finally:
        kafka_spark.conf.unset(FAULT_SETTING)
    want = reference(records)
    # 1. read_committed: every unique event and dead letter once; the aborted transactions' records were there
    out = committed(kafka_bootstrap, topics["out"])
    assert out == Counter(want.emitted)
    assert dead_letter_values(kafka_bootstrap, topics["dlq"]) == Counter(want.dead_letters)
    assert sum(committed(kafka_bootstrap, topics["out"], only_committed=False).values()) > sum(out.values())
    # 2. the retried write found partition 0 of batch 1 committed and skipped it
    assert "batch 1: partitions [0] were committed to Kafka before" in caplog.text
    tid = engine.writer.identity.transactional_id
    found = markers(kafka_bootstrap, topics["out"], tid)
    assert set(found.values()) == {1} and {(1, 0), (1, 1), (2, 1)} <= set(found)
    # 3. the accounting counts each record once, through the retries
    assert {k: counts[k] for k in ("in", "out", "duplicates", "dead_lettered")} == \
        {k: expected.as_accounting()[k] for k in ("in", "out", "duplicates", "dead_lettered")}


def test_a_driver_dying_between_its_partitions_commits_replays_only_the_uncommitted(kafka_bootstrap, tmp_path):
    if not kafka_jars():
        pytest.skip("Spark's Kafka connector jars are not in .cache/jars/spark-kafka (scripts/bootstrap --services)")
    records, _ = generate(StreamSpec(uniques=3000, seed=22, late=0))
    topics = Topics(kafka_bootstrap, *(unique(f"eos-driver-{role}") for role in ("in", "out", "dlq")))
    produce_keyed(kafka_bootstrap, topics.input, spread(records, 4))
    create_topics(kafka_bootstrap, topics.output, topics.dead_letters)

    def run(faults: str | None) -> int:
        engine = engine_process(topics, tmp_path, per_batch=1000, delivery="exactly-once", bounded=True)
        conf = {"spark.sql.shuffle.partitions": "8", **({FAULT_SETTING: faults} if faults else {})}
        engine.env.update(DEDUP_SPARK__MASTER="local[2,3]", DEDUP_SPARK__CONF=json.dumps(conf),
                          DEDUP_SPARK__LOG_FILE=str(tmp_path / "spark.log"))
        engine.start()
        return engine.proc.wait(300)

    # 1. batch 1: Spark retries partition 1's task, which died after its commit; batch 2: the JVM (driver
    #    and executor) dies right after partition 0 committed
    assert run("fail-after-commit:1:1,halt-after-commit:2:0") != 0
    tid = json.loads((tmp_path / "checkpoint" / "streamdedup" / "identity").read_text())["transactional_id"]
    before = markers(kafka_bootstrap, topics.output, tid)
    batch2 = {partition for batch, partition in before if batch == 2}
    assert 0 in batch2 and len(batch2) < 8
    assert "task failed after-commit" in (tmp_path / "spark.log").read_text()
    # 2. the restart replays batch 2: the committed partitions are skipped, the others written
    assert run(None) == 0
    want = reference(records)
    assert committed(kafka_bootstrap, topics.output) == Counter(want.emitted)
    assert dead_letter_values(kafka_bootstrap, topics.dead_letters) == Counter(want.dead_letters)
    after = markers(kafka_bootstrap, topics.output, tid)
    assert set(after.values()) == {1} and {(batch, p) for batch in (1, 2) for p in range(8)} <= set(after)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["in"] == summary["out"] + summary["duplicates"] + summary["dead_lettered"] + summary["skipped"]
