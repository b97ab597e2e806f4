"""The Spark engine's start-up check and, during a migration, its start position and old-state fallback.

``SparkEngine`` builds one ``CheckpointGuard`` and calls ``prepare`` before its query starts;
``job_input``, one step of the plan, gives the input a migration leaves (the start position, the
files already read, the old state's fallback; ``adapters.spark.checkpoint._migration`` describes
what a migration prepared in the checkpoint).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import replace
from urllib.parse import quote

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from adapters.spark.checkpoint._hadoop_files import HadoopPath
from adapters.spark.checkpoint._logs import Checkpoint
from adapters.spark.checkpoint._manifest import (
    OPERATOR,
    Manifest,
    compare,
    foreign,
    foreign_refusal,
    job_manifest,
    local_or_uri,
    migrate_command,
    read_manifest,
    refusal,
    write_manifest,
)
from adapters.spark.checkpoint._migration import FALLBACK, FILES_READ
from adapters.spark.checkpoint._retirement import RetirementWatch
from adapters.spark.checkpoint._state_reader import state_schema
from adapters.spark.checkpoint._watermark_files import rule_watermarks
from adapters.spark.shared import CheckpointOfAnotherJob, join_escaped, key_parts, parse_uri
from domain import IncompatibleState, RuleSet, escape

log = logging.getLogger(__name__)


class CheckpointGuard:
    """The engine's start-up check and, during a migration, its position and fallback.

    ``prepare(spark)`` compares the job's manifest with the checkpoint's: a checkpoint created
    for another source or output raises ``CheckpointOfAnotherJob``, an incompatible change
    ``IncompatibleState`` (each one line: what differs and the remedy, a migration as a command
    to run as printed) and both leave the checkpoint untouched; otherwise ``record(spark)`` (once
    the checkpoint's lease is held) (re)writes the manifest with this job's endpoints. ``endpoints``: role (``source``, ``sink``, ``dlq``,
    ``notifications``) -> URI; ``settings_file``: the job's ``--config``, named in the
    suggested migration. While a migration's old state is consulted, a ``RetirementWatch``
    (added by ``record``) on the query retires it once the watermark passes its last expiry. ``state_in_checkpoint``:
    the dedup state is Spark's, partitioned as the checkpoint froze it, so another number of
    state partitions is incompatible (with Redis state the judge partitions each batch itself).
    """

    def __init__(
        self,
        rules: RuleSet,
        checkpoint: str,
        endpoints: dict[str, str] | None = None,
        settings_file: str | None = None,
        state_in_checkpoint: bool = True,
    ):
        self.rules, self.location, self.state_in_checkpoint = rules, checkpoint, state_in_checkpoint
        self.endpoints, self.settings_file = dict(endpoints or {}), settings_file
        self.migration: dict | None = None  # the checkpoint's migration: where the new job starts
        self.consulting = False  # whether the old state is still consulted (not retired)
        self.checkpoint: Checkpoint | None = None  # opened by ``prepare``
        self._job: Manifest | None = None  # this job's manifest, checked by ``prepare``

    @property
    def opened(self) -> Checkpoint:
        """The checkpoint ``prepare`` opened (everything below but ``prepare`` runs after it)."""
        assert self.checkpoint is not None, "CheckpointGuard.prepare opens the checkpoint first"
        return self.checkpoint

    def prepare(self, spark: SparkSession) -> None:
        """Open and check the checkpoint against this job (refusing a foreign or incompatible one);
        reads only: ``record`` writes the manifest once the checkpoint's lease is held."""
        self.checkpoint = checkpoint = Checkpoint.at(self.location)  # any Hadoop file system: checked the same way
        job = job_manifest(
            self.rules,
            state_schema(spark),
            {role: endpoint_record(uri, spark) for role, uri in self.endpoints.items()},
            # pyspark types RuntimeConfig.get as Optional[str]; without a default it returns a str or raises
            int(spark.conf.get("spark.sql.shuffle.partitions")) if self.state_in_checkpoint else None,  # type: ignore[arg-type]
        )
        stored = self._with_partitions(read_manifest(checkpoint.ours))
        if stored is None and checkpoint.has_progress():
            log.warning("checkpoint %s has no manifest (written before manifests); adopting this job's", self.location)
        elif stored is None:
            log.warning(
                "checkpoint %s is new: the job starts with an empty dedup state (to keep an older "
                "version's memory, see `dedup state migrate --help`)",
                self.location,
            )
        else:
            self._refuse_foreign(stored, job)
            self._refuse_incompatible(stored, job)
        self._note_provider(spark)
        self.migration = stored.migration if stored else None
        self.consulting = self._consults_old_state(self.migration)
        self._job = job

    def record(self, spark: SparkSession, watermark=lambda: None) -> None:
        """Write this job's manifest into the checkpoint ``prepare`` checked (the first write of a
        start: the checkpoint's lease is held by then) and watch for the old state's retirement."""
        assert self._job is not None, "CheckpointGuard.prepare checks the checkpoint first"
        write_manifest(self.opened.ours, self._job.with_migration(self.migration))
        if self.consulting:
            assert self.migration is not None  # only a migration's old state is consulted
            spark.streams.addListener(RetirementWatch(spark, self.migration["retire_at"], self._retire, watermark))

    def job_input(
        self, read: Callable[[str], DataFrame], uri: str
    ) -> tuple[DataFrame, Callable[[DataFrame], DataFrame]]:
        """The job's input as the checkpoint's migration leaves it, in one step: the records
        ``read`` gives for the source ``uri`` (from the old job's Kafka offsets while a migrated
        checkpoint has no progress, without the files the old job had read), and the hook that
        adds the old state's emissions and the old watermark to the operator's input. Without a
        migration: what ``read(uri)`` gives, and a hook that changes nothing."""
        return self._unread(read(self._source(uri))), self._fallback

    def _source(self, uri: str) -> str:
        """``uri``, starting at the old job's Kafka offsets while a migrated checkpoint has no progress."""
        if not self.migration or self.opened.has_progress() or not uri.startswith("kafka:"):
            return uri
        offsets = self.migration["source_offsets"]
        separator = "&" if "?" in uri else "?"
        return f"{uri}{separator}startingOffsets={quote(offsets[0], safe='')}"

    def _unread(self, records: DataFrame) -> DataFrame:
        """``records`` without the files the old job had read (file sources, during a migration)."""
        if not self.migration or not self.migration.get("files_read"):
            return records
        spark = records.sparkSession
        paths = json.loads((self.opened.ours / FILES_READ).read_text())
        read = spark.createDataFrame([(_path_of_text(p),) for p in paths], "old_path string")
        return records.join(F.broadcast(read), _path_of(F.col("source")) == F.col("old_path"), "left_anti")

    def _fallback(self, operator_input: DataFrame) -> DataFrame:
        """Adds ``fallback`` (old live emission times), ``fallback_retention`` and ``watermark_floor``.

        The new query's watermark starts afresh; the floor (the old job's watermark) keeps a
        record the old job would have judged late from being judged at all.
        """
        if not self.migration:
            return operator_input
        floor = F.lit(self.migration.get("from_watermark", 0)).cast("long")
        floored = operator_input.withColumn("watermark_floor", floor)
        if not self.consulting:
            return floored
        table = operator_input.sparkSession.read.parquet(str(self.opened.ours / FALLBACK))
        keyed = floored.withColumn("_old_key", _old_key(self.migration["translations"]))
        return keyed.join(table, F.col("_old_key") == table["old_key"], "left").drop("_old_key", "old_key")

    def _with_partitions(self, stored: Manifest | None) -> Manifest | None:
        """The stored manifest with the state partitions Spark froze in the checkpoint at its first
        micro-batch (its offset log's settings), which a manifest written before it recorded them lacks."""
        if stored is None or not self.state_in_checkpoint or not self.opened.has_progress():
            return stored
        frozen = self.opened.recorded_conf().get("spark.sql.shuffle.partitions")
        operator = stored.operators.get(OPERATOR)
        if frozen is None or operator is None:
            return stored
        return replace(stored, operators={**stored.operators, OPERATOR: {**operator, "partitions": int(frozen)}})

    def _refuse_foreign(self, stored: Manifest, job: Manifest) -> None:
        if stored.endpoints is None:
            log.warning(
                "checkpoint %s records no source and outputs yet (migrated, or written before they were "
                "recorded); recording this job's",
                self.location,
            )
        mismatches = foreign(stored, job)
        if mismatches:
            raise CheckpointOfAnotherJob(foreign_refusal(self.shown, mismatches))

    def _refuse_incompatible(self, stored: Manifest, job: Manifest) -> None:
        comparison = compare(stored, job)
        for change in comparison.changes:
            log.warning(
                "checkpoint %s: %s (%s)",
                self.location,
                change.describe(),
                "compatible" if change.compatible else "incompatible",
            )
        if comparison.incompatible:
            raise IncompatibleState(
                refusal(self.shown, comparison.incompatible, self.migration_target(), self.settings_file)
            )

    @property
    def shown(self) -> str:
        """The checkpoint's location as an operator writes it, absolute (a local path, or its URI)."""
        return local_or_uri(str(self.opened.path))

    def migration_target(self) -> str:
        """A new checkpoint beside this one, for a migration: ``NAME-migrated`` (``-2``, ``-3``… when taken)."""
        parent, name = self.opened.path.parent, self.opened.path.name
        candidates = (f"{name}-migrated", *(f"{name}-migrated-{n}" for n in range(2, 100)))
        free = next((parent / c for c in candidates if not (parent / c).exists()), parent / candidates[-1])
        return local_or_uri(str(free))

    def _retire(self, watermark: int) -> None:
        """Called by the running query's ``RetirementWatch``: record and say that the old state is retired."""
        assert self.migration is not None  # watched only while a migration's old state is consulted
        log.warning(
            "old state from %s retired: the watermark %d has passed its last expiry %d; no old emission "
            "is live, it is no longer consulted (the next start leaves it out of the plan)",
            self.migration["from"],
            watermark,
            self.migration["retire_at"],
        )
        self.migration.update(retired=True, retired_at_watermark=watermark)
        stored = read_manifest(self.opened.ours)
        assert stored is not None  # ``prepare`` wrote it
        write_manifest(self.opened.ours, stored.with_migration(self.migration))

    def _note_provider(self, spark: SparkSession) -> None:
        """Spark restores the state store provider from the checkpoint: a changed one does not take effect."""
        key = "spark.sql.streaming.stateStore.providerClass"
        recorded, wanted = self.opened.recorded_conf().get(key), spark.conf.get(key, None)
        if recorded and wanted and recorded != wanted:
            target = self.migration_target()
            log.warning(
                "checkpoint %s keeps its state in %s (Spark restores it); to move to %s, run `%s` and "
                "start this job with spark.checkpoint=%s",
                self.location,
                recorded.rsplit(".", 1)[-1],
                wanted.rsplit(".", 1)[-1],
                migrate_command(self.shown, target, self.settings_file),
                target,
            )

    def _consults_old_state(self, migration: dict | None) -> bool:
        """Whether the old state is still consulted; retires it (in ``migration``) once it has expired."""
        if not migration or migration.get("retired"):
            return False
        watermark = max(rule_watermarks(self.opened).values(), default=0)  # as RetirementWatch: the highest
        if self.opened.last_committed() is not None and watermark >= migration["retire_at"]:
            log.warning(
                "old state from %s retired: the watermark %d has passed its last expiry %d; it is no longer consulted",
                migration["from"],
                watermark,
                migration["retire_at"],
            )
            migration.update(retired=True, retired_at_watermark=watermark)
            return False
        log.warning(
            "consulting the old state from %s read-only until the watermark reaches %d",
            migration["from"],
            migration["retire_at"],
        )
        return True


def endpoint_record(uri: str, spark: SparkSession | None = None) -> dict:
    """What identifies the input or output at ``uri``, without secrets (``manifest``): a Kafka
    cluster's servers and topics (no user-info, no options), or a directory's path as Spark
    qualifies it."""
    endpoint = parse_uri(uri)
    if endpoint.kind == "kafka":
        assert endpoint.topic is not None  # a Kafka endpoint (parse_uri) always names its topic
        servers = endpoint.location
        return {
            "kafka": sorted({s.strip().lower() for s in servers.split(",") if s.strip()}),
            "topics": sorted({t.strip() for t in endpoint.topic.split(",") if t.strip()}),
        }
    return {"path": str(HadoopPath.at(endpoint.location, spark))}


def _old_key(translations: dict[str, dict]) -> Column:
    """The old layout's key of each judged row, derived from its new key (``KeyTranslation``;
    the parts are picked as they are spelled, escaped)."""
    parts = key_parts(F.col("key"))
    column = None
    for rule, t in translations.items():
        positions = [1 + t["new"].index(f) for f in t["old"]]
        old = join_escaped([F.lit(escape(rule)), *[parts.getItem(i) for i in positions]])
        case = F.col("judged") & (parts.getItem(0) == escape(rule))
        column = F.when(case, old) if column is None else column.when(case, old)
    return F.lit(None).cast("string") if column is None else column


def _path_of(column: Column) -> Column:
    return F.regexp_replace(column, r"^file:/+", "/")


def _path_of_text(path: str) -> str:
    return re.sub(r"^file:/+", "/", path)
