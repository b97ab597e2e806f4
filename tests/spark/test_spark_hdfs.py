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

import pytest

from adapters.spark.checkpoint import Checkpoint
from adapters.spark.hadoop_files import HadoopPath
from adapters.spark.manifest import read_manifest
from domain.migration import IncompatibleState
from tests.spark.test_spark_evolution import V1, V2, Stream, event

pytestmark = pytest.mark.spark


@pytest.fixture
def hdfs_dir(hdfs_uri) -> str:
    """A new directory of this test's own on the session's HDFS."""
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
    assert sorted(json.loads(line)["id"] for batch in sorted((stream.dir / "out").glob("batch=*"))
                  for part in batch.glob("part-*") for line in part.read_text().splitlines()) == ["a1", "n1", "w1"]
    ckpt = Checkpoint.at(checkpoint)
    assert str(ckpt.path).startswith("hdfs://") and ckpt.last_committed() == 1
    assert read_manifest(ckpt.ours).key_fields("WEB") == ("uniqueValue",)
    assert json.loads((ckpt.ours / "state_rows.json").read_text()) == {"rows": 3}
