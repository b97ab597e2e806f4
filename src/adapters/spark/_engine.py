"""The Spark engine: one streaming query assembled from parts (``parts``).

``build_spark_engine`` chooses the parts from the settings, for ``dedup run`` and the tests
alike: the **judge** (``batch._operator_judge.OperatorJudge``, the JVM operator in the stream with its
state in the checkpoint, or ``batch._redis_judge.RedisBatchJudge``), the **writer**
(``output._writers``: at-least-once or exactly-once) and the **restart strategy**
(``domain._restart``, ``_restart.run_restarting``).

``run(stop)`` returns the ``Accounting`` of the micro-batches its last start processed and
calls ``on_batch(totals)`` after every progress, idle ones included. Bounded
(``available_now``, the default for a JSONL directory) it stops once the backlog at start is
processed; otherwise it runs until ``stop`` is set, lets the running micro-batch commit and
stops. A restart with the same checkpoint continues after the last committed micro-batch.

Failure behaviour: a micro-batch's work (judging against Redis, a write) is retried per the
``transient`` policy; when that gives up, or anything else fails the batch (the operator,
``invalid=fail``), the batch is not committed and the query fails; the restart strategy
starts it again (replaying that batch) or ``run`` raises ``RestartsExhausted``, one line
naming Spark's log file (``log_file``, ``runtime._spark_log``) with Spark's stack traces. Setup
errors (``shared._errors``) are raised at once, among them ``CheckpointInUse``: the
engine holds a lease on its checkpoint while it runs, refuses to start on one another live
instance holds, and stops (its running batch unwritten) when another instance takes it over.

Each micro-batch's phases inside ``foreachBatch`` (the lease, the watermark files, the write)
are timed in ``timings`` (``metrics._timings``; one line per batch at DEBUG); where the rest of a
batch's time goes: bench/spark_batch_phases.py and docs/design/latency.md.

Before each start, what waiting cannot heal is refused in one line, never restarted: a
missing Kafka topic or input directory (``runtime._startup``), a checkpoint created for another
source or output, or one whose state the job cannot use (``checkpoint._guard``). Brokers that do not
answer are found by the same check within seconds and are transient: the restart strategy
decides, its log line naming them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession

from adapters.spark._restart import retried, run_restarting, run_retrying_writes
from adapters.spark._stopping import QueryStopper
from adapters.spark._trigger import DEFAULT_TRIGGER
from adapters.spark._waiting import await_query
from adapters.spark.batch import BatchTools, BatchWriter, Judge, JudgedBatch, OperatorJudge, RedisBatchJudge
from adapters.spark.checkpoint import DEFAULT_TIMEOUT, CheckpointGuard, CheckpointLease, StateFiles
from adapters.spark.metrics import BatchTimings, ProgressListener, StateRowGauge, counted
from adapters.spark.output import JVM_SINK, SINK_SETTING, SinkHooks, writer_for
from adapters.spark.runtime import (
    SparkLog,
    build_session,
    require_classes,
    require_endpoints,
    session_started,
    spark_kafka_options,
    state_rows_tracked,
    state_store_conf,
    stop_session,
)
from adapters.spark.shared import SparkSetupError, parse_uri
from adapters.spark.stream import (
    BatchWatermarks,
    DedupPlan,
    Hook,
    read_stream,
    source_tasks,
    state_row_counter,
    with_notifications,
)
from domain import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_BYTES,
    Accounting,
    Metrics,
    Policies,
    RestartsExhausted,
    RestartStrategy,
    RuleSet,
    redact_uri,
)

log = logging.getLogger(__name__)


@dataclass(slots=True)
class SparkQuery:
    """Where the query reads and keeps its checkpoint, and how it runs. ``available_now``:
    process what the source holds, then stop (default: yes for a JSONL directory, no for Kafka)."""

    source: str
    checkpoint: str
    notifications: str | None = None
    outputs: dict[str, str] = field(default_factory=dict)  # role (sink, dlq) -> URI: checked at start, recorded
    kafka_settings: dict[str, str] = field(default_factory=dict, repr=False)  # librdkafka's: the start-up check
    settings_file: str | None = None  # the job's --config, named in the migration a refusal suggests
    log_file: str | None = None  # Spark's own log (spark_log); None: a JVM this engine starts logs to stderr
    trigger: str = DEFAULT_TRIGGER
    available_now: bool | None = None
    state_provider: str = "rocksdb"
    master: str | None = None
    max_offsets_per_trigger: int | None = None
    shuffle_partitions: int | None = None
    # the most tasks a Kafka source is read in (stream.source_tasks; None: a local master's cores)
    source_tasks: int | None = None
    conf: dict[str, str] = field(default_factory=dict)
    consumer_options: dict[str, str] = field(default_factory=dict, repr=False)
    lease_timeout: float = DEFAULT_TIMEOUT  # the checkpoint's lease (adapters.spark.checkpoint._lease)
    idle_partition_timeout: float = DEFAULT_IDLE_TIMEOUT


def build_spark_engine(
    rules: RuleSet,
    policies: Policies,
    *,
    source: str,
    sink: str,
    dead_letters: str,
    checkpoint: str,
    state: str = "checkpoint",
    delivery: str = "at-least-once",
    kafka_config: Mapping[str, str] | None = None,
    transactional_id: str | None = None,
    commit_replication: int | None = None,
    restart: RestartStrategy | None = None,
    metrics=None,
    spark: SparkSession | None = None,
    dead_letter_max_bytes: int = DEFAULT_MAX_BYTES,
    duplicates: str | None = None,
    **query,
) -> SparkEngine:
    """The engine with the parts the settings name: Spark's state (``state="checkpoint"``) or a
    ``redis://`` URL as the judge; ``delivery`` as the writer. ``kafka_config``: librdkafka
    settings (``ValueError`` names one Spark's Kafka client cannot take). ``duplicates``: where
    the duplicate reports go (None: off). ``query``: the ``SparkQuery`` fields."""
    state = _state_of(state)
    config = dict(kafka_config or {})
    consumer, producer = (spark_kafka_options(config, role) for role in ("consumer", "producer"))
    writer = writer_for(
        sink,
        dead_letters,
        delivery,
        checkpoint,
        config,
        transactional_id,
        producer,
        commit_replication,
        dead_letter_max_bytes,
        consumer,
        duplicates,
    )
    judge = (
        OperatorJudge()
        if state == "checkpoint"
        else RedisBatchJudge(
            state,
            partitions=query.get("shuffle_partitions") or 2,
            idle_timeout=query.get("idle_partition_timeout", DEFAULT_IDLE_TIMEOUT),
        )
    )
    spark_query = SparkQuery(
        source,
        checkpoint,
        outputs={"sink": sink, "dlq": dead_letters},
        kafka_settings=config,
        consumer_options=consumer,
        **query,
    )
    return SparkEngine(rules, spark_query, writer, judge, policies, restart or RestartStrategy(), metrics, spark=spark)


def _state_of(state: str) -> str:
    """``checkpoint`` or a Redis URL; ``memory``, the name before ``checkpoint``, with a deprecation line."""
    if state == "memory":
        log.warning(
            "state='memory' for the Spark engine is deprecated: its state is kept in the checkpoint, "
            "write state='checkpoint'"
        )
        return "checkpoint"
    if state != "checkpoint" and not state.startswith(("redis://", "rediss://", "unix://")):
        raise SparkSetupError(
            f"the Spark engine keeps its state in its checkpoint ('checkpoint') or in Redis "
            f"(redis://HOST:PORT/DB), got {redact_uri(state)!r}"
        )
    return state


@dataclass(slots=True)  # a misspelt setting fails at once instead of being ignored
class SparkEngine:
    rules: RuleSet
    query: SparkQuery
    writer: BatchWriter
    judge: Judge = field(default_factory=OperatorJudge)
    policies: Policies = field(default_factory=Policies)
    restart: RestartStrategy = field(default_factory=RestartStrategy)
    metrics: Metrics | None = None
    on_batch: Callable[[Accounting], None] | None = None
    spark: SparkSession | None = None
    listener: ProgressListener = field(init=False, repr=False)
    guard: CheckpointGuard = field(init=False, repr=False)
    lease: CheckpointLease = field(init=False, repr=False)
    state_rows: Any = field(init=False, default=None, repr=False)  # the operator's StateRowCount (JVM), once started
    watermarks: BatchWatermarks | None = field(init=False, default=None, repr=False)
    spark_log: SparkLog | None = field(init=False, default=None, repr=False)  # where the session started here logs
    owns_session: bool = field(init=False, default=False, repr=False)  # started here: ``run`` stops it
    timings: BatchTimings = field(init=False, default_factory=BatchTimings, repr=False)  # foreachBatch's phases
    stopper: QueryStopper = field(init=False, default_factory=QueryStopper, repr=False)  # ``stopping``
    sink_hooks: SinkHooks | None = field(init=False, default=None, repr=False)  # the JVM sink's, while a run uses it
    # the batch whose write the JVM sink aborted in the last start (run_retrying_writes retries it), or None
    aborted_batch: int | None = field(init=False, default=None, repr=False)

    def __post_init__(self):
        self.listener = ProgressListener(self.metrics, rules=self.rules.rules)
        self.guard = CheckpointGuard(
            self.rules,
            self.query.checkpoint,
            self.endpoints(),
            self.query.settings_file,
            state_in_checkpoint=self.judge.state_in_checkpoint,
        )
        self.lease = CheckpointLease(self.query.checkpoint, self.query.lease_timeout)

    def endpoints(self) -> dict[str, str]:
        """Role -> URI of every input and output: ``source``, ``notifications``, ``sink``, ``dlq``."""
        inputs = {"source": self.query.source, "notifications": self.query.notifications}
        return {**{role: uri for role, uri in inputs.items() if uri}, **self.query.outputs}

    def session(self) -> SparkSession:
        """The given session, else the process's. Started here, Spark logs to ``log_file`` (to the
        terminal as well while the program logs at DEBUG); a running one keeps its log."""
        if self.spark is None:
            if self.query.log_file is not None and not session_started():
                self.spark_log = SparkLog.at(
                    self.query.log_file, console=logging.getLogger().isEnabledFor(logging.DEBUG)
                )
            self.owns_session = not session_started()
            self.spark = build_session(self.query.master, conf=self.query.conf, log=self.spark_log)
        return self.spark

    def judged(self) -> DataFrame:
        """Source → the stream ``write_batch`` gets: verdicts, observed (or, with Redis, the rows to judge)."""
        records, hook = self.guard.job_input(
            lambda uri: self._read(uri, self.query.max_offsets_per_trigger), self.query.source
        )
        if self.query.notifications:
            hook = with_notifications(self._read(self.query.notifications), DedupPlan(self.rules), hook)
        judged = self.judge.stream(self.plan(hook), records, self.writer.routed)
        return self.writer.in_stream(judged) if self.judge.verdicts_in_stream else judged

    def plan(self, before_operator: Hook | None = None) -> DedupPlan:
        invalid = self.policies.chains["invalid"].terminal
        return DedupPlan(
            self.rules, invalid, before_operator=before_operator, state_rows=self.state_rows, watermarks=self.watermarks
        )

    def bounded(self, available_now: bool | None = None) -> bool:
        """Whether this run stops once the source's backlog is processed."""
        for choice in (available_now, self.query.available_now):
            if choice is not None:
                return choice
        return parse_uri(self.query.source).kind == "jsonl"

    def run(self, stop: threading.Event | None = None, available_now: bool | None = None) -> Accounting:
        """Run the query, restarted per ``restart`` (see the module docstring); returns its last start's counts."""
        stop = stop or threading.Event()
        try:
            run_restarting(
                lambda: self.run_retrying_writes(stop, available_now),
                self.restart,
                stop,
                on_failure=self._count_failure,
                alive=self._jvm_alive,
            )
        except RestartsExhausted as exc:
            if self.spark_log is None:
                raise
            raise RestartsExhausted(f"{exc} (Spark's own log: {self.spark_log.file})") from exc
        finally:
            self._stop_own_session()
        return self.listener.totals

    def _stop_own_session(self) -> None:
        """Stop the session ``run`` started (``dedup run``, spark-submit), its state stores closed
        first (``runtime.stop_session``); a given or shared one keeps running. The next ``run``
        starts a new one."""
        if not self.owns_session or self.spark is None:
            return
        spark, self.spark, self.owns_session = self.spark, None, False
        try:
            stop_session(spark)
        except Exception as exc:  # the work is committed: a JVM that died meanwhile only ends sooner
            log.warning("stopping Spark failed (%s: %s); its work was committed", type(exc).__name__, exc)

    def _jvm_alive(self) -> bool:
        """Whether Spark's JVM still answers (it dies with the driver in ``local[N]``)."""
        if self.spark is None:
            return True
        try:
            jvm = self.spark.sparkContext._jvm
            if jvm is None:  # no gateway: as when calling it raises (caught below)
                return False
            jvm.java.lang.System.nanoTime()
            return True
        except Exception:
            return False

    def _count_failure(self) -> None:
        if self.metrics is not None:
            self.metrics.increment("failed_batches")

    def run_retrying_writes(self, stop: threading.Event, available_now: bool | None = None) -> Accounting | None:
        """``run_query``, started again after a micro-batch whose write the JVM sink aborted, per the
        ``transient`` policy (``_restart.run_retrying_writes``); the counts go on across those starts."""
        carried = Accounting()

        def start() -> Accounting:
            nonlocal carried
            try:
                return self.run_query(stop, available_now, carried)
            finally:
                if self.aborted_batch is not None:
                    carried = self.listener.totals

        return run_retrying_writes(start, lambda: self.aborted_batch, self.policies, stop)

    def run_query(
        self, stop: threading.Event, available_now: bool | None = None, carried: Accounting | None = None
    ) -> Accounting:
        """Start the query once and wait for it; the writer's clients are closed when it ends.
        ``carried``: counts of earlier starts its own are added to."""
        spark = self.session()
        self.aborted_batch = None
        try:
            self._prepare(spark)
            require_endpoints(spark, self.endpoints(), self.query.kafka_settings)  # topics, input directories
            self.lease.claim(spark)  # one instance per checkpoint: a second is refused (CheckpointInUse)
            self._listen(spark)
            if carried is not None:
                self.listener.totals.add(carried)
            assert self.watermarks is not None  # opened by _listen
            self.guard.prepare(spark)  # refuses an incompatible checkpoint first
            judged = self.judged()  # reads the checkpoint only: the lease settles meanwhile
            self.lease.hold()  # ours once settled, or CheckpointInUse; the checkpoint is written from here on
            self.guard.record(spark, self.watermarks.highest)
            self.writer.open(spark)  # e.g. the exactly-once identity kept in the checkpoint
            spark.streams.addListener(self.listener)
            try:
                bounded = self.bounded(available_now)
                self.stopper.arm()
                query = self.start_query(bounded, judged)
                self.listener.query_id = str(query.id)
                await_query(query, bounded, self.lease.or_lost(stop), self.stopper)
                self._counted(str(query.runId))
            finally:
                spark.streams.removeListener(self.listener)
        finally:
            if self.sink_hooks is not None:
                self.aborted_batch = self.sink_hooks.aborted_batch()
                self.sink_hooks.unregister(spark)
                self.sink_hooks = None
            try:
                self.writer.close()
            finally:
                self.lease.release()  # raises CheckpointInUse if another instance took the checkpoint
        return self.listener.totals

    def _counted(self, run_id: str) -> None:
        """Wait until the listener has the counts of every micro-batch the query run completed."""
        if not self.listener.wait_for_end(run_id):
            log.warning(
                "the streaming query's end was not reported within 10 s: the counts may leave out "
                "its last micro-batch (its output was committed)"
            )

    def _listen(self, spark: SparkSession) -> None:
        tracked = state_rows_tracked(spark, self.query.state_provider)
        self.state_rows = state_row_counter(spark)
        source = parse_uri(self.query.source)
        self.watermarks = BatchWatermarks.open(
            spark,
            self.query.checkpoint,
            self.query.idle_partition_timeout,
            source.topic if source.kind == "kafka" else None,
        )
        gauge = StateRowGauge.open(spark, self.query.checkpoint, self.state_rows)
        files = StateFiles.open(spark, self.query.checkpoint)
        self.listener = ProgressListener(self.metrics, self.on_batch, tracked, gauge, files, self.rules.rules)

    def _prepare(self, spark: SparkSession) -> None:
        """Checks the classpath and sets the SQL settings a query reads when it starts. A static
        SQL setting (``spark.sql.ui.retainedExecutions``: fixed when the session starts) is only
        checked: the session started here was given it; a session started before with another
        value stops the engine with a ``SparkSetupError`` naming it."""
        require_classes(spark, self.writer.kafka or parse_uri(self.query.source).kind == "kafka")
        runtime = state_store_conf(self.query.state_provider)
        if self.query.shuffle_partitions:
            runtime["spark.sql.shuffle.partitions"] = str(self.query.shuffle_partitions)
        runtime.update({k: v for k, v in self.query.conf.items() if k.startswith("spark.sql.")})
        for key, value in runtime.items():
            try:
                spark.conf.set(key, value)
            except AnalysisException as exc:
                if exc.getCondition() != "CANNOT_MODIFY_STATIC_CONFIG":
                    raise
                if (current := spark.conf.get(key)) != value:
                    raise SparkSetupError(
                        f"spark.conf: {key}={value!r} is a static Spark setting, fixed when the Spark session "
                        f"started (it has {current!r}); give it to the session that starts first "
                        "(spark-submit --conf)"
                    ) from None

    def _read(self, uri: str, max_records: int | None = None) -> DataFrame:
        spark = self.session()
        tasks = source_tasks(spark, self.query.source_tasks)
        return read_stream(spark, uri, max_records, self.query.consumer_options, tasks)

    def start_query(self, bounded: bool, judged: DataFrame):
        """Start the streaming query over ``judged`` (``self.judged()``), each micro-batch to
        ``write_batch``, or to the JVM sink when it is chosen and can write it (``jvm_sink``)."""
        options = self.jvm_sink(judged.sparkSession)
        stream = judged.writeStream
        writer = (
            (stream.foreachBatch(self.write_batch) if options is None else stream.format(JVM_SINK).options(**options))
            .option("checkpointLocation", self.query.checkpoint)
            .queryName(f"streamdedup-{id(self)}")
        )
        trigger = {"availableNow": True} if bounded else {"processingTime": self.query.trigger}
        return writer.trigger(**trigger).start()

    def jvm_sink(self, spark: SparkSession) -> dict[str, str] | None:
        """The JVM sink's options (``streamdedup.output.KafkaSink``: each batch written with no call
        into Python) when ``spark.streamdedup.sink`` is ``jvm`` and it can write the batches: the
        operator's verdicts, every output on the events' Kafka cluster (``writer.sink_options``).
        Its hooks (``BatchHooks``: the lease's check, the watermarks' ``prepare`` and ``advance``)
        are registered for this run; the watermark gauges follow each batch's progress."""
        if spark.conf.get(SINK_SETTING, "foreach-batch") != "jvm" or not self.judge.verdicts_in_stream:
            return None
        options = self.writer.sink_options()
        if options is None:
            return None
        assert self.watermarks is not None  # opened by _listen
        hooks = SinkHooks.register(spark, self.watermarks.files, int(self.lease.timeout * 500))
        self.lease.watch(hooks.renewed, hooks.lost)
        self.sink_hooks = hooks
        log.info("each micro-batch is written by the JVM sink (%s), with no call into Python", JVM_SINK)
        self.listener.on_batch = self._after_sink_batch(hooks, self.listener.on_batch)
        return {**options, "hooks": hooks.name}

    def _after_sink_batch(
        self, hooks: SinkHooks, on_batch: Callable[[Accounting], None] | None
    ) -> Callable[[Accounting], None]:
        def after(totals: Accounting) -> None:
            hooks.report_skipped()
            if self.metrics is not None and self.watermarks is not None:
                self.watermarks.publish_now(self.metrics)
            if on_batch is not None:
                on_batch(totals)

        return after

    def write_batch(self, batch: DataFrame, batch_id: int) -> None:
        """The ``foreachBatch`` function: judge (``Judge.judge``), write, let the judge settle, count.

        Caching is decided by the judge: every read of an uncached DataFrame runs the plan
        again (the source read, the stateful operator, or the Redis claims). A write retried
        after a failure reads the batch again: it is cached from then on and, when the plan
        observed its accounting, recounted (the failed attempt's tasks counted).
        """
        with self.stopper.translated(), self.timings.batch(batch_id) as timed:
            with timed.phase("lease"):
                self.lease.confirm()  # an instance that lost its checkpoint writes nothing more
            assert self.watermarks is not None  # opened by _listen before the query started
            with timed.phase("watermarks"):
                self.watermarks.prepare(batch_id)
            tools = BatchTools(
                self.plan(),
                self.writer.routed,
                lambda work: retried(work, self.policies, self.stopper.sleep),
                lambda judged: self.listener.recount(batch_id, *counted(judged, self.rules.rules)),
            )
            with timed.phase("write"), self.judge.judge(batch, batch_id, self.writer.reads, tools) as judged:
                self._write(judged, batch_id, tools)
            with timed.phase("watermarks"):
                self.watermarks.advance(batch_id, judged.newest)
            if self.metrics is not None:
                self.watermarks.publish(self.metrics)

    def _write(self, judged: JudgedBatch, batch_id: int, tools: BatchTools) -> None:
        recount, attempts = judged.observed and not judged.cached, 0

        def attempt():
            nonlocal attempts
            attempts += 1
            if attempts > 1:
                judged.persist()
            self.writer.write(judged.df, batch_id)

        tools.retried(attempt)
        if attempts > 1 and recount:
            tools.recount(judged.df)
