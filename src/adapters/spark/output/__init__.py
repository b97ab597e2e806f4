"""Writing a judged micro-batch: the writers per delivery (``writer_for``), the executor
writer and its commit log of markers (exactly-once), Spark's own writers, the dead letter as
Spark columns, the duplicate report as Spark columns (both from the encodings in
``metadata``), and records too large for a Kafka topic."""

from adapters.spark.output.writers import AtLeastOnceWriter, ExactlyOnceWriter, writer_for

__all__ = ["AtLeastOnceWriter", "ExactlyOnceWriter", "writer_for"]
