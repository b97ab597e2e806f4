"""Exactly-once Kafka output of the Spark engine, on the real broker.

A micro-batch is replayed by Spark when the driver died after writing it and before
committing it to the checkpoint. The tests make that happen deterministically: they run
the engine, then delete the checkpoint's last commit entry (what a crash at that moment
leaves behind) and run again, so the last micro-batch is replayed with the same id.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource

from adapters.kafka import KafkaEndpoint
from adapters.spark import SparkEngine, build_spark_engine
from adapters.spark.checkpoint import Checkpoint, legacy_transactional_id, resolve_identity
from adapters.spark.output import FAULT_SETTING, CommitLog, partition_id
from app import SettingsError, StreamSpec, container_for, generate, load_settings
from deploy.local import services
from domain import Policies, RuleSet, SinkUnavailable
from domain import dead_letters as dead_letter_codec
from tests.adapters.spark.conftest import spellings
from tests.support.fixtures import running
from tests.support.kafka_io import create_topics, produce, read_topic, unique
from tests.support.streams import reference

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


@pytest.fixture
def topics(kafka_bootstrap):
    names = {role: unique(role) for role in ("in", "out", "dlq")}
    create_topics(kafka_bootstrap, *names.values())
    return names


def engine(
    spark,
    bootstrap,
    topics,
    checkpoint: Path,
    delivery: str,
    per_batch: int = 700,
    policies: Policies | None = None,
    **settings,
) -> SparkEngine:
    uri = {role: f"kafka://{bootstrap}/{topic}" for role, topic in topics.items()}
    return build_spark_engine(
        RuleSet(),
        policies or Policies(),
        source=uri["in"],
        sink=uri["out"],
        dead_letters=uri["dlq"],
        checkpoint=str(checkpoint),
        delivery=delivery,
        spark=spark,
        master="local[2]",
        max_offsets_per_trigger=per_batch,
        **settings,
    )


def crash_before_checkpoint_commit(checkpoint: Path) -> int:
    """Forget the last micro-batch's commit, as a driver killed right before writing it would."""
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    return last


def dead_letter_bytes(messages) -> list[bytes]:
    """The original values the dead letters carry (each decoded whole: every header must be there)."""
    return [dead_letter_codec.from_headers(m.value, m.key, m.raw_headers).record.value for m in messages]


def markers(bootstrap: str, topic: str, transactional_id: str) -> dict[int, list[dict]]:
    """The commit markers of ``transactional_id``'s partitions, per batch."""
    batches: dict[int, list[dict]] = {}
    for message in read_topic(bootstrap, f"{topic}.commits"):
        if message.key.startswith(partition_id(transactional_id, "").encode()):
            marker = json.loads(message.value)
            batches.setdefault(marker["batch_id"], []).append(marker)
    return batches


def test_a_replayed_micro_batch_is_not_produced_twice(kafka_spark, kafka_bootstrap, topics, tmp_path, sink):
    records, expected = generate(StreamSpec(uniques=1500, seed=5))
    produce(kafka_bootstrap, topics["in"], records)
    checkpoint = tmp_path / "checkpoint"
    # 1. a full run; then a zombie of it holds a transaction open, the last batch's checkpoint commit is
    #    lost and the batch replayed
    first = engine(kafka_spark, kafka_bootstrap, topics, checkpoint, "exactly-once")
    first.run(available_now=True)
    assert bool(first.timings.batches) == (sink == "foreach-batch")  # the batches that called into Python
    tid = first.writer.identity.transactional_id
    zombie = open_transaction_left_behind(kafka_bootstrap, partition_id(tid, 0), topics["out"])
    replayed = crash_before_checkpoint_commit(checkpoint)
    engine(kafka_spark, kafka_bootstrap, topics, checkpoint, "exactly-once").run(available_now=True)
    # 2. read_committed readers see every unique event and every dead letter exactly once
    want = reference(records)
    out = read_topic(kafka_bootstrap, topics["out"])
    assert Counter(m.value for m in out) == Counter(want.emitted)
    assert Counter(dead_letter_bytes(read_topic(kafka_bootstrap, topics["dlq"]))) == Counter(want.dead_letters)
    assert zombie not in {m.value for m in out}
    # 3. one commit marker per batch and output partition (the replay found them all and wrote none);
    #    their counts are the run's accounting
    batches = markers(kafka_bootstrap, topics["out"], tid)
    assert sorted(batches) == list(range(replayed + 1)) and replayed >= 2
    assert all(sorted(m["partition"] for m in batch) == [0, 1] for batch in batches.values())
    totals = Counter()
    for batch in batches.values():
        for marker in batch:
            totals.update(marker["counts"])
    assert {k: totals[k] for k in ("in", "out", "duplicates", "dead_lettered")} == {
        k: expected.as_accounting()[k] for k in ("in", "out", "duplicates", "dead_lettered")
    }


