"""The engine's JVM code, built from source on first use, and the jars Spark needs beside it.

The Java sources are in ``adapters/spark/jvm/streamdedup/<package>/``, each Java package named
after the Python package it serves: ``streamdedup.stream`` (adapters.spark.stream: the operator
``WindowDedup``, the domain's judgement as a ``transformWithState`` processor that runs per key
inside the JVM, so no Python runs per key; ``PlainEvent``, the parser's fast path, and
``TrailingContent``, a check of its strict path: ``_parse``), ``streamdedup.checkpoint``
(``StateFiles``), ``streamdedup.output`` (the executors' Kafka writer) and
``streamdedup.runtime`` (Hadoop's local file system without forks: ``_session``). All but
``runtime`` make the operator jar, compiled with the JDK's ``javac`` against pyspark's own jars
and cached under ``.cache/jars/streamdedup-spark/``, named by a hash of the sources (their
paths and bytes), so a changed source is rebuilt and a stale jar is never used.
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
JAVA_PACKAGES = SOURCES / "streamdedup"  # one directory per Java package streamdedup.<name>
KAFKA_SOURCES = JAVA_PACKAGES / "output"  # the executors' Kafka writer: compiled in only with the connector
RUNTIME_SOURCES = JAVA_PACKAGES / "runtime"  # a jar of its own: it goes on the driver's classpath
OPERATOR_CLASS = "streamdedup.stream.WindowDedup"
PLAIN_EVENT_CLASS = "streamdedup.stream.PlainEvent"
TRAILING_CONTENT_CLASS = "streamdedup.stream.TrailingContent"


def cache_dir() -> Path:
    return Path(os.environ.get("STREAMDEDUP_CACHE", ROOT / ".cache"))


def connector_jars() -> list[Path]:
    """Spark's Kafka connector and the Kafka client it brings (``scripts/bootstrap --services``)."""
    return sorted((cache_dir() / "jars" / "spark-kafka").glob("*.jar"))


def operator_jar() -> Path:
    """The operator jar, compiled now if the cache has no jar for the current sources. The
    executor-side Kafka writer (``streamdedup.output``) is compiled in when the Kafka
    connector's jars are there to compile it against."""
    kafka = connector_jars()
    return _built("streamdedup-spark", operator_sources(kafka=bool(kafka)), kafka)


def operator_sources(kafka: bool) -> list[Path]:
    """The operator jar's sources: every package but ``streamdedup.runtime``, and
    ``streamdedup.output`` only when ``kafka`` (the connector is there to compile it against)."""
    return sorted(
        p
        for p in JAVA_PACKAGES.rglob("*.java")
        if RUNTIME_SOURCES not in p.parents and (kafka or KAFKA_SOURCES not in p.parents)
    )


def local_files_jar() -> Path:
    """The jar of ``streamdedup.runtime``: Hadoop's local file system without its processes
    (``adapters.spark.runtime._session.forkless_local_files``), compiled now if needed."""
    return _built("streamdedup-hadoop", sorted(RUNTIME_SOURCES.rglob("*.java")), [])


def _built(name: str, java_files: list[Path], extra: list[Path]) -> Path:
    digest = _digest(java_files)
    jar = cache_dir() / "jars" / name / f"{name}-{digest}.jar"
    if not jar.exists():
        _compile(java_files, jar, extra)
    return jar


def _digest(java_files: list[Path]) -> str:
    """The sources' hash: each file's path under ``SOURCES`` and bytes, so a moved file is a change too."""
    sha = hashlib.sha256()
    for path in java_files:
        data = path.read_bytes()
        sha.update(f"{path.relative_to(SOURCES).as_posix()}\0{len(data)}\0".encode())
        sha.update(data)
    return sha.hexdigest()[:12]


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
