"""Exactly-once output written by the executors, through the failures of its writing tasks.

Each output partition of a micro-batch is written by its task in one Kafka transaction
(``adapters.spark.output._executor_writer``). The failures are injected by the JVM writer itself
(``spark.streamdedup.test.writerFault``, ``KafkaBatchWriter``'s ``Faults``) at the exact
moments that matter: a task dying after its transaction committed but before Spark saw it
finish, and a task dying mid-transaction (its records sent, the transaction left open), here
in-session on ``local[2]``, through both ways a batch reaches the writer (``foreachBatch``,
which retries the write per the ``transient`` policy, and the JVM sink, whose aborted write
the engine retries by starting the query again). ``read_committed`` readers must see every
unique event and every dead letter exactly once. On the standalone cluster, with executor JVMs halted at those moments
and the driver killed while one partition's transaction is open:
``tests/adapters/spark/cluster/test_cluster_eos_writer_faults.py``.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from adapters.spark import build_spark_engine
from adapters.spark.output import FAULT_SETTING
from app import StreamSpec, generate
from domain import Policies, RuleSet
from tests.adapters.spark.eos_output import committed, dead_letter_values, markers
from tests.support.kafka_io import create_topics, unique
from tests.support.partitioned import produce_keyed, spread
from tests.support.streams import reference

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def test_tasks_dying_before_and_after_their_commit_write_each_partition_once(
    kafka_spark, kafka_bootstrap, tmp_path, caplog, sink
):
    records, expected = generate(StreamSpec(uniques=2400, seed=21, late=0))
    topics = {role: unique(f"eos-tasks-{role}") for role in ("in", "out", "dlq")}
    produce_keyed(kafka_bootstrap, topics["in"], spread(records, 4))
    create_topics(kafka_bootstrap, topics["out"], topics["dlq"])
    uri = {role: f"kafka://{kafka_bootstrap}/{topic}" for role, topic in topics.items()}
    engine = build_spark_engine(
        RuleSet(),
        Policies.from_strings({"transient": "retry(attempts=4,backoff=fixed,delay=0)>fail"}),
        source=uri["in"],
        sink=uri["out"],
        dead_letters=uri["dlq"],
        checkpoint=str(tmp_path / "checkpoint"),
        delivery="exactly-once",
        spark=kafka_spark,
        master="local[2]",
        max_offsets_per_trigger=1200,
    )
    # batch 1: partition 0 dies right after its commit; batch 2: partition 1 dies mid-transaction. Not both in
    # one batch: partition 1's failure could then abort the job before partition 0 committed (a race).
    # (tagged with the writer: a fault fires once per JVM)
    kafka_spark.conf.set(FAULT_SETTING, f"fail-after-commit:1:0:{sink},fail-before-commit:2:1:{sink}")
    try:
        with caplog.at_level("INFO", logger="adapters.spark.output._writers"):
            counts = engine.run(available_now=True).as_dict()
        # foreachBatch retried the failed writes in the batch; the JVM sink's, by starting the query again
        restarts = caplog.text.count("the query starts again in 0.0s to write it")
        assert (bool(engine.timings.batches), restarts) == ((True, 0) if sink == "foreach-batch" else (False, 2))
    finally:
        kafka_spark.conf.unset(FAULT_SETTING)
    want = reference(records)
    # 1. read_committed: every unique event and dead letter once; the aborted transactions' records were there
    out = committed(kafka_bootstrap, topics["out"])
    assert out == Counter(want.emitted)
    assert dead_letter_values(kafka_bootstrap, topics["dlq"]) == Counter(want.dead_letters)
    assert sum(committed(kafka_bootstrap, topics["out"], only_committed=False).values()) > sum(out.values())
    # 2. the retried write found partition 0 of batch 1 committed and skipped it (and partition 1, had it
    # committed before the job failed)
    assert re.search(r"batch 1: partitions \[0(, 1)?\] were committed to Kafka before", caplog.text), caplog.text
    tid = engine.writer.identity.transactional_id
    found = markers(kafka_bootstrap, topics["out"], tid)
    assert set(found.values()) == {1} and {(1, 0), (1, 1), (2, 1)} <= set(found)
    # 3. the accounting counts each record once, through the retries
    assert {k: counts[k] for k in ("in", "out", "duplicates", "dead_lettered")} == {
        k: expected.as_accounting()[k] for k in ("in", "out", "duplicates", "dead_lettered")
    }
