"""``StateFiles``: what appeared in a checkpoint's state directory since the last look, and its
size, on a local checkpoint and on a Hadoop file system that is not ``file:``."""

import pytest

from adapters.spark.checkpoint import StateFiles, StateLook
from tests.adapters.spark.conftest import mounted

pytestmark = pytest.mark.spark


def write(path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)


@pytest.mark.parametrize("scheme", ["file", "viewfs"])
def test_a_look_counts_the_files_that_appeared_since_the_last_one(spark, tmp_path, scheme):
    checkpoint = tmp_path / "checkpoint"
    partition = checkpoint / "state" / "0" / "0"
    write(partition / "1.changelog", 100)  # there at the start: not written by this run
    location = str(checkpoint) if scheme == "file" else mounted(spark, checkpoint)
    files = StateFiles.open(spark, location)
    assert files.look() == StateLook(written=0, size=100)

    # 1. a micro-batch: a changelog per partition, and a snapshot uploaded with an SST file; a
    # file still being written and Hadoop's checksums are hidden, not counted
    write(partition / "2.changelog", 40)
    write(checkpoint / "state" / "0" / "1" / "2.changelog", 30)
    write(partition / "2.zip", 60)
    write(partition / "SSTs" / "000008-0b1c.sst", 500)
    write(partition / ".3.changelog.5e2f.tmp", 999)
    write(partition / ".2.changelog.crc", 12)
    assert files.look() == StateLook(written=630, size=730)

    # 2. nothing new; then old versions deleted (past their retention): the size drops
    assert files.look() == StateLook(written=0, size=730)
    (partition / "1.changelog").unlink()
    (partition / "2.zip").unlink()
    assert files.look() == StateLook(written=0, size=570)


def test_a_state_directory_that_does_not_exist_yet_is_empty(spark, tmp_path):
    files = StateFiles.open(spark, str(tmp_path / "new"))
    write(tmp_path / "new" / "state" / "0" / "0" / "1.changelog", 25)
    assert files.look() == StateLook(written=25, size=25)
