"""Reading a Structured Streaming checkpoint's logs, in the formats Spark 4 writes them, and
the engine's own files in it, through Hadoop's file systems (local and not)."""

import json

import pytest

from adapters.spark.checkpoint import Checkpoint, HadoopPath
from tests.adapters.spark.conftest import mounted, spellings

pytestmark = pytest.mark.spark

CONF = {"spark.sql.streaming.stateStore.providerClass": "org.example.RocksDBStateStoreProvider"}


def write(path, *lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))


def checkpoint_with_two_batches(root):
    for batch, (log_offset, watermark) in enumerate([(0, 1_700_000_010_000), (1, 1_700_000_500_000)]):
        write(
            root / "offsets" / str(batch),
            "v1",
            json.dumps({"batchWatermarkMs": 0, "conf": CONF}),
            json.dumps({"logOffset": log_offset}),
        )
        write(root / "commits" / str(batch), "v1", json.dumps({"nextBatchWatermarkMs": watermark}))
        write(root / "offsets" / f".{batch}.crc", "ignored")
    # the file source's log: batch 0 compacted with earlier ones, batch 1 on its own, batch 2 not committed
    write(
        root / "sources" / "0" / "0.compact",
        "v1",
        json.dumps({"path": "file:///in/a.jsonl", "timestamp": 1, "batchId": 0}),
    )
    write(root / "sources" / "0" / "1", "v1", json.dumps({"path": "file:///in/b.jsonl", "timestamp": 2, "batchId": 1}))
    write(root / "sources" / "0" / "2", "v1", json.dumps({"path": "file:///in/c.jsonl", "timestamp": 3, "batchId": 2}))
    write(root / "offsets" / "2", "v1", json.dumps({"batchWatermarkMs": 0, "conf": CONF}), json.dumps({"logOffset": 2}))


def test_the_position_and_watermark_are_the_last_committed_batchs(spark, tmp_path):
    checkpoint_with_two_batches(tmp_path)
    ckpt = Checkpoint.at(f"file://{tmp_path}")
    assert ckpt.last_committed() == 1 and ckpt.has_progress()
    assert ckpt.source_offsets(1) == ['{"logOffset": 1}']
    assert ckpt.watermark_ms() == 1_700_000_500_000
    assert ckpt.files_read(0, 1) == ["file:///in/a.jsonl", "file:///in/b.jsonl"]
    assert ckpt.recorded_conf() == CONF


def test_a_new_checkpoint_has_no_progress(spark, tmp_path):
    ckpt = Checkpoint.at(str(tmp_path / "new"))
    assert ckpt.last_committed() is None and not ckpt.has_progress()
    assert ckpt.watermark_ms() == 0 and ckpt.recorded_conf() == {} and ckpt.state_bytes() == 0


def test_the_engines_files_go_through_a_file_system_that_is_not_file(spark, tmp_path):
    location = mounted(spark, tmp_path / "mount")
    ours = Checkpoint.at(location).ours
    assert str(ours).startswith("viewfs://")
    # 1. written atomically (no partial file left), read back, listed, replaced and removed
    (ours / "manifest.json").write_text('{"v": 1}')
    (ours / "manifest.json").write_text('{"v": 2}')
    assert (tmp_path / "mount" / "streamdedup" / "manifest.json").read_text() == '{"v": 2}'
    assert (ours / "manifest.json").read_text() == '{"v": 2}' and ours.is_dir()
    assert [p.name for p in ours.glob("*.json")] == ["manifest.json"]
    assert not any("partial" in p.name for p in ours.iterdir())
    (ours / "manifest.json").unlink()
    assert not (ours / "manifest.json").exists() and ours.glob("*.json") == []
    # 2. a missing file reads as pathlib says it
    with pytest.raises(FileNotFoundError):
        (ours / "identity").read_text()


def test_a_relative_location_is_the_one_spark_resolves(spark, tmp_path):
    assert {str(HadoopPath.at(s)) for s in spellings(spark, tmp_path / "ckpt")} == {f"file:{tmp_path}/ckpt"}


def test_a_lease_left_unreadable_by_a_kill_is_taken_over_once_it_is_stale(spark, tmp_path):
    # kill -9 while the lease was being replaced leaves its bytes and Hadoop's .owner.crc apart:
    # every read is a checksum error, so it ages from its last write instead of blocking forever
    import os
    import time

    from adapters.spark.checkpoint import CheckpointLease

    first = CheckpointLease(str(tmp_path / "checkpoint"), timeout=2)
    first.take(spark)
    lease_file = tmp_path / "checkpoint" / "streamdedup" / "owner"
    left = lease_file.read_text()  # what the holder had written when it was killed
    first.release()
    HadoopPath.at(f"file://{lease_file}").write_text(left)  # its bytes and Hadoop's checksum, as it left them
    assert (lease_file.parent / ".owner.crc").exists()
    lease_file.write_text(left.replace('"owner"', '"OWNER"'))  # the checksum no longer fits
    os.utime(lease_file, (time.time() - 10, time.time() - 10))

    second = CheckpointLease(str(tmp_path / "checkpoint"), timeout=2)
    second.take(spark)
    try:
        assert json.loads(lease_file.read_text())["owner"] == second.owner
    finally:
        second.release()
