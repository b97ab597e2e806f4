"""Moving a Spark job's dedup memory to a new version whose state is keyed or shaped differently.

``plan_migration`` + ``migrate`` (the offline step behind ``dedup state migrate``) prepare a
*new* checkpoint from the old one, which is only read:

* the old job's input position: the end offsets of its last committed micro-batch (Kafka:
  the new query's ``startingOffsets``; a file source: the files it had read, which the
  new query skips);
* the old state, read through Spark's state data source at that batch, its still-live
  emissions exported to ``streamdedup/fallback`` (parquet: ``old_key``, ``fallback`` times,
  ``fallback_owners``, their makers' positions (null where the old format kept none),
  ``fallback_retention``), keyed the old way, spelled as the new job spells keys (a state
  format 1 checkpoint's legacy keys respelled, ``domain._keys.from_legacy``);
* the new manifest, with a ``migration`` section (the key translation per rule, and
  ``retire_at``: the last old expiry);
* the old job's exactly-once identity and commit position (``_identity.inherited_identity``):
  with exactly-once output the new job fences the old job's producer and does not produce
  again a batch the old job committed to Kafka but not to its checkpoint.

``_guard.CheckpointGuard`` applies it while the job runs: each event's old key is derived from its
new key (``domain._migration.KeyTranslation``: the old key fields must be among the new
ones), the fallback is joined to the operator's input (a stream-static join, stateless),
and the operator treats the old emissions as read-only live emissions until they expire;
new emissions are written in the new state only; lateness is judged from at least the old
job's watermark. Once the watermark has passed ``retire_at`` no old emission can be live:
the running query says so and records it in the manifest (``retirement``), and the next
start leaves the fallback out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from adapters.spark.checkpoint._identity import Identity, inherited_identity, write_identity
from adapters.spark.checkpoint._logs import Checkpoint
from adapters.spark.checkpoint._manifest import OPERATOR, Manifest, job_manifest, read_manifest, write_manifest
from adapters.spark.checkpoint._state_reader import FALLBACK, describe_offsets, read_state, rule_of, state_schema
from adapters.spark.checkpoint._watermark_files import rule_watermarks
from adapters.spark.shared import from_legacy_column
from domain import IncompatibleState, KeyTranslation, RuleSet

FILES_READ = "files-read.json"
DEFAULT_OLD_KEY_FIELDS = ("uniqueValue",)
ESCAPED_KEYS_SINCE = 2  # the manifest's state_format from which keys are spelled by domain._keys


@dataclass
class MigrationPlan:
    """What ``migrate`` does: read ``old`` at ``batch``, prepare ``new`` for ``manifest``'s job."""

    old: str
    new: str
    batch: int
    source_offsets: list[str]
    files_read: list[str]
    old_watermark: int
    translations: dict[str, KeyTranslation]
    manifest: Manifest
    keys_per_rule: dict[str, int] = field(default_factory=dict)
    retire_at: int | None = None
    legacy_keys: bool = False  # the old state's keys are in the legacy spelling: respelled on export
    identity: Identity | None = None  # the exactly-once identity the new checkpoint inherits

    def describe(self) -> list[str]:
        keys = sum(self.keys_per_rule.values())
        lines = [
            f"read {self.old} at its last committed batch {self.batch} (watermark {self.old_watermark})",
            f"start the new job at the old job's position: {describe_offsets(self.source_offsets)}"
            + (f" ({len(self.files_read)} files already read are skipped)" if self.files_read else ""),
        ]
        for rule, t in sorted(self.translations.items()):
            old, new = ",".join(t.old_fields), ",".join(t.new_fields)
            action = f"keep rule {rule}'s key ({new})" if old == new else f"translate rule {rule}'s key {old} -> {new}"
            lines.append(f"{action}: {self.keys_per_rule.get(rule, 0)} live old keys")
        if self.legacy_keys:
            lines.append(
                "respell the old keys as the new job spells them (state format 1 -> "
                f"{ESCAPED_KEYS_SINCE}): ordinary keys are unchanged; a key whose values held the "
                "separator \\x1f is ambiguous, matches no new key and expires"
            )
        lines.append(self._identity_step())
        lines.append(f"export {keys} live old keys to {self.new}/streamdedup/{FALLBACK} (consulted read-only)")
        lines.append(
            "retire the old state once the watermark passes "
            + (str(self.retire_at) if self.retire_at is not None else "- (nothing live)")
        )
        return lines

    def _identity_step(self) -> str:
        identity = self.identity
        assert identity is not None and identity.inherited is not None  # set by plan_migration (inherited_identity)
        inherited = identity.inherited
        step = f"carry the exactly-once identity over (transactional id {identity.transactional_id})"
        if inherited["pending"] is None:
            return step
        return (
            f"{step}; the old job's batch {inherited['pending']['batch']}, planned but not committed to its "
            "checkpoint, is judged but not produced again if its commit marker says it reached Kafka"
        )


