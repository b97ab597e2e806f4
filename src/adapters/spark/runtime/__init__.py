"""Where the Spark engine runs: the SparkSession and its settings, the jars it needs (the
engine's own, compiled from ``jvm/``, and Spark's Kafka connector), the code archive shipped
to executors, Spark's own log, the start-up checks of inputs and outputs, and the
``kafka.config`` setting as options of Spark's Kafka source and sink."""

from adapters.spark.runtime.jars import PLAIN_EVENT_CLASS, cache_dir, connector_jars, operator_jar
from adapters.spark.runtime.kafka_options import spark_kafka_options
from adapters.spark.runtime.session import (
    build_session,
    require_classes,
    session_started,
    state_rows_tracked,
    state_store_conf,
)
from adapters.spark.runtime.spark_log import SparkLog
from adapters.spark.runtime.startup import require_endpoints

__all__ = [
    "PLAIN_EVENT_CLASS",
    "SparkLog",
    "build_session",
    "cache_dir",
    "connector_jars",
    "operator_jar",
    "require_classes",
    "require_endpoints",
    "session_started",
    "spark_kafka_options",
    "state_rows_tracked",
    "state_store_conf",
]
