"""The engine's JVM code, built from source on first use.

``jvm/streamdedup/spark/WindowDedup.java`` is the domain's judgement as a
``flatMapGroupsWithState`` function: it runs per key inside the JVM, so no Python runs per
key. ``PlainEvent.java`` is the parser's fast path (adapters.spark.parse). The jar is compiled with the JDK's ``javac`` against pyspark's own jars and cached
under ``.cache/jars/streamdedup-spark/``, named by a hash of the sources, so a changed
source is rebuilt and a stale jar is never used.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from adapters.spark.state_rows import state_row_counter
from domain.errors import SetupError

SOURCES = Path(__file__).resolve().parent / "jvm"
ROOT = Path(__file__).resolve().parents[3]
KAFKA_SOURCES = SOURCES / "streamdedup" / "spark" / "kafka"
OPERATOR_CLASS = "streamdedup.spark.WindowDedup"
KAFKA_WRITER_CLASS = "streamdedup.spark.kafka.KafkaBatchWriter"
PLAIN_EVENT_CLASS = "streamdedup.spark.PlainEvent"


class SparkSetupError(SetupError):
    """The Spark engine cannot start: a tool, jar or setting is missing. Retrying cannot help."""


def cache_dir() -> Path:
    return Path(os.environ.get("STREAMDEDUP_CACHE", ROOT / ".cache"))


def connector_jars() -> list[Path]:
    """Spark's Kafka connector and the Kafka client it brings (``scripts/bootstrap --services``)."""
    return sorted((cache_dir() / "jars" / "spark-kafka").glob("*.jar"))


def operator_jar() -> Path:
    """The operator jar, compiled now if the cache has no jar for the current sources. The
    executor-side Kafka writer (``streamdedup.spark.kafka``) is compiled in when the Kafka
    connector's jars are there to compile it against."""
    kafka = connector_jars()
    java_files = sorted(p for p in SOURCES.rglob("*.java") if kafka or KAFKA_SOURCES not in p.parents)
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in java_files)).hexdigest()[:12]
    jar = cache_dir() / "jars" / "streamdedup-spark" / f"streamdedup-spark-{digest}.jar"
    if not jar.exists():
        _compile(java_files, jar, kafka)
    return jar


def _compile(java_files: list[Path], jar: Path, extra: list[Path]) -> None:
    javac = _javac()
    import pyspark

    classpath = os.pathsep.join([str(Path(pyspark.__file__).parent / "jars" / "*"), *map(str, extra)])
    with tempfile.TemporaryDirectory() as classes:
        result = subprocess.run([javac, "-nowarn", "--release", "17", "-cp", classpath, "-d", classes,
                                 *map(str, java_files)], capture_output=True, text=True)
        if result.returncode != 0:
            raise SparkSetupError(f"javac failed for the Spark operator:\n{result.stderr[-2000:]}")
        _write_jar(Path(classes), jar)


def _write_jar(classes: Path, jar: Path) -> None:
    jar.parent.mkdir(parents=True, exist_ok=True)
    partial = jar.with_suffix(".tmp")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
        for path in sorted(classes.rglob("*.class")):
            archive.write(path, path.relative_to(classes).as_posix())
    partial.replace(jar)


def _javac() -> str:
    home = os.environ.get("JAVA_HOME")
    candidate = Path(home, "bin", "javac") if home else None
    if candidate and candidate.exists():
        return str(candidate)
    found = shutil.which("javac")
    if not found:
        raise SparkSetupError("the Spark engine needs a JDK (javac) once, to build its operator jar; "
                              "install openjdk-17-jdk-headless or set JAVA_HOME")
    return found


def judge(df, key_column: str, idle_timeout_ms: int, state_rows=None, horizons=None, newest=None):
    """Apply the JVM operator to ``df`` (a streaming DataFrame); returns ``df`` plus ``verdict``.

    ``df`` needs long columns ``t``, ``ord``, ``window``, ``lateness`` and string columns
    ``rule`` and ``lane``. ``state_rows``: the ``StateRowCount`` that counts the operator's keys;
    ``horizons``/``newest``: the ``RuleHorizons`` and ``NewestTimes`` of
    ``adapters.spark.watermarks`` (new ones, unused by anyone else, if None).
    """
    from pyspark.sql import DataFrame

    spark = df.sparkSession
    package = spark._jvm.streamdedup.spark
    counter = state_rows if state_rows is not None else state_row_counter(spark)
    horizons = horizons if horizons is not None else package.RuleHorizons()
    if newest is None:
        newest = package.NewestTimes()
        spark.sparkContext._jsc.sc().register(newest, "streamdedup.newest_times")
    return DataFrame(package.WindowDedup.judge(df._jdf, key_column, int(idle_timeout_ms), counter, horizons, newest),
                     spark)


def running_newest(df):
    """``df`` plus ``seen``: each judged row's newest rule time so far in its input partition
    (``RunningNewest``: a Kafka partition's records, in offset order)."""
    from pyspark.sql import DataFrame

    spark = df.sparkSession
    return DataFrame(spark._jvm.streamdedup.spark.RunningNewest.apply(df._jdf), spark)
