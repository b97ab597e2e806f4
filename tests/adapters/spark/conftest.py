"""One SparkSession for the whole test session, and a helper that runs the engine on files."""

from __future__ import annotations

import json
import os
import signal
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "src"))

pyspark = pytest.importorskip("pyspark")

from adapters.spark import build_spark_engine  # noqa: E402
from adapters.spark.runtime import build_session, connector_jars  # noqa: E402
from app import main  # noqa: E402
from domain import Duplicate, Policies, RuleSet  # noqa: E402
from domain import dead_letters as dead_letter_codec  # noqa: E402
from domain import duplicates as duplicate_codec  # noqa: E402
from tests.support.spark_jvm import EXECUTOR_TEST_JVM  # noqa: E402

SESSION_MASTER = "DEDUP_TEST_SESSION_MASTER"


@pytest.fixture(scope="session")
def spark():
    """The session's SparkSession: ``local[2]``, or the master in ``DEDUP_TEST_SESSION_MASTER``
    (tests/adapters/spark/cluster runs tables of these tests on its standalone cluster that way)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # the driver keeps C2: this JVM runs every test of the Spark adapter, some 25 minutes (tests.support.spark_jvm)
    session = build_session(os.environ.get(SESSION_MASTER, "local[2]"), "streamdedup-tests", conf=EXECUTOR_TEST_JVM)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def kafka_spark(spark):
    if not connector_jars():
        pytest.skip("Spark's Kafka connector jars are not in .cache/jars/spark-kafka (scripts/bootstrap --services)")
    return spark


@dataclass
class Result:
    counts: dict[str, int]
    out: list[dict]
    dead_letters: list[dict]
    duplicates: list[Duplicate] = field(default_factory=list)  # the duplicate reports, decoded

    @property
    def out_ids(self) -> list[str]:
        return sorted(e["id"] for e in self.out)

    def reasons(self) -> dict[bytes, str]:
        """Dead letters by original value (each document decoded whole): value -> reason."""
        return {dead_letter_codec.from_document(d).record.value: d["reason"] for d in self.dead_letters}


class FileRun:
    """Writes each batch as one JSONL file and runs the engine over them, one file per micro-batch
    (``files_per_batch``: how many files a micro-batch reads; None: all the new ones)."""

    def __init__(self, spark, tmp_path: Path, files_per_batch: int | None = 1):
        self.spark, self.dir = spark, tmp_path
        self.input = tmp_path / "in"
        self.input.mkdir()
        self.files = 0
        self.files_per_batch = files_per_batch

    def add(self, *lines: str | bytes | dict) -> None:
        path = self.input / f"{self.files:04d}.jsonl"
        data = b"".join(_line(item) + b"\n" for item in lines)
        path.write_bytes(data)
        os.utime(path, (1_000_000 + self.files, 1_000_000 + self.files))
        self.files += 1

    def run(
        self,
        rules: RuleSet | None = None,
        state_provider: str = "rocksdb",
        metrics=None,
        conf: dict[str, str] | None = None,
        **settings,
    ) -> Result:
        """``settings``: more of ``build_spark_engine``'s (e.g. ``state``, a Redis URL)."""
        engine = self.engine(
            rules,
            state_provider=state_provider,
            metrics=metrics,
            conf=conf or {},
            duplicates=str(self.dir / "dups"),
            **settings,
        )
        counts = engine.run(available_now=True).as_dict()
        return Result(
            counts,
            _read(self.dir / "out"),
            _read(self.dir / "dlq"),
            [duplicate_codec.from_document(d) for d in _read(self.dir / "dups")],
        )

    def run_reports(self, directory: str) -> list[Duplicate]:
        """The duplicate reports written to ``directory`` under this run's, decoded."""
        return [duplicate_codec.from_document(d) for d in _read(self.dir / directory)]

    def line_of(self, source: str, offset: int) -> bytes:
        """The record the Spark file source read at ``offset`` of ``source`` (a file of one split: its line index)."""
        return Path(source.removeprefix("file:")).read_bytes().splitlines()[offset]

    @property
    def source(self) -> str:
        limit = f"?maxFilesPerTrigger={self.files_per_batch}" if self.files_per_batch else ""
        return f"jsonl:{self.input}{limit}"

    def engine(
        self,
        rules: RuleSet | None = None,
        policies: Policies | None = None,
        sink: str = "out",
        dead_letters: str = "dlq",
        checkpoint: str = "checkpoint",
        **settings,
    ):
        """The engine as production builds it (``build_spark_engine``), over this run's files;
        ``checkpoint``: a directory under this run's, or a URI."""
        location = checkpoint if "://" in checkpoint else str(self.dir / checkpoint)
        return build_spark_engine(
            rules or RuleSet(),
            policies or Policies(),
            source=self.source,
            sink=str(self.dir / sink),
            dead_letters=str(self.dir / dead_letters),
            checkpoint=location,
            master=self.spark.sparkContext.master,
            spark=self.spark,
            **settings,
        )


def _line(item) -> bytes:
    if isinstance(item, dict):
        return json.dumps(item).encode()
    return item if isinstance(item, bytes) else item.encode()


def _read(directory: Path) -> list[dict]:
    return [
        json.loads(line)
        for path in sorted(directory.glob("batch=*/part-*"))
        for line in path.read_text().splitlines()
        if line
    ]


@pytest.fixture
def files(spark, tmp_path):
    return FileRun(spark, tmp_path)


def mounted(spark, target: Path) -> str:
    """A ``viewfs://`` location of the local directory ``target``: a Hadoop file system other than
    ``file:`` (Hadoop's ViewFileSystem, its mount point ``/mnt`` on ``target``'s parent), no cluster."""
    table = f"t{uuid.uuid4().hex[:8]}"
    target.parent.mkdir(parents=True, exist_ok=True)
    spark.sparkContext._jsc.hadoopConfiguration().set(f"fs.viewfs.mounttable.{table}.link./mnt", target.parent.as_uri())
    return f"viewfs://{table}/mnt/{target.name}"


@pytest.fixture
def dedup(spark, monkeypatch):
    """``dedup run`` in this process (sharing the session's SparkSession); signal handlers restored."""
    for name in [k for k in os.environ if k.startswith("DEDUP_")]:
        monkeypatch.delenv(name)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

    def run(*args, **env):
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        assert main(["run", "--no-progress", *args]) == 0

    yield run
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


def spellings(spark, directory: Path) -> list[str]:
    """Four spellings of one directory, as a user may give ``spark.checkpoint``: relative (to the
    JVM's working directory, which Spark resolves against), ``./relative/``, absolute, ``file://``."""
    relative = os.path.relpath(directory, spark._jvm.System.getProperty("user.dir"))
    return [relative, f"./{relative}/", str(directory), f"file://{directory}"]
