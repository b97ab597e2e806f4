"""Reading a Structured Streaming checkpoint's logs, in the formats Spark 4 writes them."""

import json

from adapters.spark.checkpoint import Checkpoint

CONF = {"spark.sql.streaming.stateStore.providerClass": "org.example.RocksDBStateStoreProvider"}


def write(path, *lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))


def checkpoint_with_two_batches(root):
    for batch, (log_offset, watermark) in enumerate([(0, 1_700_000_010_000), (1, 1_700_000_500_000)]):
        write(root / "offsets" / str(batch), "v1", json.dumps({"batchWatermarkMs": 0, "conf": CONF}),
              json.dumps({"logOffset": log_offset}))
        write(root / "commits" / str(batch), "v1", json.dumps({"nextBatchWatermarkMs": watermark}))
        write(root / "offsets" / f".{batch}.crc", "ignored")
    # the file source's log: batch 0 compacted with earlier ones, batch 1 on its own, batch 2 not committed
    write(root / "sources" / "0" / "0.compact", "v1",
          json.dumps({"path": "file:///in/a.jsonl", "timestamp": 1, "batchId": 0}))
    write(root / "sources" / "0" / "1", "v1", json.dumps({"path": "file:///in/b.jsonl", "timestamp": 2, "batchId": 1}))
    write(root / "sources" / "0" / "2", "v1", json.dumps({"path": "file:///in/c.jsonl", "timestamp": 3, "batchId": 2}))
    write(root / "offsets" / "2", "v1", json.dumps({"batchWatermarkMs": 0, "conf": CONF}),
          json.dumps({"logOffset": 2}))


def test_the_position_and_watermark_are_the_last_committed_batchs(tmp_path):
    checkpoint_with_two_batches(tmp_path)
    ckpt = Checkpoint.at(f"file://{tmp_path}")
    assert ckpt.last_committed() == 1 and ckpt.has_progress()
    assert ckpt.source_offsets(1) == ['{"logOffset": 1}']
    assert ckpt.watermark_ms() == 1_700_000_500_000
    assert ckpt.files_read(0, 1) == ["file:///in/a.jsonl", "file:///in/b.jsonl"]
    assert ckpt.recorded_conf() == CONF


def test_a_new_checkpoint_has_no_progress(tmp_path):
    ckpt = Checkpoint.at(str(tmp_path / "new"))
    assert ckpt.last_committed() is None and not ckpt.has_progress()
    assert ckpt.watermark_ms() == 0 and ckpt.recorded_conf() == {} and ckpt.state_bytes() == 0


def test_only_local_checkpoints_are_read():
    import pytest
    with pytest.raises(ValueError, match="only local checkpoints"):
        Checkpoint.at("hdfs://namenode:8020/checkpoints/dedup")