def test_the_exactly_once_identity_is_the_checkpoints_not_its_spelling(spark, tmp_path):
    where = tmp_path / "checkpoint"
    # 1. created on the first start, found again however the location is spelt
    found = {resolve_identity(Checkpoint.at(s), s).transactional_id for s in spellings(spark, where)}
    assert len(found) == 1 and found.pop().startswith("streamdedup-spark-")
    assert json.loads((where / "streamdedup" / "identity").read_text())["transactional_id"].startswith("streamdedup")
    # 2. a configured id wins, and is kept for the starts that follow
    assert resolve_identity(Checkpoint.at(str(where)), str(where), "configured").transactional_id == "configured"
    assert resolve_identity(Checkpoint.at(f"file://{where}"), f"file://{where}").transactional_id == "configured"
    # 3. a checkpoint created anew at the same location is another query: another id
    shutil.rmtree(where)
    assert resolve_identity(Checkpoint.at(str(where)), str(where)).transactional_id not in ("configured", *found)
    # 4. an older version's checkpoint (progress, no identity) keeps the id it derived from its location
    legacy = tmp_path / "legacy"
    (legacy / "offsets").mkdir(parents=True)
    (legacy / "offsets" / "0").write_text('v1\n{"batchWatermarkMs": 0}\n{"logOffset": 0}')
    assert resolve_identity(Checkpoint.at(str(legacy)), str(legacy)).transactional_id == legacy_transactional_id(
        str(legacy)
    )


def test_a_restart_spelling_the_checkpoint_otherwise_writes_no_batch_twice(
    kafka_spark, kafka_bootstrap, topics, tmp_path
):
    records, _ = generate(StreamSpec(uniques=900, seed=9))
    produce(kafka_bootstrap, topics["in"], records)
    checkpoint, ids = tmp_path / "checkpoint", []
    # 1. the same checkpoint spelt four ways; before each restart the last batch was committed to Kafka and
    #    not to the checkpoint (a crash in between), so each restart replays it
    for restart, spelling in enumerate(spellings(kafka_spark, checkpoint)):
        if restart:
            crash_before_checkpoint_commit(checkpoint)
        spark_engine = engine(kafka_spark, kafka_bootstrap, topics, spelling, "exactly-once", per_batch=400)
        spark_engine.run(available_now=True)
        ids.append(spark_engine.writer.identity.transactional_id)
    # 2. one transactional id: every replay found its batch's commit marker and wrote nothing again
    assert len(set(ids)) == 1
    assert Counter(m.value for m in read_topic(kafka_bootstrap, topics["out"])) == Counter(reference(records).emitted)


def test_at_least_once_produces_a_replayed_micro_batch_again(kafka_spark, kafka_bootstrap, topics, tmp_path):
    records, _ = generate(StreamSpec(uniques=600, seed=6))
    produce(kafka_bootstrap, topics["in"], records)
    checkpoint = tmp_path / "checkpoint"
    engine(kafka_spark, kafka_bootstrap, topics, checkpoint, "at-least-once", per_batch=300).run(available_now=True)
    crash_before_checkpoint_commit(checkpoint)
    engine(kafka_spark, kafka_bootstrap, topics, checkpoint, "at-least-once", per_batch=300).run(available_now=True)
    out = Counter(m.value for m in read_topic(kafka_bootstrap, topics["out"]))
    assert set(out) == set(reference(records).emitted)
    assert sum(out.values()) > len(reference(records).emitted)


