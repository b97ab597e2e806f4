"""The Spark engine with its checkpoint on a real HDFS (``spark.checkpoint=hdfs://…``).

The session's HDFS (NameNode + DataNode, ``deploy/local/services/hdfs.py``, or the one
``DEDUP_TEST_HDFS`` names) holds every test's checkpoint in a directory of its own. What the
engine reads and writes beside Spark's own files there (the manifest and its guard, the
state-row count, the exactly-once identity and query id, ``dedup state inspect`` and
``dedup state migrate``) goes through Hadoop's FileSystem API, as for a local checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import Counter

import pytest

from adapters.spark.checkpoint import STATE_FORMAT, Checkpoint, HadoopPath, read_manifest
from app import StreamSpec, generate_parts, main
from domain import IncompatibleState
from tests.adapters.spark.checkpoint.test_spark_evolution import V1, V2, Stream, event
from tests.adapters.spark.output.test_spark_eos import markers
from tests.adapters.spark.runtime.test_spark_app import assert_exact_output
from tests.support.kafka_io import create_topics, produce, unique

pytestmark = pytest.mark.spark
ACCOUNTED = ("in", "out", "duplicates", "dead_lettered")


# The HDFS client's wait before it asks again whether a file it closed is complete (400 ms by
# default, doubling): a small checkpoint file is then written in ~90 ms instead of ~310 (docs/operations/checkpoints.md).
CLIENT_CONF = {
    "dfs.client.block.write.locateFollowingBlock.initial.delay.ms": "50",
    "dfs.client.block.write.locateFollowingBlock.retries": "10",
}


@pytest.fixture
def hdfs_dir(spark, hdfs_uri) -> str:
    """A new directory of this test's own on the session's HDFS (the client tuned as the operations
    guide advises, before Spark's first HDFS client is made)."""
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    for name, value in CLIENT_CONF.items():
        conf.set(name, value)
    return f"{hdfs_uri}/tests/{uuid.uuid4().hex[:12]}"


@pytest.fixture
def stream(spark, tmp_path):
    return Stream(spark, tmp_path)


def hdfs_digest(location: str) -> str:
    """Names and bytes of every file under ``location``: equal digests mean an untouched directory."""
    digest, pending = hashlib.sha256(), [HadoopPath.at(location)]
    while pending:
        path = pending.pop()
        for entry in sorted(path.iterdir(), key=str):
            if entry.is_dir():
                pending.append(entry)
            else:
                digest.update(str(entry).encode() + b"\0" + entry.read_bytes())
    return digest.hexdigest()


def test_a_stream_on_an_hdfs_checkpoint_restarts_with_its_dedup_memory(stream, hdfs_dir):
    checkpoint = f"{hdfs_dir}/checkpoint"
    # 1. first run: a and w emitted, a's repeat dropped
    stream.add(event("a1", "a", "APP", 0), event("w1", "w", "WEB", 0), event("a2", "a", "APP", 5))
    counts, ids = stream.run_version(V1, checkpoint, "out")
    assert (counts["in"], counts["out"], counts["duplicates"], ids) == (3, 2, 1, ["a1", "w1"])

    # 2. a restart on the same checkpoint still knows a and w; only the new key n is emitted
    stream.add(event("w2", "w", "WEB", 100), event("a3", "a", "APP", 10), event("n1", "n", "APP", 12))
    counts, ids = stream.run_version(V1, checkpoint, "out")
    assert (counts["in"], counts["out"], counts["duplicates"], ids) == (3, 1, 2, ["n1"])

    # 3. the output holds each unique event once; the checkpoint and the engine's files are on HDFS
    assert sorted(
        json.loads(line)["id"]
        for batch in sorted((stream.dir / "out").glob("batch=*"))
        for part in batch.glob("part-*")
        for line in part.read_text().splitlines()
    ) == ["a1", "n1", "w1"]
    ckpt = Checkpoint.at(checkpoint)
    assert str(ckpt.path).startswith("hdfs://") and ckpt.last_committed() == 1
    assert read_manifest(ckpt.ours).key_fields("WEB") == ("uniqueValue",)
    assert json.loads((ckpt.ours / "state_rows.json").read_text()) == {"rows": 3}


def test_state_inspect_and_migrate_work_on_hdfs_checkpoints(stream, hdfs_dir, tmp_path, capsys):
    v1, v2 = f"{hdfs_dir}/v1", f"{hdfs_dir}/v2"
    stream.add(event("w1", "w", "WEB", 0), event("a1", "a", "APP", 0), event("a2", "a", "APP", 1))
    stream.run_version(V1, v1, "out-v1")

    # 1. inspect reads the state, its progress and its size on HDFS
    assert main(["state", "inspect", "--state", f"spark:{v1}", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["keys_per_rule"] == {"APP": 1, "WEB": 1} and report["format_versions"] == {
        f"window-dedup/{STATE_FORMAT}": 2
    }
    assert report["details"]["last_committed_batch"] == 0 and report["details"]["manifest"] == "present"
    assert 0 < report["size_bytes"] < report["details"]["checkpoint_bytes"]

    # 2. migrate prepares a new HDFS checkpoint for v2 (WEB keyed by uniqueValue + type) from v1's
    config = tmp_path / "v2.yaml"
    config.write_text("rules:\n  WEB: {window: 10m, key_fields: [uniqueValue, type]}\n")
    assert main(["state", "migrate", "--from", f"spark:{v1}", "--to", f"spark:{v2}", "--config", str(config)]) == 0
    assert f"done; start the new job on spark:{v2}" in capsys.readouterr().out
    assert read_manifest(Checkpoint.at(v2).ours).migration["fallback_keys"] == 2

    # 3. v2 on the migrated checkpoint still drops repeats of what v1 emitted
    stream.add(event("w2", "w", "WEB", 100), event("a3", "a", "APP", 10), event("n1", "n", "WEB", 100))
    counts, ids = stream.run_version(V2, v2, "out-v2")
    assert (counts["in"], counts["duplicates"], ids) == (3, 2, ["n1"])


def test_an_incompatible_change_is_refused_on_hdfs_and_the_checkpoint_left_untouched(stream, hdfs_dir):
    checkpoint = f"{hdfs_dir}/ckpt"
    stream.add(event("w1", "w", "WEB", 0))
    stream.run_version(V1, checkpoint, "out")
    before = hdfs_digest(checkpoint)

    stream.add(event("w2", "w", "WEB", 300))
    with pytest.raises(IncompatibleState) as refused:
        stream.run_version(V2, checkpoint, "out")
    message = str(refused.value)
    assert "rules.WEB.key_fields changed from uniqueValue to uniqueValue,type" in message
    assert f"dedup state migrate --from spark:{checkpoint} --to spark:{checkpoint}-migrated" in message
    assert hdfs_digest(checkpoint) == before


def forget_last_commit(checkpoint: str) -> int:
    """Delete the last micro-batch's commit, as a driver killed between Kafka's commit and Spark's would."""
    commits = Checkpoint.at(checkpoint).path / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    return last


@pytest.mark.kafka
def test_kafka_to_spark_to_kafka_exactly_once_with_an_hdfs_checkpoint(
    kafka_spark, dedup, kafka_bootstrap, hdfs_dir, tmp_path
):
    topics = {role: unique(f"hdfs-{role}") for role in ("in", "out", "dlq")}
    create_topics(kafka_bootstrap, *topics.values())
    uri = {role: f"kafka://{kafka_bootstrap}/{topic}" for role, topic in topics.items()}
    parts, expected = generate_parts(StreamSpec(uniques=800, seed=20), 2)
    env = {
        "DEDUP_SPARK__CHECKPOINT": f"{hdfs_dir}/checkpoint",
        "DEDUP_SPARK__AVAILABLE_NOW": "true",
        "DEDUP_KAFKA__DELIVERY": "exactly-once",
    }
    # 1. two runs, the late records produced for the second; before it, the first run's last batch is
    #    left committed to Kafka but not to the checkpoint: the restart replays it and produces nothing again
    summaries = []
    for run, batch in enumerate((parts[:-1], parts[-1:])):
        if run:
            forget_last_commit(env["DEDUP_SPARK__CHECKPOINT"])
        produce(kafka_bootstrap, topics["in"], [r for part in batch for r in part])
        summary = tmp_path / f"summary-{run}.json"
        dedup(
            "--engine",
            "spark",
            "--source",
            uri["in"],
            "--sink",
            uri["out"],
            "--dlq",
            uri["dlq"],
            "--summary-json",
            str(summary),
            **env,
        )
        summaries.append(json.loads(summary.read_text()))
    # 2. read_committed: each unique event once, each dead letter once with its reason
    assert_exact_output(kafka_bootstrap, topics, [r for part in parts for r in part], expected.late)
    # 3. the commit markers (one per batch and output partition, under the identity kept on HDFS) carry
    #    the accounting of the whole stream; each run's summary balances
    identity = json.loads((Checkpoint.at(env["DEDUP_SPARK__CHECKPOINT"]).ours / "identity").read_text())
    totals = Counter()
    for batch in markers(kafka_bootstrap, topics["out"], identity["transactional_id"]).values():
        for marker in batch:
            totals.update(marker["counts"])
    assert {k: totals[k] for k in ACCOUNTED} == {k: expected.as_accounting()[k] for k in ACCOUNTED}
    assert all(s["in"] == s["out"] + s["duplicates"] + s["dead_lettered"] + s["skipped"] for s in summaries)
