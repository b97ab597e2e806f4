"""The window-dedup operator's state, read through Spark's state data source (``statestore``).

``read_state`` gives one row per key: ``key`` (``domain._keys``), ``times`` (the live
emissions' event times, s), ``retention`` (window + lateness, s) and ``owners`` (the source
position token of the record that made each emission; null in a state format 2 checkpoint,
which did not keep them); an emission expires at ``time + retention``, as
``domain._state.Emission.expires_at``. Reading never changes the checkpoint.
"""

from __future__ import annotations

import json
from typing import Any, cast

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from adapters.spark.checkpoint._logs import Checkpoint
from adapters.spark.checkpoint._manifest import OPERATOR, read_manifest
from adapters.spark.checkpoint._watermark_files import restored, rule_watermarks
from adapters.spark.shared import rule_column
from domain import Emission, IncompatibleState, StateReport, decode_key, encode_key, key_sample

FALLBACK = "fallback"  # where a migration exports the old state the new job consults (``checkpoint._migration``)


def state_schema(spark: SparkSession) -> str:
    """The current operator's state value schema (the ``Emissions`` bean), e.g. ``struct<retention:bigint,…>``."""
    jvm = spark._jvm
    assert jvm is not None  # a running session's JVM
    bean = jvm.streamdedup.stream.Emissions().getClass()
    return jvm.org.apache.spark.sql.Encoders.bean(bean).schema().simpleString()


def read_state(spark: SparkSession, location: str, batch: int | None = None) -> DataFrame:
    """The operator's state after micro-batch ``batch`` (default: the last committed one).

    State formats 4 and 5 are a ``transformWithState`` value state (``Emissions`` under
    ``WindowDedup.STATE``; format 5's expiry queues are another state variable, not read here);
    formats 1–3 were ``flatMapGroupsWithState``'s group state: both are read (a migration reads the old).

    Since Spark 4.2 loading a RocksDB snapshot reports to the driver's state store coordinator,
    which the session's streaming query manager registers when first asked for: a process that
    runs no query (``dedup state explain``, ``migrate``) asks for it here, or the read fails."""
    spark.streams  # noqa: B018 - registers the state store coordinator
    reader = spark.read.format("statestore")
    if batch is not None:
        reader = reader.option("batchId", batch)
    timers = _kept_by_transform_with_state(spark, location)
    if timers:
        jvm = spark._jvm
        assert jvm is not None  # a running session's JVM
        reader = reader.option("stateVarName", jvm.streamdedup.stream.WindowDedup.STATE)
    raw = reader.load(location)
    value = cast(StructType, raw.schema["value"].dataType)  # the state's value: a struct (so is groupState)
    held = "value" if timers else "value.groupState"
    stored = (value if timers else cast(StructType, value["groupState"].dataType)).fieldNames()
    if not {"times", "retention"} <= set(stored):
        raise IncompatibleState(
            f"the state in {location} has fields {', '.join(stored)}; this version reads "
            f"{OPERATOR} state with 'times' and 'retention' (no reader for that format)"
        )
    owners = F.col(f"{held}.owners") if "owners" in stored else F.lit(None).cast("array<string>")
    key = F.col("key.value") if timers else F.col("key.key")
    return raw.select(
        key.alias("key"),
        F.col(f"{held}.times").alias("times"),
        F.col(f"{held}.retention").alias("retention"),
        owners.alias("owners"),
    )


def _kept_by_transform_with_state(spark: SparkSession, location: str) -> bool:
    """Whether the checkpoint's operator is a ``transformWithState`` (state format 4 on)."""
    names = {
        row["operatorName"]
        for row in spark.read.format("state-metadata").load(location).select("operatorName").collect()
    }
    return any(name.startswith("transformWithState") for name in names)


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
    for row in (
        state.groupBy("rule")
        .agg(
            F.count(F.lit(1)).alias("keys"),
            F.min(F.array_min("times") + F.col("retention")).alias("oldest"),
            F.max(F.array_max("times") + F.col("retention")).alias("newest"),
        )
        .collect()
    ):
        report.keys_per_rule[row["rule"]] = row["keys"]
        report.note_expiries(row["oldest"], row["newest"])
        samples = state.filter(F.col("rule") == row["rule"]).limit(sample_size).collect()
        report.samples[row["rule"]] = [key_sample(r["key"])[1] for r in samples]
    report.versions[f"{OPERATOR}/{_format(checkpoint)}"] = report.keys
    return report


def _progress(checkpoint: Checkpoint) -> dict:
    manifest = read_manifest(checkpoint.ours)
    details: dict[str, Any] = {
        "last_committed_batch": checkpoint.last_committed(),
        "watermark": min(rule_watermarks(checkpoint).values(), default=0),
        "checkpoint_bytes": checkpoint.total_bytes(),
        "manifest": "present" if manifest else "absent (written by the first run of this version)",
    }
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
        return (
            f"old state expired (watermark {watermark} >= last old expiry {migration['retire_at']}): {origin}; "
            "the next start retires it"
        )
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


def key_emissions(spark: SparkSession, location: str, keys: list[str]) -> dict[str, tuple[Emission, ...]]:
    """The emissions the checkpoint's state keeps for each of ``keys`` (after its last committed
    batch), and those of a migration's old state it still consults; an emission of a state format
    that kept no owners has owner ``""`` (position unknown)."""
    if Checkpoint.at(location).last_committed() is None:
        return {}
    rows = read_state(spark, location).where(F.col("key").isin(keys)).collect()
    found = _fallback_emissions(spark, location, keys)
    for row in rows:
        owners = row["owners"] or [""] * len(row["times"])
        found[row["key"]] = found.get(row["key"], ()) + tuple(
            Emission(t, t + row["retention"], owner or "") for t, owner in zip(row["times"], owners)
        )
    return found


def _fallback_emissions(spark: SparkSession, location: str, keys: list[str]) -> dict[str, tuple[Emission, ...]]:
    """During a migration (``checkpoint._migration``), the old job's emissions the running job still
    consults for ``keys`` (read-only; a position where the old state kept it); none once the old state retired."""
    checkpoint = Checkpoint.at(location)
    manifest = read_manifest(checkpoint.ours)
    migration = manifest.migration if manifest else None
    if not migration or migration.get("retired"):
        return {}
    old_keys = {}
    for key in keys:
        rule, values = decode_key(key)
        translation = migration.get("translations", {}).get(rule)
        old_keys[
            key
            if translation is None
            else encode_key(rule, [values[translation["new"].index(name)] for name in translation["old"]])
        ] = key
    table = spark.read.parquet(str(checkpoint.ours / FALLBACK)).where(F.col("old_key").isin(list(old_keys)))
    found = {}
    for row in table.collect():
        owners = row.asDict().get("fallback_owners")
        found[old_keys[row["old_key"]]] = tuple(
            Emission(t, t + row["fallback_retention"], owner or "")
            for t, owner in zip(row["fallback"], owners or [None] * len(row["fallback"]))
        )
    return found


def rule_watermark(location: str, rule: str, now: float) -> int | None:
    """``rule``'s watermark as the checkpoint's job left it (``watermark_files``); None while it has none."""
    return restored(Checkpoint.at(location)).of(rule, now)