def open_transaction_left_behind(bootstrap: str, transactional_id: str, topic: str) -> bytes:
    """A crashed writer's transaction under the query's id: produced, flushed, never committed."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    value = b'{"zombie": true}'
    producer.produce(topic, value)
    assert producer.flush(30) == 0
    return value


def test_an_invalidate_notification_from_a_topic_lets_the_event_pass_again(kafka_spark, kafka_bootstrap, tmp_path):
    topics = {role: unique(role) for role in ("in", "out", "dlq", "notes")}
    create_topics(kafka_bootstrap, *topics.values())

    def event(t):
        return json.dumps({"id": f"e{t}", "uniqueValue": "u-1", "type": "APP", "timestamp": 1_700_000_000 + t}).encode()

    note = json.dumps(
        {"notification": "INVALIDATE", "exception": "downstream lost it", "event": json.loads(event(0))}
    ).encode()
    checkpoint = tmp_path / "checkpoint"

    def run():
        spark_engine = engine(
            kafka_spark,
            kafka_bootstrap,
            {k: topics[k] for k in ("in", "out", "dlq")},
            checkpoint,
            "exactly-once",
            notifications=f"kafka://{kafka_bootstrap}/{topics['notes']}",
        )
        return spark_engine.run(available_now=True).as_dict()

    # 1. u-1 is emitted, its repeat inside the window dropped
    produce(kafka_bootstrap, topics["in"], [event(0), event(1)])
    assert run()["duplicates"] == 1
    # 2. an INVALIDATE for u-1 arrives with a re-send of it: the re-sent event passes
    produce(kafka_bootstrap, topics["notes"], [note])
    produce(kafka_bootstrap, topics["in"], [event(2)])
    counts = run()
    assert (counts["in"], counts["out"], counts["invalidations"]) == (1, 1, 1)
    assert [m.value for m in read_topic(kafka_bootstrap, topics["out"])] == [event(0), event(2)]


def test_a_checkpoint_created_anew_at_the_same_location_is_a_new_query(kafka_spark, kafka_bootstrap, topics, tmp_path):
    records, _ = generate(StreamSpec(uniques=400, seed=8))
    produce(kafka_bootstrap, topics["in"], records)
    checkpoint = tmp_path / "checkpoint"
    engine(kafka_spark, kafka_bootstrap, topics, checkpoint, "exactly-once", per_batch=300).run(available_now=True)
    # the job is reset: same checkpoint location (so same transactional id), batch ids from 0 again
    shutil.rmtree(checkpoint)
    engine(kafka_spark, kafka_bootstrap, topics, checkpoint, "exactly-once", per_batch=300).run(available_now=True)
    # the old query's commit markers did not make the new one skip its batches: all written again
    out = Counter(m.value for m in read_topic(kafka_bootstrap, topics["out"]))
    assert out == Counter({value: 2 * n for value, n in Counter(reference(records).emitted).items()})


def test_at_least_once_writes_every_unique_event_and_dead_letter_and_counts_each_once(
    kafka_spark, kafka_bootstrap, topics, tmp_path, sink
):
    records, expected = generate(StreamSpec(uniques=600, seed=7))
    produce(kafka_bootstrap, topics["in"], records)
    spark_engine = engine(kafka_spark, kafka_bootstrap, topics, tmp_path / "checkpoint", "at-least-once", per_batch=400)
    counts = spark_engine.run(available_now=True).as_dict()
    assert bool(spark_engine.timings.batches) == (sink == "foreach-batch")
    # the watermarks prepared before and advanced after the last batch, by whichever wrote it
    last = max(int(p.name) for p in (tmp_path / "checkpoint" / "commits").iterdir() if p.name.isdigit())
    saved = json.loads((tmp_path / "checkpoint" / "streamdedup" / "watermarks" / f"{last}.json").read_text())
    assert last >= 1 and {"use", "after"} <= set(saved)
    want = reference(records)
    assert Counter(m.value for m in read_topic(kafka_bootstrap, topics["out"])) == Counter(want.emitted)
    assert Counter(dead_letter_bytes(read_topic(kafka_bootstrap, topics["dlq"]))) == Counter(want.dead_letters)
    assert {k: counts[k] for k in ("in", "out", "duplicates", "dead_lettered")} == {
        k: expected.as_accounting()[k] for k in ("in", "out", "duplicates", "dead_lettered")
    }


def test_a_write_retried_after_its_records_were_sent_counts_each_record_once(
    kafka_spark, kafka_bootstrap, topics, tmp_path, sink
):
    records, expected = generate(StreamSpec(uniques=600, seed=8))
    produce(kafka_bootstrap, topics["in"], records)
    spark_engine = engine(
        kafka_spark,
        kafka_bootstrap,
        topics,
        tmp_path / "checkpoint",
        "at-least-once",
        per_batch=400,
        policies=Policies.from_strings({"transient": "retry(attempts=2,backoff=fixed,delay=0)>fail"}),
    )
    # batch 0's task 0 dies once after sending its records (tagged: a fault fires once per JVM)
    kafka_spark.conf.set(FAULT_SETTING, f"fail-after-commit:0:0:{sink}")
    try:
        counts = spark_engine.run(available_now=True).as_dict()
    finally:
        kafka_spark.conf.unset(FAULT_SETTING)
    assert {k: counts[k] for k in ("in", "out", "duplicates", "dead_lettered")} == {
        k: expected.as_accounting()[k] for k in ("in", "out", "duplicates", "dead_lettered")
    }
    out = Counter(m.value for m in read_topic(kafka_bootstrap, topics["out"]))
    assert set(out) == set(reference(records).emitted)
    assert sum(out.values()) > len(reference(records).emitted)  # the retry wrote task 0's records again
    assert bool(spark_engine.timings.batches) == (sink == "foreach-batch")


def upstream_transactions(bootstrap: str, topic: str, aborted: list[bytes], committed: list[bytes]) -> None:
    """An upstream exactly-once producer: one transaction aborted, then one committed."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("upstream")})
    producer.init_transactions(30)
    for values, commit in ((aborted, False), (committed, True)):
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value)
        assert producer.flush(30) == 0
        producer.commit_transaction(30) if commit else producer.abort_transaction(30)


