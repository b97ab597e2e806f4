"""The engine's JVM code, built from source on first use, and the jars Spark needs beside it.

``adapters/spark/jvm/streamdedup/spark/WindowDedup.java`` is the domain's judgement as a
``flatMapGroupsWithState`` function: it runs per key inside the JVM, so no Python runs per
key. ``PlainEvent.java`` is the parser's fast path, ``TrailingContent.java`` a check of its strict path (adapters.spark.stream._parse). The jar is compiled with the JDK's ``javac`` against pyspark's own jars and cached
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

from adapters.spark.shared import SparkSetupError

SOURCES = Path(__file__).resolve().parents[1] / "jvm"
ROOT = Path(__file__).resolve().parents[4]
KAFKA_SOURCES = SOURCES / "streamdedup" / "spark" / "kafka"
HADOOP_SOURCES = SOURCES / "streamdedup" / "hadoop"  # a jar of its own: it goes on the driver's classpath
OPERATOR_CLASS = "streamdedup.spark.WindowDedup"
PLAIN_EVENT_CLASS = "streamdedup.spark.PlainEvent"
TRAILING_CONTENT_CLASS = "streamdedup.spark.TrailingContent"


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
    java_files = sorted(
        p for p in (SOURCES / "streamdedup" / "spark").rglob("*.java") if kafka or KAFKA_SOURCES not in p.parents
    )
    return _built("streamdedup-spark", java_files, kafka)


def local_files_jar() -> Path:
    """The jar of ``streamdedup.hadoop``: Hadoop's local file system without its processes
    (``adapters.spark.runtime._session.forkless_local_files``), compiled now if needed."""
    return _built("streamdedup-hadoop", sorted(HADOOP_SOURCES.rglob("*.java")), [])


def _built(name: str, java_files: list[Path], extra: list[Path]) -> Path:
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in java_files)).hexdigest()[:12]
    jar = cache_dir() / "jars" / name / f"{name}-{digest}.jar"
    if not jar.exists():
        _compile(java_files, jar, extra)
    return jar


def _compile(java_files: list[Path], jar: Path, extra: list[Path]) -> None:
    javac = _javac()
    import pyspark

    classpath = os.pathsep.join([str(Path(pyspark.__file__).parent / "jars" / "*"), *map(str, extra)])
    with tempfile.TemporaryDirectory() as classes:
        result = subprocess.run(
            [javac, "-nowarn", "--release", "17", "-cp", classpath, "-d", classes, *map(str, java_files)],
            capture_output=True,
            text=True,
        )
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
        raise SparkSetupError(
            "the Spark engine needs a JDK (javac) once, to build its operator jar; "
            "install openjdk-17-jdk-headless or set JAVA_HOME"
        )
    return found
