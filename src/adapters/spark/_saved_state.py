"""A Spark job's checkpoint as a ``SavedState``: its state read through Spark's state data
source (``checkpoint._state_reader``), its key fields from its manifest, its rules' watermarks
from its watermark files, and migrated to a new checkpoint (``checkpoint._migration``). A
session is started (``runtime._session``): the checkpoint is read through its Hadoop file
systems, wherever it lives."""

from __future__ import annotations

from collections.abc import Sequence

from adapters.spark.checkpoint import (
    Checkpoint,
    inspect_checkpoint,
    key_emissions,
    migrate,
    plan_migration,
    read_manifest,
    rule_watermark,
)
from adapters.spark.runtime import build_session
from adapters.spark.shared import SparkSetupError
from domain import Emission, RuleSet, StateReport, redact_uri

SCHEME = "spark:"


class CheckpointState:
    """The checkpoint at ``location``; ``SparkSetupError`` when there is none."""

    def __init__(self, location: str):
        self.location = location
        self.spark = build_session()
        if not Checkpoint.at(location, self.spark).path.exists():
            raise SparkSetupError(f"invalid setting state: no checkpoint at {location}")
        self.name = f"spark checkpoint {location}"

    def report(self, sample_size: int) -> StateReport:
        return inspect_checkpoint(self.spark, self.location, sample_size)

    def recorded_key_fields(self, rule: str) -> tuple[str, ...] | None:
        manifest = read_manifest(Checkpoint.at(self.location).ours)
        return (manifest.key_fields(rule) or None) if manifest else None

    def emissions(self, keys: Sequence[str]) -> dict[str, tuple[Emission, ...]]:
        return key_emissions(self.spark, self.location, list(keys))

    def clock(self, rule: str, now: int) -> tuple[int, str]:
        watermark = rule_watermark(self.location, rule, now)
        if watermark is None:
            return 0, f"rule {rule} has no watermark in the checkpoint yet: nothing has expired"
        return watermark, f"rule {rule}'s watermark in the checkpoint"

    def migrate_to(
        self, target: str, rules: RuleSet, old_key_fields: dict[str, tuple[str, ...]], dry_run: bool
    ) -> list[str]:
        if not target.startswith(SCHEME):
            raise SparkSetupError(
                "invalid setting --to: a Spark checkpoint migrates to a new spark:CHECKPOINT_DIR, "
                f"got {redact_uri(target)!r}"
            )
        plan = plan_migration(self.spark, self.location, target.removeprefix(SCHEME), rules, old_key_fields)
        if not dry_run:
            migrate(self.spark, plan)
        return plan.describe()

    def close(self) -> None:
        pass