def test_records_of_an_aborted_upstream_transaction_are_never_judged(kafka_spark, kafka_bootstrap, topics, tmp_path):
    def event(i):
        return json.dumps(
            {"id": f"e{i}", "uniqueValue": f"u-{i}", "type": "APP", "timestamp": 1_700_000_000 + i}
        ).encode()

    aborted, committed = [event(i) for i in range(3)], [event(i) for i in range(3, 6)]
    upstream_transactions(kafka_bootstrap, topics["in"], aborted, committed)
    # 1. by default the source reads read_committed: only the committed transaction's records come out
    counts = (
        engine(kafka_spark, kafka_bootstrap, topics, tmp_path / "checkpoint", "at-least-once")
        .run(available_now=True)
        .as_dict()
    )
    assert counts["in"] == 3
    assert [m.value for m in read_topic(kafka_bootstrap, topics["out"])] == committed
    # 2. the user's kafka.config overrides the default (here: every record, aborted ones too)
    again = (
        engine(
            kafka_spark,
            kafka_bootstrap,
            topics,
            tmp_path / "uncommitted",
            "at-least-once",
            kafka_config={"consumer.isolation.level": "read_uncommitted"},
        )
        .run(available_now=True)
        .as_dict()
    )
    assert again["in"] == 6


@pytest.fixture
def broker_replicating_by_default(tmp_path):
    """A one-broker cluster whose default.replication.factor is 3: a topic created with its default cannot be hosted."""
    with running(
        services.KafkaBroker(tmp_path / "kafka", extra_config={"default.replication.factor": 3}), timeout=120
    ) as broker:
        yield broker


def test_the_commit_topic_gets_the_brokers_replication_factor_unless_configured(broker_replicating_by_default):
    bootstrap = broker_replicating_by_default.bootstrap
    # 1. created without a factor, the broker applies its default (3, which one broker cannot host: it says so)
    with pytest.raises(SinkUnavailable) as refused:
        CommitLog(KafkaEndpoint(bootstrap, "unique.commits"), timeout=10).ensure()
    message = str(refused.value)
    assert "\n" not in message and "default.replication.factor" in message and "replication factor of 3" in message
    # 2. kafka.commit_topic_replication_factor reaches the commit log through the settings and the container
    settings = load_settings(
        engine="spark",
        source=f"kafka://{bootstrap}/in",
        sink=f"kafka://{bootstrap}/unique",
        dlq=f"kafka://{bootstrap}/dead",
        kafka={"delivery": "exactly-once", "commit_topic_replication_factor": 1},
    )
    container_for(settings).engine().writer.commits.ensure()
    admin, resource = AdminClient({"bootstrap.servers": bootstrap}), ConfigResource("topic", "unique.commits")
    topic = admin.list_topics("unique.commits", timeout=10).topics["unique.commits"]
    assert [len(p.replicas) for p in topic.partitions.values()] == [1]
    config = admin.describe_configs([resource])[resource].result(10)
    assert config["cleanup.policy"].value == "compact"


def test_a_bad_commit_topic_replication_factor_stops_with_one_line():
    with pytest.raises(SettingsError) as refused:
        load_settings(kafka={"commit_topic_replication_factor": 0})
    assert str(refused.value) == (
        "invalid setting kafka.commit_topic_replication_factor "
        "(DEDUP_KAFKA__COMMIT_TOPIC_REPLICATION_FACTOR): Input should be greater than or "
        "equal to 1 (got 0)"
    )
