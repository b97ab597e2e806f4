"""The exactly-once identity of a Spark job, kept in its checkpoint.

The job's exactly-once output is committed under one Kafka ``transactional.id``: it fences
an older instance of the job (a zombie driver) and keys the commit markers that say which
micro-batches were committed (``output._executor_writer``). That id belongs to the checkpoint,
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
(the output is committed under it from then on).

**After a migration** (``_migration.migrate``) the new checkpoint starts with the old one's
identity (``inherited_identity``): its transactional id, so the new job's first start fences
the old job's producer, and the old job's commit position in ``inherited``: its query id,
its last batch committed to its checkpoint and the batch it had planned after that
(``pending``: its end offsets, or the files it read). The old job may have committed that
batch to Kafka and died before Spark's commit; the new job starts at the old checkpoint's
position, so it reads those records again. At its first start the new job looks the old
query's last commit marker up once (``settle``) and records the answer (``settled``; the
compacted marker topic may later drop the old marker): if the pending batch was committed,
its records are judged (so the new state knows their emissions) but not produced again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from adapters.spark.checkpoint._logs import Checkpoint
from adapters.spark.shared import PartlyCommitted

log = logging.getLogger(__name__)

IDENTITY = "identity"
PREFIX = "streamdedup-spark-"


@dataclass(frozen=True)
class Identity:
    """``transactional_id``; ``inherited``: after a migration, the old job's commit position
    (``transactional_id``, ``query_id``, ``batch``, and the batch it had planned but not
    committed to its checkpoint, ``pending``) and, once the new job has looked at the old
    markers, ``settled``; ``whole_batch_committed``: the last batch a version that committed
    whole batches from the driver committed under ``transactional_id`` (``NO_BATCH``: none),
    once looked up (``upgrade``)."""

    transactional_id: str
    inherited: dict | None = None
    whole_batch_committed: int | None = None  # see ``output._executor_writer``'s upgrade; None: not yet looked up

    def as_json(self) -> str:
        return (
            json.dumps(
                {
                    "transactional_id": self.transactional_id,
                    "inherited": self.inherited,
                    "whole_batch_committed": self.whole_batch_committed,
                },
                indent=2,
                sort_keys=True,
            )
            + "\n"
        )

    @classmethod
    def from_json(cls, text: str) -> Identity:
        data = json.loads(text)
        return cls(data["transactional_id"], data.get("inherited"), data.get("whole_batch_committed"))


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
            log.warning(
                "checkpoint %s has no exactly-once identity (written by an older version): adopting the "
                "transactional id %s derived from its location as spelt now",
                location,
                identity.transactional_id,
            )
    elif configured and configured != stored.transactional_id:
        log.warning(
            "checkpoint %s committed its output under transactional id %s; kafka.transactional_id=%s "
            "replaces it (batches committed under the old id are not recognised)",
            location,
            stored.transactional_id,
            configured,
        )
        identity = replace(stored, transactional_id=configured)
    else:
        return stored
    write_identity(checkpoint, identity)
    return identity


def inherited_identity(old: Checkpoint, location: str, batch: int) -> Identity:
    """The identity a checkpoint migrated from ``old`` (at its committed ``batch``) starts with."""
    own = read_identity(old)
    tid = own.transactional_id if own else legacy_transactional_id(location)
    planned = old.last_planned()
    pending = None
    if planned is not None and planned > batch:
        offsets = old.source_offsets(planned)
        files = _files_of(old, offsets, old.source_offsets(batch))
        pending = {"batch": planned, "offsets": offsets, **({"files": files} if files else {})}
    return Identity(
        tid, {"from": location, "transactional_id": tid, "query_id": old.query_id(), "batch": batch, "pending": pending}
    )


def settle(
    identity: Identity, checkpoint: Checkpoint, last_committed: Callable[[str, str | None], dict[str, int]]
) -> Identity:
    """After a migration, once: whether the old job's pending batch was committed to Kafka
    (``last_committed(transactional_id, query_id)``: the old query's last marker per marker
    key, ``output._executor_writer.CommitLog.last_committed``), recorded. A batch the old job
    committed for some of its partitions and not others cannot be split by the new job's
    partitions: ``PartlyCommitted`` asks for the old job to finish it first."""
    inherited = identity.inherited
    if not inherited or "settled" in inherited:
        return identity
    pending = inherited.get("pending")
    lasts = last_committed(inherited["transactional_id"], inherited["query_id"])
    last = max(lasts.values(), default=-1)
    if pending is not None and lasts:
        done = {key for key, batch in lasts.items() if batch >= pending["batch"]}
        if done and done != set(lasts):
            raise PartlyCommitted(
                f"the old job ({inherited['from']}) committed its batch {pending['batch']} to Kafka for "
                f"{len(done)} of its {len(lasts)} output partitions, then stopped: start the old job once more "
                "(it finishes that batch and stops with it), then run the migration again"
            )
        last = min(lasts.values())
    skip = pending is not None and last >= pending["batch"]
    if skip:
        assert pending is not None  # skip implies it
        log.warning(
            "the old job (%s) committed its batch %d to Kafka but not to its checkpoint: its records are "
            "judged and not produced again",
            inherited["from"],
            pending["batch"],
        )
    settled = replace(identity, inherited={**inherited, "settled": {"old_last_committed": last, "skip_pending": skip}})
    write_identity(checkpoint, settled)
    return settled


def committed_pending(identity: Identity) -> dict | None:
    """The old job's batch whose records it committed to Kafka (its ``offsets`` or ``files``), when settled so."""
    inherited = identity.inherited or {}
    return inherited.get("pending") if inherited.get("settled", {}).get("skip_pending") else None


def _files_of(old: Checkpoint, pending: list[str], committed: list[str]) -> list[str]:
    """A file source's files read between the ``committed`` and the ``pending`` positions (none for Kafka)."""
    end, start = (json.loads(offsets[0]) if offsets else {} for offsets in (pending, committed))
    if "logOffset" not in end:
        return []
    return sorted(set(old.files_read(0, end["logOffset"])) - set(old.files_read(0, start.get("logOffset", -1))))
