"""The exactly-once identity of a Spark job, kept in its checkpoint.

The job's exactly-once output is committed under one Kafka ``transactional.id``: it fences
an older instance of the job (a zombie driver) and keys the commit markers that say which
micro-batches were committed (``transactional_sink``). That id belongs to the checkpoint,
so it lives there: ``streamdedup/identity`` (JSON), written through the checkpoint's own
file system on the first start and read on every later one. However the location is spelt
(``checkpoints/dedup``, ``./checkpoints/dedup/``, the absolute path, ``file://…``, or the
directory moved elsewhere), a restart finds the same id, fences the same zombie and skips
the batches its markers name; a checkpoint deleted and created anew gets a new id.

``resolve_identity`` decides at each start:

* an identity file: its id;
* none, on a checkpoint with progress: written by a version that derived the id from the
  location as configured (``legacy_transactional_id``); that id is adopted and written, so
  the upgrade continues under it;
* none, on a new checkpoint: a new random id.

An explicitly configured ``kafka.transactional_id`` wins over all three, and is recorded
(the output is committed under it from then on). A migrated checkpoint starts with the old
one's identity (``migration.migrate``); ``inherited`` then says where it came from.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from dataclasses import dataclass, replace

from adapters.spark.checkpoint import Checkpoint

log = logging.getLogger(__name__)

IDENTITY = "identity"
PREFIX = "streamdedup-spark-"


@dataclass(frozen=True)
class Identity:
    """``transactional_id``; ``inherited``: after a migration, the old job's commit position
    (``transactional_id``, ``query_id``, ``batch``, and the batch it had planned but not
    committed to its checkpoint, ``pending``) and, once the new job has looked at the old
    markers, ``settled``."""

    transactional_id: str
    inherited: dict | None = None

    def as_json(self) -> str:
        return json.dumps({"transactional_id": self.transactional_id, "inherited": self.inherited},
                          indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "Identity":
        data = json.loads(text)
        return cls(data["transactional_id"], data.get("inherited"))


def legacy_transactional_id(location: str) -> str:
    """The id versions before the identity file derived from the location as spelt."""
    return PREFIX + hashlib.sha256(location.encode()).hexdigest()[:16]


def new_transactional_id() -> str:
    return PREFIX + uuid.uuid4().hex[:16]


def read_identity(checkpoint: Checkpoint) -> Identity | None:
    path = checkpoint.ours / IDENTITY
    return Identity.from_json(path.read_text()) if path.exists() else None


def write_identity(checkpoint: Checkpoint, identity: Identity) -> None:
    """Written atomically through the checkpoint's file system."""
    (checkpoint.ours / IDENTITY).write_text(identity.as_json())


def resolve_identity(checkpoint: Checkpoint, location: str, configured: str | None = None) -> Identity:
    """The identity to run under (see the module docstring); written when it is new or changed."""
    stored = read_identity(checkpoint)
    if stored is None:
        legacy = checkpoint.has_progress()
        identity = Identity(configured or (legacy_transactional_id(location) if legacy else new_transactional_id()))
        if legacy and not configured:
            log.warning("checkpoint %s has no exactly-once identity (written by an older version): adopting the "
                        "transactional id %s derived from its location as spelt now", location,
                        identity.transactional_id)
    elif configured and configured != stored.transactional_id:
        log.warning("checkpoint %s committed its output under transactional id %s; kafka.transactional_id=%s "
                    "replaces it (batches committed under the old id are not recognised)", location,
                    stored.transactional_id, configured)
        identity = replace(stored, transactional_id=configured)
    else:
        return stored
    write_identity(checkpoint, identity)
    return identity
