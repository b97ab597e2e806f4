"""The window-dedup operator's state, read through Spark's state data source (``statestore``).

``read_state`` gives one row per key: ``key`` (``domain.keys``), ``times`` (the live
emissions' event times, s) and ``retention`` (window + lateness, s); an emission expires
at ``time + retention``, as ``domain.state.Emission.expires_at``. Reading never changes
the checkpoint.
"""

from __future__ import annotations

import json

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from adapters.spark.checkpoint.logs import Checkpoint
from adapters.spark.checkpoint.manifest import OPERATOR, read_manifest
from adapters.spark.stream.keys import rule_column
from domain.inspection import StateReport, key_sample
from domain.migration import IncompatibleState


def state_schema(spark: SparkSession) -> str:
    """The current operator's state value schema (the ``Emissions`` bean), e.g. ``struct<retention:bigint,…>``."""
    jvm = spark._jvm
    bean = jvm.streamdedup.spark.Emissions().getClass()
    return jvm.org.apache.spark.sql.Encoders.bean(bean).schema().simpleString()


def read_state(spark: SparkSession, location: str, batch: int | None = None) -> DataFrame:
    """The operator's state after micro-batch ``batch`` (default: the last committed one)."""
    reader = spark.read.format("statestore")
    if batch is not None:
        reader = reader.option("batchId", batch)
    raw = reader.load(location)
    stored = raw.schema["value"].dataType["groupState"].dataType.fieldNames()
    if not {"times", "retention"} <= set(stored):
        raise IncompatibleState(f"the state in {location} has fields {', '.join(stored)}; this version reads "
                                f"{OPERATOR} state with 'times' and 'retention' (no reader for that format)")
    return raw.select(F.col("key.key").alias("key"), F.col("value.groupState.times").alias("times"),
                      F.col("value.groupState.retention").alias("retention"))


def rule_of(key: str = "key"):
    """The rule's name in the key column ``key``."""
    return rule_column(F.col(key))


def inspect_checkpoint(spark: SparkSession, location: str, sample_size: int = 3) -> StateReport:
    """Keys per rule, samples, oldest/newest expiry, state format and bytes on disk of a checkpoint."""
    checkpoint = Checkpoint.at(location)
    report = StateReport(f"spark checkpoint {location}", size_bytes=checkpoint.state_bytes())
    report.details.update(_progress(checkpoint))
    if checkpoint.last_committed() is None:
        return report
    state = read_state(spark, location).withColumn("rule", rule_of())
    for row in state.groupBy("rule").agg(
            F.count(F.lit(1)).alias("keys"), F.min(F.array_min("times") + F.col("retention")).alias("oldest"),
            F.max(F.array_max("times") + F.col("retention")).alias("newest")).collect():
        report.keys_per_rule[row["rule"]] = row["keys"]
        report.note_expiries(row["oldest"], row["newest"])
        samples = state.filter(F.col("rule") == row["rule"]).limit(sample_size).collect()
        report.samples[row["rule"]] = [key_sample(r["key"])[1] for r in samples]
    report.versions[f"{OPERATOR}/{_format(checkpoint)}"] = report.keys
    return report


def _progress(checkpoint: Checkpoint) -> dict:
    manifest = read_manifest(checkpoint.ours)
    details = {"last_committed_batch": checkpoint.last_committed(),
               "watermark": checkpoint.watermark_ms() // 1000, "checkpoint_bytes": checkpoint.total_bytes(),
               "manifest": "present" if manifest else "absent (written by the first run of this version)"}
    if manifest and manifest.migration:
        # the operator judges with the old job's watermark until its own passes it
        details["watermark"] = max(details["watermark"], manifest.migration.get("from_watermark", 0))
        details["migration"] = _migration_status(manifest.migration, details["watermark"])
    return details


def _migration_status(migration: dict, watermark: int) -> str:
    origin = f"{migration['fallback_keys']} keys from {migration['from']} (batch {migration['from_batch']})"
    if migration.get("retired"):
        return f"old state retired at watermark {migration['retired_at_watermark']}: {origin}, no longer consulted"
    if watermark >= migration["retire_at"]:
        return (f"old state expired (watermark {watermark} >= last old expiry {migration['retire_at']}): {origin}; "
                "the next start retires it")
    return f"consulting old state read-only until the watermark reaches {migration['retire_at']}: {origin}"


def _format(checkpoint: Checkpoint) -> str:
    manifest = read_manifest(checkpoint.ours)
    operator = manifest.operators.get(OPERATOR, {}) if manifest else {}
    return str(operator.get("state_format", "unknown"))


def describe_offsets(offsets: list[str]) -> str:
    """A short text for a batch's source offsets (a Kafka topic's partitions or a file log position)."""
    shown = []
    for text in offsets:
        data = json.loads(text)
        shown.append(f"file log {data['logOffset']}" if "logOffset" in data else text)
    return "; ".join(shown)
