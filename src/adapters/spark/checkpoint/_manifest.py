"""The stable identity of the job's stateful part, kept in its checkpoint.

``streamdedup/manifest.json`` in the checkpoint names the stateful operator (``window-dedup``,
Spark operator id 0), its state format and schema, and what shapes its state per rule: the
key fields (the state is keyed by them) and the window and lateness (informational).
Nothing stateless is in it, so adding, removing or changing a parsing, filtering or output
step never touches the checkpoint's identity.

It also records the job's **endpoints**, what the checkpoint's positions and outputs refer
to: per role (``source``, ``sink``, ``dlq``, ``notifications``) a Kafka cluster's servers and
topics, or a directory's qualified path, and nothing else (no credentials, no options: the
manifest holds no secret). ``foreign(checkpoint, job)`` lists the roles whose endpoint is
another one: a Kafka endpoint is the same while it shares a server and a topic with the
recorded one (listing another broker of the cluster, or adding a topic, is not another
job), a directory only when its path is equal. A checkpoint with a foreign endpoint belongs
to another job (``CheckpointOfAnotherJob``); one whose manifest records no endpoints (written
before they were recorded) is adopted and records them.

``compare(checkpoint, job)`` lists the differences; a change is *incompatible* when the
old state cannot be read or looked up by the new job: another operator or state format
(but a format the job resumes as it is, ``RESUMED_IN_PLACE``),
another number of state partitions (Spark keeps the first start's number in the checkpoint
and would ignore the new one), or a rule whose key fields changed. Windows, lateness and rules added or removed are
compatible (the state holds emission times; a removed rule's keys simply expire).

The manifest is read and written through the checkpoint's own Hadoop file system
(``hadoop_files``), so a checkpoint on HDFS or S3 is checked exactly as a local one.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field, replace

from adapters.spark.checkpoint._hadoop_files import HadoopPath
from domain import RuleSet

OPERATOR = "window-dedup"
STATE_FORMAT = 7  # format 6, each moment's log cut in lists by its keys' hash (ExpiryQueue.SHARDS)
# 6: format 5, its queues logging the keys that leave them too: a key due is removed unread;
# 5: format 4's keys, woken through the operator's own expiry queues (streamdedup.stream.ExpiryQueue);
# 4: transformWithState: Emissions{owners, retention, times, wake} per key (domain._keys), a timer per key;
# 3: flatMapGroupsWithState's Emissions{owners, retention, times}; 2: no owners (each emission's
# source position); 1: also the legacy key spelling
# (checkpoint's, job's) state formats the job resumes as they are: formats 5 to 7 read format 4's
# keys as they are, and still honour the timers format 4 gave each key; formats 6 and 7 read the
# entries format 5 left in its queues as format 5 did (they read their keys); format 7 reads a
# moment's own key (formats 5 and 6) before its lists
RESUMED_IN_PLACE = {(4, 5), (4, 6), (4, 7), (5, 6), (5, 7), (6, 7)}
MANIFEST_VERSION = 1
FLAGS = {"source": "--source", "sink": "--sink", "dlq": "--dlq", "notifications": "--notifications"}


@dataclass(frozen=True)
class Manifest:
    operators: dict[str, dict]
    rules: dict[str, dict]
    migration: dict | None = None
    endpoints: dict[str, dict] | None = None  # role -> _guard.endpoint_record (None: not recorded)

    def as_json(self) -> str:
        return (
            json.dumps(
                {
                    "manifest": MANIFEST_VERSION,
                    "operators": self.operators,
                    "rules": self.rules,
                    "migration": self.migration,
                    "endpoints": self.endpoints,
                },
                indent=2,
                sort_keys=True,
            )
            + "\n"
        )

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        data = json.loads(text)
        return cls(data["operators"], data["rules"], data.get("migration"), data.get("endpoints"))

    def with_migration(self, migration: dict | None) -> Manifest:
        return replace(self, migration=migration)

    def key_fields(self, rule: str) -> tuple[str, ...] | None:
        found = self.rules.get(rule)
        return tuple(found["key_fields"]) if found else None


def job_manifest(
    rules: RuleSet,
    state_schema: str | None = None,
    endpoints: dict[str, dict] | None = None,
    partitions: int | None = None,
) -> Manifest:
    """The manifest of a job running ``rules`` with the current operator; ``endpoints``: role ->
    its record (``_guard.endpoint_record``); ``partitions``: its state partitions."""
    operator: dict[str, int | str] = {"id": 0, "state_format": STATE_FORMAT}
    if state_schema:
        operator["state_schema"] = state_schema
    if partitions:
        operator["partitions"] = partitions
    return Manifest(
        {OPERATOR: operator},
        {
            name: {
                "key_fields": list(rule.key_fields),
                "window": rule.window,
                "lateness": rule.lateness,
                "time_basis": rule.time_basis.value,
            }
            for name, rule in sorted(rules.rules.items())
        },
        endpoints=endpoints,
    )


def foreign(checkpoint: Manifest, job: Manifest) -> list[tuple[str, dict, dict]]:
    """``(role, the checkpoint's endpoint, the job's)`` for each role recorded in both that names
    another endpoint (see the module docstring)."""
    recorded, given = checkpoint.endpoints or {}, job.endpoints or {}
    return [
        (role, recorded[role], given[role])
        for role in FLAGS
        if role in recorded and role in given and not _same_endpoint(recorded[role], given[role])
    ]


def _same_endpoint(old: dict, new: dict) -> bool:
    if "kafka" in old and "kafka" in new:
        return bool(set(old["kafka"]) & set(new["kafka"])) and bool(set(old["topics"]) & set(new["topics"]))
    return old == new


def foreign_refusal(location: str, mismatches: list[tuple[str, dict, dict]]) -> str:
    """The one-line refusal of a checkpoint created for another job: both endpoints of each role, and the remedy."""
    what = "; ".join(
        f"its {role} is {show_endpoint(old)}, this job's is {show_endpoint(new)}" for role, old, new in mismatches
    )
    flags = " and ".join(FLAGS[role] for role, _, _ in mismatches)
    return (
        f"checkpoint {location} belongs to another job: {what}. Use another spark.checkpoint "
        f"(DEDUP_SPARK__CHECKPOINT) for this job, or the same {flags} as that job. The checkpoint was not modified"
    )


def show_endpoint(record: dict) -> str:
    if "kafka" in record:
        return f"kafka://{','.join(record['kafka'])}/{','.join(record['topics'])}"
    return local_or_uri(record["path"])


def local_or_uri(location: str) -> str:
    """A qualified location as an operator gives it: a local path without ``file:``, any other URI as it is."""
    return location.removeprefix("file:") if location.startswith("file:/") else location


RECORDED_LATER = ("state_schema", "partitions")  # absent from older manifests: adopted, not a change
SETTING_OF = {"partitions": "spark.shuffle_partitions (the state's partitions)"}


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
        for part in ("id", "state_format", "state_schema", "partitions"):
            before, after = (old or {}).get(part), (new or {}).get(part)
            if before != after and not (part in RECORDED_LATER and None in (before, after) and old and new):
                resumed = part == "state_format" and (before, after) in RESUMED_IN_PLACE
                result.changes.append(
                    Change(SETTING_OF.get(part, f"stateful operator {name} {part}"), before, after, resumed)
                )
    for name in sorted(set(checkpoint.rules) | set(job.rules)):
        old, new = checkpoint.rules.get(name), job.rules.get(name)
        if old is None or new is None:
            result.changes.append(Change(f"rules.{name}", old and "present", new and "present", True))
            continue
        for part in ("key_fields", "window", "lateness", "time_basis"):
            if old.get(part) != new.get(part):
                result.changes.append(
                    Change(f"rules.{name}.{part}", old.get(part), new.get(part), part != "key_fields")
                )
    result.changes.sort(key=lambda c: c.compatible)
    return result


def refusal(location: str, changes, new_location: str, settings_file: str | None = None) -> str:
    """The one-line refusal: what changed, and what to do (a command to run as printed, see ``migrate_command``)."""
    what = "; ".join(c.describe() for c in changes)
    return (
        f"checkpoint {location} does not fit this job: {what}. Its state cannot be used as it is; to keep "
        f"the dedup memory run `{migrate_command(location, new_location, settings_file)}` and start this job "
        f"with spark.checkpoint={shlex.quote(new_location)} (DEDUP_SPARK__CHECKPOINT), or restore the previous "
        f"setting. The checkpoint was not modified"
    )


def migrate_command(location: str, new_location: str, settings_file: str | None = None) -> str:
    """``dedup state migrate`` from the checkpoint at ``location`` into ``new_location`` for the job
    whose settings file (``--config``) is ``settings_file`` (None: the environment's settings alone)."""
    command = ["dedup", "state", "migrate", "--from", f"spark:{location}", "--to", f"spark:{new_location}"]
    return shlex.join(command + (["--config", settings_file] if settings_file else []))


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
