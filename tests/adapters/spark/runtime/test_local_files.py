"""Hadoop's local file system without processes (``streamdedup.runtime``, set by
``adapters.spark.runtime._session.forkless_local_files`` for a local master): what it reports
and does is what Hadoop's own local file system reports and does."""

from __future__ import annotations

import os

import pytest

from adapters.spark.runtime import FORKLESS_LOCAL_FILES

pytestmark = pytest.mark.spark

MODES = (0o640, 0o755, 0o600, 0o444)


@pytest.fixture
def jvm(spark):
    if not spark.sparkContext.master.startswith("local"):
        pytest.skip("the forkless local file system is set for local masters only")
    return spark._jvm


def hadoop_conf(spark):
    return spark.sparkContext._jsc.hadoopConfiguration()


def file_systems(spark, jvm):
    """(ours, Hadoop's) raw local file systems, initialized alike."""
    uri = jvm.java.net.URI("file:///")
    ours = jvm.streamdedup.runtime.ForklessRawLocalFileSystem()
    hadoops = jvm.org.apache.hadoop.fs.RawLocalFileSystem()
    for fs in (ours, hadoops):
        fs.initialize(uri, hadoop_conf(spark))
    return ours, hadoops


def described(status) -> tuple:
    return (
        status.getPath().toString(),
        status.getLen(),
        status.isDirectory(),
        status.isSymlink(),
        status.getModificationTime(),
        status.getPermission().toShort(),
        status.getOwner(),
        status.getGroup(),
    )


def test_a_local_session_reads_and_writes_local_files_through_it(spark, jvm):
    conf = hadoop_conf(spark)
    for key, value in FORKLESS_LOCAL_FILES.items():
        assert conf.get(key.removeprefix("spark.hadoop.")) == value
    path = jvm.org.apache.hadoop.fs.Path("file:///tmp")
    assert path.getFileSystem(conf).getClass().getName() == "streamdedup.runtime.ForklessLocalFileSystem"
    context = jvm.org.apache.hadoop.fs.FileContext.getFileContext(path.toUri(), conf)
    assert context.getDefaultFileSystem().getClass().getName() == "streamdedup.runtime.ForklessLocalFs"


def test_statuses_and_permissions_are_hadoops(spark, jvm, tmp_path):
    ours, hadoops = file_systems(spark, jvm)
    Path, FsPermission = jvm.org.apache.hadoop.fs.Path, jvm.org.apache.hadoop.fs.permission.FsPermission
    (tmp_path / "sub").mkdir()
    for i, mode in enumerate(MODES):
        for fs, name in ((ours, "ours"), (hadoops, "hadoops")):
            target = Path(str(tmp_path / f"{name}-{i}"))
            fs.create(target, True).close()
            fs.setPermission(target, FsPermission(mode))
            assert os.stat(tmp_path / f"{name}-{i}").st_mode & 0o7777 == mode
        (tmp_path / "sub" / f"f{i}").write_bytes(b"x" * (i * 100))
        os.chmod(tmp_path / "sub" / f"f{i}", mode)
    os.symlink(tmp_path / "sub" / "f1", tmp_path / "sub" / "link")
    directory = Path(str(tmp_path / "sub"))
    assert sorted(map(described, ours.listStatus(directory))) == sorted(map(described, hadoops.listStatus(directory)))
    for name in ("f0", "f3", "link"):
        path = Path(str(tmp_path / "sub" / name))
        assert described(ours.getFileStatus(path)) == described(hadoops.getFileStatus(path))
        assert described(ours.getFileLinkStatus(path)) == described(hadoops.getFileLinkStatus(path))
    assert described(ours.getFileStatus(directory)) == described(hadoops.getFileStatus(directory))
    located = [], []
    for fs, out in zip((ours, hadoops), located):
        listing = fs.listFiles(directory, True)
        while listing.hasNext():
            out.append(described(listing.next()))
    assert sorted(located[0]) == sorted(located[1]) and len(located[0]) == len(MODES) + 1


def test_a_missing_file_is_not_found(spark, jvm, tmp_path):
    from py4j.protocol import Py4JJavaError

    ours, _ = file_systems(spark, jvm)
    missing = jvm.org.apache.hadoop.fs.Path(str(tmp_path / "missing"))
    for call in (ours.getFileStatus, ours.getFileLinkStatus):
        with pytest.raises(Py4JJavaError) as raised:
            call(missing)
        assert raised.value.java_exception.getClass().getName() == "java.io.FileNotFoundException"
    assert not ours.exists(missing)


def test_spark_checkpoint_files_are_written_atomically_and_replaced(spark, jvm, tmp_path):
    conf = hadoop_conf(spark)
    Path = jvm.org.apache.hadoop.fs.Path
    manager = jvm.org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager.create(
        Path(tmp_path.as_uri()), conf
    )
    target = Path(str(tmp_path / "0"))
    for content in (b"first", b"second"):
        out = manager.createAtomic(target, True)
        out.write(bytearray(content))
        out.close()
        assert (tmp_path / "0").read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == [".0.crc", "0"]  # no temporary file left
