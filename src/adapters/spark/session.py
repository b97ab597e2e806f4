"""Building the SparkSession: the edge where Spark's settings live.

One session per process. The operator jar and, when present, the pre-fetched Kafka
connector jars (``.cache/jars/spark-kafka/``, see scripts/bootstrap-services.sh) go on
the classpath; without them the Kafka source and sink are unavailable and say so.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from adapters.spark.jvm import SparkSetupError, cache_dir, operator_jar

STATE_PROVIDERS = {
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "memory": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
}

DEFAULT_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.variant.allowDuplicateKeys": "true",
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    # RocksDB memory is bounded for the whole executor, not per state store instance.
    "spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage": "true",
    "spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB": "512",
    "spark.sql.streaming.stateStore.rocksdb.writeBufferCacheRatio": "0.5",
    "spark.sql.streaming.stateStore.rocksdb.highPriorityPoolRatio": "0.1",
    # A processing-time timeout makes every idle trigger run a no-data batch (and
    # availableNow never finish); idle keys are instead checked when data arrives.
    "spark.sql.streaming.noDataMicroBatches.enabled": "false",
}


def kafka_jars() -> list[Path]:
    return sorted((cache_dir() / "jars" / "spark-kafka").glob("*.jar"))


def state_store_conf(provider: str) -> dict[str, str]:
    """The SQL settings selecting the state store; they take effect when a query starts."""
    if provider not in STATE_PROVIDERS:
        raise SparkSetupError(f"state provider must be one of {sorted(STATE_PROVIDERS)}, got {provider!r}")
    return {"spark.sql.streaming.stateStore.providerClass": STATE_PROVIDERS[provider]}


def build_session(master: str = "local[*]", app_name: str = "streamdedup",
                  conf: dict[str, str] | None = None):
    """The process's SparkSession (created on first call, then reused as Spark does)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    jars = [operator_jar(), *kafka_jars()]
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    builder = builder.config("spark.jars", ",".join(str(j) for j in jars))
    return builder.getOrCreate()


def has_kafka(spark) -> bool:
    jars = spark.sparkContext.getConf().get("spark.jars", "")
    return "spark-sql-kafka" in jars
