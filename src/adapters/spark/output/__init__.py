"""Writing a judged micro-batch: the writers per delivery (``writer_for``), the executor
writer and its commit log of markers (exactly-once), Spark's own writers, the dead letter as
Spark columns, the duplicate report as Spark columns (both from the encodings in
``_metadata``), records too large for a Kafka topic, and the JVM sink's hooks for a query run."""

# record formats whose functions share names: exported as modules
from adapters.spark.output import _dead_letters as dead_letters
from adapters.spark.output import _duplicates as duplicates
from adapters.spark.output._executor_writer import (
    BATCHING,
    FAULT_SETTING,
    JVM_SINK,
    PRODUCER_DEFAULTS,
    SINK_SETTING,
    CommitLog,
    ExecutorWriter,
    control_topic_for,
    partition_id,
)
from adapters.spark.output._jvm_sink import SinkHooks
from adapters.spark.output._spark_writer import accounted_records
from adapters.spark.output._writers import AtLeastOnceWriter, ExactlyOnceWriter, writer_for

__all__ = [
    "BATCHING",
    "FAULT_SETTING",
    "JVM_SINK",
    "PRODUCER_DEFAULTS",
    "SINK_SETTING",
    "AtLeastOnceWriter",
    "CommitLog",
    "ExactlyOnceWriter",
    "ExecutorWriter",
    "SinkHooks",
    "accounted_records",
    "control_topic_for",
    "dead_letters",
    "duplicates",
    "partition_id",
    "writer_for",
]
