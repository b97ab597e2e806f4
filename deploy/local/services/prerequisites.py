"""Where the things ``scripts/bootstrap-services.sh`` installs are: java, redis-server, prometheus, the jar sets
(Kafka broker, Spark's Kafka connector, HDFS)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .process import ServiceError

REPO_ROOT = Path(__file__).resolve().parents[3]
JARS_ROOT = REPO_ROOT / ".cache" / "jars"
DEFAULT_KAFKA_JARS = JARS_ROOT / "kafka-broker"
DEFAULT_SPARK_KAFKA_JARS = JARS_ROOT / "spark-kafka"
DEFAULT_HDFS_JARS = JARS_ROOT / "hadoop-hdfs"  # NameNode + DataNode (deploy/local/jars/hadoop-hdfs/pom.xml)
DEFAULT_SERVICES_DIR = REPO_ROOT / ".cache" / "local-services"
BOOTSTRAP_HINT = "run scripts/bootstrap-services.sh first"


def java() -> str:
    """``$JAVA_HOME/bin/java``, else ``java`` on PATH; raises ServiceError if there is none."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise ServiceError(f"no java on PATH (Java 17+ needed): {BOOTSTRAP_HINT}")
    return found


def redis_server() -> str:
    for candidate in (shutil.which("redis-server"), "/usr/bin/redis-server", "/usr/sbin/redis-server"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise ServiceError(f"redis-server not found: {BOOTSTRAP_HINT}")


def prometheus_server() -> str:
    """The Prometheus server of Debian's package ``prometheus`` (its system service stays off)."""
    for candidate in (shutil.which("prometheus"), "/usr/bin/prometheus"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise ServiceError(f"prometheus not found: {BOOTSTRAP_HINT}")


def spark_kafka_jars(jars_dir: Path | None = None) -> list[str]:
    """Absolute paths of Spark's Kafka connector jars, for ``spark.jars`` (comma-joined)."""
    directory = Path(jars_dir or DEFAULT_SPARK_KAFKA_JARS)
    jars = sorted(str(p.resolve()) for p in directory.glob("*.jar"))
    if not jars:
        raise ServiceError(f"no jars in {directory}: {BOOTSTRAP_HINT}")
    return jars
