"""The driver JVM's class-data archive: the classes a Spark job loads, mapped instead of loaded.

A local driver's JVM loads and verifies some twenty thousand classes of Spark, Catalyst, Hadoop
and RocksDB before its first micro-batch ends: about a quarter of a small job's 20 s from start
to exit on two cores. HotSpot's application class-data sharing (AppCDS, JDK 13+) keeps those
classes, parsed and verified, in an archive a JVM maps at start. The archive is written by one
run (``-XX:ArchiveClassesAtExit``, ``app.spark_class_archive``, run by ``scripts/bootstrap``)
and used by every later driver whose JVM and class path are those it was written for
(``-XX:SharedArchiveFile``).

The archive's name is a hash of what fixes the driver's class path (the launcher builds it from
``spark.driver.extraClassPath``, ``SPARK_CONF_DIR`` and pyspark's jars) and of the JVM: a
changed jar or JDK looks for another archive, and none is used until it is written again. The
JVM checks the archive itself as well; one it cannot use is ignored without a word (the
``-Xlog`` options), and the driver starts as it would without it. Classes from ``spark.jars``
(the operator, the Kafka connector) are loaded by Spark's own class loader and are not archived.

``STREAMDEDUP_CLASS_ARCHIVE``: ``off``, the driver started by this process maps no archive (to
compare, ``bench/startup_bench.py``); ``write``, it writes the archive for its class path when its
JVM exits, to ``<archive>.<pid>.partial`` (``pid``: this Python process), which the writer
renames once that JVM is gone.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from adapters.spark.runtime._jars import cache_dir

ARCHIVE_MODE = "STREAMDEDUP_CLASS_ARCHIVE"  # "write" it at the driver's exit, or "off"; unset: use it if written
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # an unusable archive is ignored, not reported on stdout
PARTIAL = ".partial"


def class_archive(settings: dict[str, str]) -> Path:
    """Where the archive of a local driver started with ``settings`` is (whether written or not)."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    sha = hashlib.sha256()
    for part in (
        pyspark.__version__,
        settings.get("spark.driver.extraClassPath", ""),
        os.environ.get("SPARK_CONF_DIR", ""),
        _java(),
        *sorted(f"{j.name}:{j.stat().st_size}" for j in jars.glob("*.jar")),
    ):
        sha.update(part.encode() + b"\0")
    return cache_dir() / "class-archive" / f"spark-driver-{sha.hexdigest()[:16]}.jsa"


def with_class_archive(settings: dict[str, str]) -> dict[str, str]:
    """``settings`` with the driver's JVM options naming its archive when it is written (or, under
    ``STREAMDEDUP_CLASS_ARCHIVE=write``, writing it at exit; ``off``: unchanged)."""
    mode = os.environ.get(ARCHIVE_MODE, "")
    if mode == "off":
        return settings
    archive = class_archive(settings)
    if mode == "write":
        archive.parent.mkdir(parents=True, exist_ok=True)
        option = f"-XX:ArchiveClassesAtExit={partial_archive(archive, os.getpid())}"
    elif archive.is_file():
        option = f"-XX:SharedArchiveFile={archive}"
    else:
        return settings
    options = settings.get("spark.driver.extraJavaOptions", "")
    return {**settings, "spark.driver.extraJavaOptions": f"{options} {option} {QUIET}".strip()}


def partial_archive(archive: Path, pid: int) -> Path:
    """The file a driver started by process ``pid`` writes ``archive`` to at exit."""
    return archive.with_name(f"{archive.name}.{pid}{PARTIAL}")


def _java() -> str:
    """The JVM the launcher runs (``JAVA_HOME``'s, else the one on ``PATH``), as a real path with its size."""
    home = os.environ.get("JAVA_HOME")
    java = Path(home, "bin", "java") if home else Path(shutil.which("java") or "java")
    try:
        real = java.resolve(strict=True)
    except OSError:
        return str(java)
    return f"{real}:{real.stat().st_size}"
