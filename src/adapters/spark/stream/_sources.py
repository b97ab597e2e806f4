"""Streaming sources, chosen by URI, each giving the columns ``_plan.RECORD_COLUMNS``.

* ``kafka://host:port[,host:port]/topic[?option=value&...]``: Spark's own Kafka connector;
  options are passed through (e.g. ``startingOffsets=earliest``, ``maxOffsetsPerTrigger``).
  Records are read ``read_committed`` (``kafka.isolation.level``): an upstream transaction's
  records are judged once it commits, never when it aborts; ``isolation.level`` in
  ``kafka.config`` (or ``kafka.isolation.level`` on the URI) overrides it.
  Arrival order ``ord`` is the offset within a partition (order across partitions is
  undefined in Kafka; ties break on the partition number, so replays decide the same way);
  ``file_time`` is 0.
* ``jsonl:/dir`` or a plain directory path: every file in the directory, one record per
  line (ended by ``\\n``, ``\\r\\n`` or ``\\r``), blank lines (``domain._events.is_blank_line``)
  skipped as framing. ``source`` is the file's path; ``offset`` and
  ``ord`` give the record's place in its file (split byte offset + line index in the split;
  Spark's text source has no line numbers and streaming plans allow no row counter);
  ``file_time`` is the file's modification time (ms). Files are read in the order Spark's file
  source takes them (modification time, then path), so arrival order is ``ARRIVAL_ORDER``:
  (file_time, source, ord). Small files packed into one input partition come largest first
  there: lateness counts each file's split on its own (``RunningNewest``).

A Kafka source reads its partitions in at most ``tasks`` Spark tasks (``source_tasks``): a
task per topic-partition beyond the cores only waits for a second wave, and each task costs
its launch, its deserialization and its share of the stage's fixed work at every micro-batch
(docs/design/latency.md, "Source tasks"). A task reads its partitions one after the other,
each in offset order, so what a partition's records see of the ones before them
(``RunningNewest``) is unchanged.

``arrived`` is when a record arrived: its Kafka record's timestamp, or for files the time of
the micro-batch that read them (``metrics._latency``, the end-to-end latency).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from adapters.spark.shared import Endpoint, batch_timestamp, parse_uri
from adapters.spark.stream._whitespace import BLANK

PARTITION_BITS = 12
ARRIVAL_ORDER = ("file_time", "source", "ord")  # the columns that order records as they arrived
# fetch.max.wait.ms 0: a task reads only offsets that exist, and its consumer's next fetch, sent
# as a poll returns, would otherwise hold the broker connection (and the offset lookup each
# poll makes behind it) until a new record arrives or 500 ms pass: up to 500 ms per task over
# a partition that has gone quiet (docs/design/latency.md)
KAFKA_SOURCE_DEFAULTS = {
    "startingOffsets": "earliest",
    "failOnDataLoss": "true",
    "kafka.isolation.level": "read_committed",
    "kafka.fetch.max.wait.ms": "0",
}


def read_stream(
    spark: SparkSession,
    uri: str,
    max_records_per_batch: int | None = None,
    kafka_options: dict[str, str] | None = None,
    tasks: int | None = None,
) -> DataFrame:
    """``kafka_options``: client settings (``kafka.``-prefixed) for a Kafka source, under the URI's own;
    ``tasks``: the most Spark tasks a Kafka source's micro-batch is read in (None: one per
    topic-partition)."""
    endpoint = parse_uri(uri)
    if endpoint.kind == "kafka":
        return read_kafka(spark, endpoint, max_records_per_batch, kafka_options or {}, tasks)
    return read_jsonl(spark, endpoint.location, endpoint.options)


def source_tasks(spark: SparkSession, configured: int | None) -> int | None:
    """The most tasks a Kafka source is read in: ``configured`` when given; else, on a local
    master (``local[N]``, ``local[*]``), its cores; else None (a task per topic-partition: a
    cluster's cores are not known when the query starts, its executors may not have registered)."""
    if configured:
        return configured
    context = spark.sparkContext
    return context.defaultParallelism if (context.master or "").startswith("local") else None


def read_kafka(
    spark: SparkSession,
    endpoint: Endpoint,
    max_records_per_batch: int | None,
    kafka_options: dict[str, str],
    tasks: int | None = None,
) -> DataFrame:
    """The topic's records, in at most ``tasks`` tasks; the defaults (``KAFKA_SOURCE_DEFAULTS``)
    under the client settings, under the URI's."""
    reader = spark.readStream.format("kafka").options(
        **kafka_source_options(endpoint, max_records_per_batch, kafka_options)
    )
    records = reader.load()
    if tasks:  # narrow: no shuffle, a task reads whole topic-partitions one after another
        records = records.coalesce(tasks)
    return records.select(
        "value",
        F.col("key").alias("kafka_key"),
        F.col("topic").alias("source"),
        "partition",
        "offset",
        (F.shiftleft(F.col("offset"), PARTITION_BITS) + F.col("partition")).alias("ord"),
        F.lit(0).cast("long").alias("file_time"),
        F.col("timestamp").alias("arrived"),
    )


def kafka_source_options(
    endpoint: Endpoint, max_records_per_batch: int | None, kafka_options: dict[str, str]
) -> dict[str, str]:
    """The options of Spark's Kafka source: ``KAFKA_SOURCE_DEFAULTS`` under the client settings
    (``kafka_options``), under the URI's own options."""
    assert endpoint.topic is not None  # a Kafka endpoint (parse_uri) always names its topic
    options = {"kafka.bootstrap.servers": endpoint.location, "subscribe": endpoint.topic}
    if max_records_per_batch:
        options["maxOffsetsPerTrigger"] = str(max_records_per_batch)
    return {**options, **KAFKA_SOURCE_DEFAULTS, **kafka_options, **endpoint.options}


def read_jsonl(spark: SparkSession, directory: str, options: dict[str, str]) -> DataFrame:
    reader = spark.readStream.format("text")
    for key, value in options.items():
        reader = reader.option(key, value)
    lines = reader.load(directory).select(
        F.col("value").cast("binary").alias("value"),
        F.col("_metadata.file_path").alias("source"),
        F.col("_metadata.file_block_start").alias("block_start"),
        F.unix_millis(F.col("_metadata.file_modification_time")).alias("file_time"),
    )
    numbered = lines.mapInArrow(number_lines, "value binary, source string, ord long, file_time long")
    records = numbered.filter(~F.col("value").cast("string").rlike(BLANK))
    return records.select(
        "value",
        F.lit(None).cast("binary").alias("kafka_key"),
        "source",
        F.lit(0).alias("partition"),
        F.col("ord").alias("offset"),
        "ord",
        "file_time",
        batch_timestamp().alias("arrived"),
    )  # the micro-batch's time: when it read them


def number_lines(batches):
    """Arrival order for file lines: the split's byte offset plus the line's index in its split.

    Runs once per partition over whole Arrow batches (never per key). A partition may hold
    several splits (small files packed together, or one split of a large file after another
    file); the index restarts at each split, and a split's lines are fewer than its bytes, so
    the order follows the file whichever partitions its splits land in. Across files, order
    is the file's ``file_time`` and path (passed through).
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    previous_split, previous_run = None, 0
    for batch in batches:
        count = batch.num_rows
        if not count:
            continue
        starts, sources = batch.column("block_start"), batch.column("source")
        new_split = np.empty(count, dtype=bool)
        new_split[0] = (starts[0].as_py(), sources[0].as_py()) != previous_split
        if count > 1:
            head, tail = _slice_pair(starts, count), _slice_pair(sources, count)
            new_split[1:] = pc.or_(pc.not_equal(*head), pc.not_equal(*tail)).to_numpy(zero_copy_only=False)
        positions = np.arange(count, dtype=np.int64)
        run_starts = np.maximum.accumulate(np.where(new_split, positions, -previous_run))
        ord_ = pc.add(starts, pa.array(positions - run_starts, pa.int64()))
        previous_split = (starts[count - 1].as_py(), sources[count - 1].as_py())
        previous_run = int(count - run_starts[-1])
        yield pa.RecordBatch.from_arrays(
            [batch.column("value"), sources, ord_, batch.column("file_time")],
            names=["value", "source", "ord", "file_time"],
        )


def _slice_pair(column, count: int):
    """Each row after the first beside the row before it."""
    return column.slice(1), column.slice(0, count - 1)