def plan_migration(
    spark: SparkSession, old: str, new: str, rules: RuleSet, old_key_fields: dict[str, tuple[str, ...]] | None = None
) -> MigrationPlan:
    """Check that ``old`` can be migrated into ``new`` for ``rules``; reads only, writes nothing."""
    source, target = Checkpoint.at(old), Checkpoint.at(new)
    batch = source.last_committed()
    if batch is None:
        raise IncompatibleState(f"cannot migrate from {old}: it has no committed micro-batch (nothing to keep)")
    if target.has_progress():
        raise IncompatibleState(f"cannot migrate into {new}: it already has progress; give a new checkpoint")
    offsets = source.source_offsets(batch)
    stored = read_manifest(source.ours)
    lowest = min(rule_watermarks(source).values(), default=0)  # no old emission a rule still keeps is left out
    plan = MigrationPlan(
        old,
        new,
        batch,
        offsets,
        _files_read(source, offsets),
        lowest,
        _translations(stored, rules, old_key_fields or {}),
        job_manifest(rules, state_schema(spark)),
        legacy_keys=_legacy_keys(stored),
    )
    plan.identity = inherited_identity(source, old, batch)
    live = _live_old_state(spark, plan)
    for row in (
        live.groupBy(rule_of("old_key").alias("rule"))
        .agg(
            F.count(F.lit(1)).alias("keys"), F.max(F.array_max("fallback") + F.col("fallback_retention")).alias("last")
        )
        .collect()
    ):
        plan.keys_per_rule[row["rule"]] = row["keys"]
        plan.retire_at = max(plan.retire_at or row["last"], row["last"])
    return plan


def migrate(spark: SparkSession, plan: MigrationPlan) -> None:
    """Write the fallback, the position and the manifest into the new checkpoint."""
    ours = Checkpoint.at(plan.new).ours
    ours.mkdir(parents=True, exist_ok=True)
    assert plan.identity is not None  # set by plan_migration
    write_identity(Checkpoint.at(plan.new, spark), plan.identity)
    live = plan.retire_at is not None  # no live old emission: nothing to consult, retired at once
    if live:
        _live_old_state(spark, plan).write.mode("overwrite").parquet(str(ours / FALLBACK))
    (ours / FILES_READ).write_text(json.dumps(plan.files_read))
    write_manifest(
        ours,
        plan.manifest.with_migration(
            {
                "from": plan.old,
                "from_batch": plan.batch,
                "from_watermark": plan.old_watermark,
                "source_offsets": plan.source_offsets,
                "files_read": len(plan.files_read),
                "fallback_keys": sum(plan.keys_per_rule.values()),
                "translations": {
                    r: {"old": list(t.old_fields), "new": list(t.new_fields)}
                    for r, t in sorted(plan.translations.items())
                },
                "retire_at": plan.retire_at if live else plan.old_watermark,
                "retired": not live,
                **({} if live else {"retired_at_watermark": plan.old_watermark}),
            }
        ),
    )


def _translations(old: Manifest | None, rules: RuleSet, given: dict[str, tuple[str, ...]]) -> dict[str, KeyTranslation]:
    translations = {}
    for name, rule in rules.rules.items():
        old_fields = (
            given.get(name) or (old.key_fields(name) if old else None) or (None if old else DEFAULT_OLD_KEY_FIELDS)
        )
        if old_fields is None:
            continue
        try:
            translations[name] = KeyTranslation(tuple(old_fields), tuple(rule.key_fields))
        except ValueError as exc:
            raise IncompatibleState(
                f"rules.{name}.key_fields: {exc} ({','.join(old_fields)} -> {','.join(rule.key_fields)})"
            ) from None
    return translations


def _files_read(checkpoint: Checkpoint, offsets: list[str]) -> list[str]:
    positions = [json.loads(o) for o in offsets]
    if len(positions) == 1 and "logOffset" in positions[0]:
        return checkpoint.files_read(0, positions[0]["logOffset"])
    return []


def _legacy_keys(manifest: Manifest | None) -> bool:
    """Whether a checkpoint's state keys are in the legacy spelling (no manifest: written before manifests)."""
    operator = manifest.operators.get(OPERATOR, {}) if manifest else {}
    return operator.get("state_format", 1) < ESCAPED_KEYS_SINCE


def _live_old_state(spark: SparkSession, plan: MigrationPlan) -> DataFrame:
    state = read_state(spark, plan.old, plan.batch)
    owners = F.coalesce(F.col("owners"), F.array().cast("array<string>"))  # format 2 kept none: nulls
    paired = F.zip_with("times", owners, lambda t, owner: F.struct(t.alias("t"), owner.alias("owner")))
    live = F.filter(paired, lambda e: e["t"] + F.col("retention") > F.lit(plan.old_watermark))
    key = from_legacy_column(F.col("key")) if plan.legacy_keys else F.col("key")
    return state.select(
        key.alias("old_key"),
        F.transform(live, lambda e: e["t"]).alias("fallback"),
        F.transform(live, lambda e: e["owner"]).alias("fallback_owners"),
        F.col("retention").alias("fallback_retention"),
    ).filter(F.size("fallback") > 0)
