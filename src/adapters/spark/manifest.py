"""The stable identity of the job's stateful part, kept in its checkpoint.

``streamdedup/manifest.json`` in the checkpoint names the stateful operator (``window-dedup``,
Spark operator id 0), its state format and schema, and what shapes its state per rule: the
key fields (the state is keyed by them) and the window and lateness (informational).
Nothing stateless is in it, so adding, removing or changing a parsing, filtering or output
step never touches the checkpoint's identity.

``compare(checkpoint, job)`` lists the differences; a change is *incompatible* when the
old state cannot be read or looked up by the new job: another operator or state format,
or a rule whose key fields changed. Windows, lateness and rules added or removed are
compatible (the state holds emission times; a removed rule's keys simply expire).

The manifest is read and written through the checkpoint's own Hadoop file system
(``hadoop_files``), so a checkpoint on HDFS or S3 is checked exactly as a local one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from adapters.spark.hadoop_files import HadoopPath
from domain.rules import RuleSet

OPERATOR = "window-dedup"
STATE_FORMAT = 2  # Emissions{retention: long, times: array<long>} per key (domain.keys; 1: legacy key spelling)
MANIFEST_VERSION = 1


@dataclass(frozen=True)
class Manifest:
    operators: dict[str, dict]
    rules: dict[str, dict]
    migration: dict | None = None

    def as_json(self) -> str:
        return json.dumps({"manifest": MANIFEST_VERSION, "operators": self.operators, "rules": self.rules,
                           "migration": self.migration}, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "Manifest":
        data = json.loads(text)
        return cls(data["operators"], data["rules"], data.get("migration"))

    def with_migration(self, migration: dict | None) -> "Manifest":
        return Manifest(self.operators, self.rules, migration)

    def key_fields(self, rule: str) -> tuple[str, ...] | None:
        found = self.rules.get(rule)
        return tuple(found["key_fields"]) if found else None


def job_manifest(rules: RuleSet, state_schema: str | None = None) -> Manifest:
    """The manifest of a job running ``rules`` with the current operator."""
    operator = {"id": 0, "state_format": STATE_FORMAT}
    if state_schema:
        operator["state_schema"] = state_schema
    return Manifest({OPERATOR: operator}, {
        name: {"key_fields": list(rule.key_fields), "window": rule.window, "lateness": rule.lateness,
               "time_basis": rule.time_basis.value}
        for name, rule in sorted(rules.rules.items())})


@dataclass(frozen=True)
class Change:
    setting: str
    old: object
    new: object
    compatible: bool

    def describe(self) -> str:
        return f"{self.setting} changed from {_show(self.old)} to {_show(self.new)}"


@dataclass
class Comparison:
    changes: list[Change] = field(default_factory=list)

    @property
    def incompatible(self) -> list[Change]:
        return [c for c in self.changes if not c.compatible]


def compare(checkpoint: Manifest, job: Manifest) -> Comparison:
    """Every difference between the checkpoint's manifest and the job's, incompatible ones first."""
    result = Comparison()
    for name in sorted(set(checkpoint.operators) | set(job.operators)):
        old, new = checkpoint.operators.get(name), job.operators.get(name)
        for part in ("id", "state_format", "state_schema"):
            before, after = (old or {}).get(part), (new or {}).get(part)
            if before != after and not (part == "state_schema" and None in (before, after) and old and new):
                result.changes.append(Change(f"stateful operator {name} {part}", before, after, False))
    for name in sorted(set(checkpoint.rules) | set(job.rules)):
        old, new = checkpoint.rules.get(name), job.rules.get(name)
        if old is None or new is None:
            result.changes.append(Change(f"rules.{name}", old and "present", new and "present", True))
            continue
        for part in ("key_fields", "window", "lateness", "time_basis"):
            if old.get(part) != new.get(part):
                result.changes.append(Change(f"rules.{name}.{part}", old.get(part), new.get(part),
                                             part != "key_fields"))
    result.changes.sort(key=lambda c: c.compatible)
    return result


def refusal(location: str, changes) -> str:
    """The one-line refusal: what changed, and what to do."""
    what = "; ".join(c.describe() for c in changes)
    return (f"checkpoint {location} does not fit this job: {what}. Its state cannot be used as it is; to keep "
            f"the dedup memory run `dedup state migrate --from {location} --to NEW_CHECKPOINT` and start "
            f"with spark.checkpoint=NEW_CHECKPOINT, or restore the previous setting. The checkpoint was not modified")


def read_manifest(ours: HadoopPath) -> Manifest | None:
    """The manifest in a checkpoint's ``streamdedup/`` directory (``Checkpoint.ours``); None when it has none."""
    path = ours / "manifest.json"
    return Manifest.from_json(path.read_text()) if path.exists() else None


def write_manifest(ours: HadoopPath, manifest: Manifest) -> None:
    """Write through the checkpoint's file system, atomically (a partial manifest is never left behind)."""
    (ours / "manifest.json").write_text(manifest.as_json())


def _show(value: object) -> str:
    if value is None:
        return "absent"
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)
