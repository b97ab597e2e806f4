"""What the Spark engine keeps in and reads from its checkpoint, on any Hadoop file system:
Spark's own logs (offsets, commits), and beside them under ``streamdedup/`` the manifest
(the stateful part's identity), the exactly-once identity, the lease (one running instance),
the start-up guard and a migration's fallback to an old state, its retirement, and the state
as Spark's state data source reads it."""

from adapters.spark.checkpoint.guard import CheckpointGuard
from adapters.spark.checkpoint.hadoop_files import HadoopPath
from adapters.spark.checkpoint.identity import Identity, committed_pending, resolve_identity, settle, write_identity
from adapters.spark.checkpoint.lease import DEFAULT_TIMEOUT, CheckpointLease
from adapters.spark.checkpoint.logs import Checkpoint
from adapters.spark.checkpoint.migration import migrate, plan_migration
from adapters.spark.checkpoint.state_files import StateFiles
from adapters.spark.checkpoint.state_reader import inspect_checkpoint, read_state

__all__ = [
    "DEFAULT_TIMEOUT",
    "Checkpoint",
    "CheckpointGuard",
    "CheckpointLease",
    "HadoopPath",
    "Identity",
    "StateFiles",
    "committed_pending",
    "inspect_checkpoint",
    "migrate",
    "plan_migration",
    "read_state",
    "resolve_identity",
    "settle",
    "write_identity",
]
