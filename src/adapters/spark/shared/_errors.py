"""The Spark engine's errors: what stops it from starting, and a checkpoint file it cannot trust.

Every setup error is a ``domain._errors.SetupError``: one line naming the setting or resource
and the remedy, exit code 2, never retried (the same start fails the same way).
"""

from __future__ import annotations

from domain import SetupError, StateUnavailable

__all__ = [
    "CheckpointInUse",
    "CheckpointOfAnotherJob",
    "CorruptFile",
    "InputMissing",
    "PartlyCommitted",
    "SparkSetupError",
]


class SparkSetupError(SetupError):
    """The Spark engine cannot start: a tool, jar or setting is missing. Retrying cannot help."""


class InputMissing(SetupError):
    """A JSONL input directory that does not exist (one line naming it and the setting)."""


class CheckpointInUse(SetupError):
    """Another instance runs on the checkpoint (or took it over): this one does not start, or stops.
    One line naming the checkpoint and the other owner; never restarted."""


class CheckpointOfAnotherJob(SetupError):
    """The checkpoint was created for another source or output (one line naming both and the
    remedy); the checkpoint is left as it was, and the job is never restarted on it."""


class PartlyCommitted(SetupError):
    """A migrated job's first start found the old job's last batch committed to Kafka for some
    output partitions only (``checkpoint._identity.settle``); never restarted."""


class CorruptFile(StateUnavailable):
    """A file whose bytes do not match the checksum the file system keeps beside it (Hadoop's
    ``.NAME.crc``): a process killed while replacing it. Waiting does not mend it; rewriting does.
    Transient for the restart strategy: the next start rewrites the file."""
