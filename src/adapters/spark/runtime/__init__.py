"""Where the Spark engine runs: the SparkSession and its settings, the jars it needs (the
engine's own, compiled from ``jvm/``, and Spark's Kafka connector), the driver JVM's
class-data archive, the code archive shipped to executors, Spark's own log, the start-up checks of inputs and outputs, and the
``kafka.config`` setting as options of Spark's Kafka source and sink."""

from adapters.spark.runtime._class_archive import (
    ARCHIVE_MODE,
    PARTIAL,
    class_archive,
    partial_archive,
    with_class_archive,
)
from adapters.spark.runtime._code_archive import ARCHIVE_PREFIX, PACKAGES, SOURCE_ROOT, code_archive
from adapters.spark.runtime._jars import (
    PLAIN_EVENT_CLASS,
    TRAILING_CONTENT_CLASS,
    cache_dir,
    local_files_jar,
    operator_jar,
    operator_sources,
)
from adapters.spark.runtime._kafka_options import spark_kafka_options
from adapters.spark.runtime._rule_metering import RuleRuns, reset_rule_metering, rule_metering
from adapters.spark.runtime._session import (
    DEFAULT_CONF,
    EXCLUDED_RULES,
    FORKLESS_LOCAL_FILES,
    LOG_CONF,
    TRACK_ROWS,
    UNUSED_OPTIMIZER_RULES,
    build_session,
    classpath_jars,
    connector_jars,
    local_class_archive,
    on_loopback,
    python_files,
    require_classes,
    session_started,
    state_rows_tracked,
    state_store_conf,
    stop_session,
)
from adapters.spark.runtime._spark_log import FILE_CONF, SparkLog
from adapters.spark.runtime._startup import require_endpoints

__all__ = [
    "ARCHIVE_MODE",
    "ARCHIVE_PREFIX",
    "DEFAULT_CONF",
    "EXCLUDED_RULES",
    "FILE_CONF",
    "FORKLESS_LOCAL_FILES",
    "LOG_CONF",
    "PACKAGES",
    "PARTIAL",
    "PLAIN_EVENT_CLASS",
    "SOURCE_ROOT",
    "TRACK_ROWS",
    "TRAILING_CONTENT_CLASS",
    "UNUSED_OPTIMIZER_RULES",
    "RuleRuns",
    "SparkLog",
    "build_session",
    "cache_dir",
    "class_archive",
    "classpath_jars",
    "code_archive",
    "connector_jars",
    "local_class_archive",
    "local_files_jar",
    "on_loopback",
    "operator_jar",
    "operator_sources",
    "partial_archive",
    "python_files",
    "require_classes",
    "require_endpoints",
    "reset_rule_metering",
    "rule_metering",
    "session_started",
    "spark_kafka_options",
    "state_rows_tracked",
    "state_store_conf",
    "stop_session",
    "with_class_archive",
]
