"""What the Spark engine keeps in and reads from its checkpoint, on any Hadoop file system:
Spark's own logs (offsets, commits), and beside them under ``streamdedup/`` the manifest
(the stateful part's identity), the exactly-once identity, the lease (one running instance),
the start-up guard and a migration's fallback to an old state, its retirement, and the state
as Spark's state data source reads it."""

from adapters.spark.checkpoint._guard import CheckpointGuard
from adapters.spark.checkpoint._hadoop_files import HadoopPath, translated
from adapters.spark.checkpoint._identity import (
    IDENTITY,
    Identity,
    committed_pending,
    legacy_transactional_id,
    resolve_identity,
    settle,
    write_identity,
)
from adapters.spark.checkpoint._lease import DEFAULT_TIMEOUT, CheckpointLease
from adapters.spark.checkpoint._logs import Checkpoint, OffsetEntry
from adapters.spark.checkpoint._manifest import (
    STATE_FORMAT,
    Manifest,
    compare,
    foreign,
    foreign_refusal,
    job_manifest,
    read_manifest,
    refusal,
)
from adapters.spark.checkpoint._migration import migrate, plan_migration
from adapters.spark.checkpoint._state_files import StateFiles, StateLook
from adapters.spark.checkpoint._state_reader import inspect_checkpoint, key_emissions, read_state, rule_watermark
from adapters.spark.checkpoint._watermark_files import DIRECTORY, restored

__all__ = [
    "DEFAULT_TIMEOUT",
    "DIRECTORY",
    "IDENTITY",
    "STATE_FORMAT",
    "Checkpoint",
    "CheckpointGuard",
    "CheckpointLease",
    "HadoopPath",
    "Identity",
    "Manifest",
    "OffsetEntry",
    "StateFiles",
    "StateLook",
    "committed_pending",
    "compare",
    "foreign",
    "foreign_refusal",
    "inspect_checkpoint",
    "job_manifest",
    "key_emissions",
    "legacy_transactional_id",
    "migrate",
    "plan_migration",
    "read_manifest",
    "read_state",
    "refusal",
    "resolve_identity",
    "restored",
    "rule_watermark",
    "settle",
    "translated",
    "write_identity",
]
