"""Building the SparkSession: the edge where Spark's settings live.

One session per process. Started by ``dedup run`` (no JVM yet), the session gets the
engine's defaults, the configured ``spark.conf`` over them, ``--master`` (``local[*]``
unless configured), and on its classpath the operator jar and, when present, the
pre-fetched Kafka connector jars (``.cache/jars/spark-kafka/``, scripts/bootstrap-services.sh).

Started by ``spark-submit`` (the JVM is already running), spark-submit's ``--master`` is
kept and no jar is added: what ``--jars``/``--packages`` put on the classpath is used, and
a missing class is reported by ``require_classes`` with the jar to pass.

Spark's own log: with a ``_spark_log.SparkLog`` (``dedup run``: ``spark.log_file``) it goes to
that file, not the terminal; without one (the state commands, the tests' session) the JVM
logs warnings and errors to stderr (``conf/log4j2.properties``).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from adapters.spark.runtime._class_archive import class_archive, with_class_archive
from adapters.spark.runtime._code_archive import ARCHIVE_PREFIX, code_archive
from adapters.spark.runtime._jars import OPERATOR_CLASS, cache_dir, connector_jars, local_files_jar, operator_jar
from adapters.spark.runtime._spark_log import SparkLog
from adapters.spark.shared import SparkSetupError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

KAFKA_CLASS = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
DEFAULT_MASTER = "local[*]"
LOOPBACK = "127.0.0.1"
LOG_CONF = Path(__file__).resolve().parent / "conf" / "log4j2.properties"
STATE_PROVIDERS = {
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}

TRACK_ROWS = "spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows"
EXCLUDED_RULES = "spark.sql.optimizer.excludedRules"
# Optimizer rules that change none of the engine's plans (none of their runs was effective:
# held by tests/adapters/spark/runtime/test_optimizer_rules.py) but run at every micro-batch,
# which the driver plans again (its incremental plan, then the batch's DataFrame for the writer).
# Left out, the rules took 44–49 ms of a micro-batch against 53–58 ms, and a batch at 200
# events/s 260 and 278 ms against 309 and 288 ms (at 5,000: 284 and 295 against 315 and 302;
# two interleaved rounds of bench/spark_batch_phases.py --rates 200,5000 --deliveries
# at-least-once --warmup 15 --seconds 25 --rules, the defaults against
# --conf spark.sql.optimizer.excludedRules=, which puts them back; 2026-12-05). Optimizer rules only rewrite a plan
# into an equivalent one: leaving out one that changes nothing changes no result.
# SchemaPruning stays: it prunes the file source's ``_metadata`` columns.
UNUSED_OPTIMIZER_RULES = tuple(
    f"org.apache.spark.sql.{rule}"
    for rule in (
        "catalyst.optimizer.RemoveRedundantAliases",
        "execution.datasources.PruneFileSourcePartitions",
        "execution.datasources.PushVariantIntoScan",
        "catalyst.optimizer.OptimizeOneRowRelationSubquery",
        "catalyst.optimizer.SimplifyBinaryComparison",
        "catalyst.optimizer.UnwrapCastInBinaryComparison",
        "catalyst.optimizer.OptimizeUpdateFields",
        "catalyst.optimizer.OptimizeCsvJsonExprs",
        "catalyst.optimizer.NullDownPropagation",
        "catalyst.optimizer.CombineConcats",
        "catalyst.optimizer.EliminateAggregateFilter",
    )
)

# The engine's Spark settings under a job's own (build_session; on a cluster, under spark-submit's).
DEFAULT_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.variant.allowDuplicateKeys": "false",  # a member name twice is not_json (domain._events.parse_json)
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    # RocksDB memory is bounded for the whole executor, not per state store instance. At 512 MB
    # the memtables of 500,000-record micro-batches took the whole cache at ~4.5 M keys and every
    # lookup read its SST's filter block from disk again (a batch went from 14 s to over 6 min;
    # bench/large_state_bench.py, 2026-12-02); 2048 MB held 10 M keys at ~10 s a batch. 3072 MB
    # gives memtables of 512 MB (below) room beside the block cache.
    "spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage": "true",
    "spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB": "3072",
    "spark.sql.streaming.stateStore.rocksdb.writeBufferCacheRatio": "0.5",
    "spark.sql.streaming.stateStore.rocksdb.highPriorityPoolRatio": "0.1",
    # Memtables of 512 MB, not RocksDB's 64: in a state that expires as it goes, what grows with
    # the state is compaction, every flushed level-0 file of random keys merged into a base level
    # as large as a state partition's data; fewer, larger flushes merge it less often.
    # At 10 M live keys a 500,000-record batch ran at 0.93x and 0.86x its 1 M-key rate, against
    # 0.76x and 0.73x with 128 MB memtables in a 2,048 MB budget, the compaction CPU per
    # task-second 0.08 against 0.27 (two interleaved rounds of bench/large_state_bench.py
    # --live-keys 10000000 --retentions 1 --kill-at 0 and --live-keys 1000000 --retentions 6
    # --probe-every 3 --kill-at 0, 2026-12-05).
    # The write-buffer manager bounds them all (half the budget above): with more state
    # partitions an executor flushes each sooner (docs/operations/scaling-and-sizing.md).
    "spark.sql.streaming.stateStore.rocksdb.writeBufferSizeMB": "512",
    # RocksDB's row count reads every key before writing it (14–24% of the Kafka rate at 10 M
    # keys); the operator counts its keys itself (adapters.spark.metrics._state_rows).
    TRACK_ROWS: "false",
    # Whole-stage code for the parse + rules pipeline exceeds HotSpot's 8,000-bytecode JIT
    # limit; interpreted, it runs at half speed (bench/spark_kafka_bench.py).
    "spark.executor.extraJavaOptions": "-XX:-DontCompileHugeMethods",
    # No micro-batch without data: the operator's event-time timers would otherwise run one
    # after every batch that moved the watermark; keys due to expire go in the next batch with data.
    "spark.sql.streaming.noDataMicroBatches.enabled": "false",
    # Exactly-once output is written by one task per partition, in a transaction keyed by the
    # partition: a speculative copy would fence the original (adapters.spark.output._executor_writer).
    "spark.speculation": "false",
    # PySpark's DataFrame debugging wraps every pyspark function call in four more calls to the
    # JVM (the active session, a setting, the call site set and cleared): a start and two small
    # micro-batches made 24,241 py4j round trips with it, 10,763 without (the plan is built over
    # py4j at each start, and a micro-batch's routing runs through pyspark; held by
    # tests/adapters/spark/runtime/test_round_trips.py). Spark's own error messages lose the
    # Python line that built the failing expression.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    EXCLUDED_RULES: ",".join(UNUSED_OPTIMIZER_RULES),
}


def state_rows_tracked(spark: SparkSession, provider: str) -> bool:
    """Whether the state store counts its rows. RocksDB's count costs a read per write
    (14–24% of the Kafka → Kafka rate at 10 M keys, docs/design/measurements.md), so it is
    off by default and the operator counts its keys instead (``state_rows``)."""
    # pyspark types RuntimeConfig.get as Optional[str] even given a str default (then it is never None)
    return provider != "rocksdb" or spark.conf.get(TRACK_ROWS, DEFAULT_CONF[TRACK_ROWS]).strip().lower() != "false"  # type: ignore[union-attr]


def state_store_conf(provider: str) -> dict[str, str]:
    """The SQL settings selecting the state store; they take effect when a query starts."""
    if provider not in STATE_PROVIDERS:
        raise SparkSetupError(f"state provider must be one of {sorted(STATE_PROVIDERS)}, got {provider!r}")
    return {"spark.sql.streaming.stateStore.providerClass": STATE_PROVIDERS[provider]}


def session_started() -> bool:
    """True once this process has a SparkContext: a later ``build_session`` returns its session."""
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


def launched_by_spark_submit() -> bool:
    """True when spark-submit started this Python driver (its JVM and gateway already run)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(
    master: str | None = None,
    app_name: str = "streamdedup",
    conf: dict[str, str] | None = None,
    log: SparkLog | None = None,
):
    """The process's SparkSession (created on first call, then reused as Spark does); ``log``:
    where the session started by this call logs (see the module docstring)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    if launched_by_spark_submit():
        settings, master = _submitted(master, conf or {})
    else:
        master = master or DEFAULT_MASTER
        settings = {**DEFAULT_CONF, **_local_driver(master, log), **(conf or {})}
        settings["spark.jars"] = ",".join(classpath_jars(settings))
        settings = with_local_files_jar(settings)
        if master.startswith("local"):
            settings = forkless_local_files(settings)
        settings = with_class_archive(settings)
    if not settings.get("spark.master", master or DEFAULT_MASTER).startswith("local"):
        settings["spark.submit.pyFiles"] = ",".join(python_files(settings))
    if log is not None:
        log.capture_python_loggers()
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    with _sigint_kept():
        if not launched_by_spark_submit():
            _launch_jvm_in_its_own_session(settings, master, app_name)
        session = builder.getOrCreate()
    _driver_keeps_its_code()
    return session


def stop_session(spark: SparkSession) -> None:
    """Stop a session this process started, its state stores closed first.

    Spark's own ``stop`` leaves the executors' state stores loaded (``StateStore`` is closed only
    by its own ``stop``): their RocksDB instances and maintenance threads then ran into the JVM's
    exit, and the JVM crashed as it exited (SIGSEGV in a RocksDB thread, or ``std::bad_alloc``)
    after 3 of 4 bench runs holding 10 M keys or more, once their work was committed. In
    ``local[N]`` the executors are this JVM; a cluster's executors close theirs as they stop.
    Raises py4j's error when the JVM is already gone (``SparkEngine.run`` logs it and returns).
    """
    try:
        jvm = spark.sparkContext._jvm
        if jvm is not None:
            jvm.org.apache.spark.sql.execution.streaming.state.StateStore.stop()
    finally:
        spark.stop()


def _launch_jvm_in_its_own_session(settings: dict[str, str], master: str | None, app_name: str) -> None:
    """Start the driver's JVM (py4j gateway) as PySpark does, but in a session of its own.

    A service manager's stop (systemd, ``kill -- -PGID``) signals the whole process group: with
    the JVM in it, SIGTERM killed the JVM under the driver's graceful stop ("Spark's JVM is
    gone"). Outside the group, the JVM hears only the driver, and still exits with it (its
    stdin, a pipe from the driver, closes).
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:  # the process's JVM is running already
        return
    conf = SparkConf(loadDefaults=False).setAll(list(settings.items())).setAppName(app_name)
    if master:
        conf = conf.setMaster(master)
    SparkContext._ensure_initialized(gateway=launch_gateway(conf, popen_kwargs={"start_new_session": True}))


def _driver_keeps_its_code() -> None:
    """PySpark puts the shipped code archive on the driver's ``sys.path`` too; the driver keeps
    importing its own modules (and finding the files beside them, such as the JVM sources)."""
    sys.path[:] = [p for p in sys.path if not Path(p).name.startswith(ARCHIVE_PREFIX)]


@contextmanager
def _sigint_kept():
    """PySpark's SparkContext takes over SIGINT (cancel every job, raise KeyboardInterrupt);
    the application's own handler (Ctrl-C stops gracefully, like SIGTERM) is put back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = signal.getsignal(signal.SIGINT)
    try:
        yield
    finally:
        if handler is not None:
            signal.signal(signal.SIGINT, handler)


def _local_driver(master: str, log: SparkLog | None = None) -> dict[str, str]:
    """The driver started here: its JVM log (to ``log``'s file, else quiet on stderr) and, in
    local mode, loopback addresses only."""
    java_log = log.java_options() if log else f"-Dlog4j2.configurationFile={LOG_CONF.as_uri()}"
    conf = {"spark.driver.extraJavaOptions": f"{java_log} {DEFAULT_CONF['spark.executor.extraJavaOptions']}"}
    if on_loopback(master):
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
        conf.update({"spark.driver.host": LOOPBACK, "spark.driver.bindAddress": LOOPBACK})
    return conf


def on_loopback(master: str) -> bool:
    """Local mode, or a cluster whose master listens on this machine's loopback address: the
    driver then binds to loopback too, so executors reach it there and nothing else can."""
    return master.startswith("local") or master.split("://", 1)[-1].split(":")[0] in (LOOPBACK, "localhost")


def python_files(settings: dict[str, str]) -> list[str]:
    """Configured ``spark.submit.pyFiles`` plus the project's own code (``code_archive``), for
    executors in other processes."""
    files = [f for f in settings.get("spark.submit.pyFiles", "").split(",") if f]
    return [*files, str(code_archive())]


def _submitted(master: str | None, conf: dict[str, str]) -> tuple[dict[str, str], str | None]:
    """Settings over what spark-submit was given: its ``--master`` and ``--conf`` values win over
    the engine's defaults; a configured master replaces only spark-submit's own default."""
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's JVM, whose properties hold its settings
    submitted = SparkConf()
    defaults = {key: value for key, value in DEFAULT_CONF.items() if not submitted.contains(key)}
    if submitted.get("spark.master", DEFAULT_MASTER) != DEFAULT_MASTER:
        master = None
    settings = {**defaults, **conf, "spark.master": master or submitted.get("spark.master", DEFAULT_MASTER)}
    if submitted.contains("spark.submit.pyFiles"):
        py_files = submitted.get("spark.submit.pyFiles")
        assert py_files is not None  # contains() said it is set
        settings.setdefault("spark.submit.pyFiles", py_files)
    return settings, master


FORKLESS_LOCAL_FILES = {
    "spark.hadoop.fs.file.impl": "streamdedup.runtime.ForklessLocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "streamdedup.runtime.ForklessLocalFs",
}


def forkless_local_files(settings: dict[str, str]) -> dict[str, str]:
    """``settings`` with Hadoop's local file system replaced by its own small jar's
    ``streamdedup.runtime.ForklessLocalFileSystem`` (unless configured otherwise): without
    Hadoop's native library, every checkpoint file written to a local directory started a
    process or two (``chmod``, ``readlink``), 6–45 ms each on a micro-batch's critical path
    (docs/design/latency.md). For a local master only: its jar (``local_files_jar``) goes on
    the driver's own classpath (``with_local_files_jar``), which Spark reads before its
    ``spark.jars`` are loaded."""
    if any(settings.get(key, value) != value for key, value in FORKLESS_LOCAL_FILES.items()):
        return settings
    return {**with_local_files_jar(settings), **FORKLESS_LOCAL_FILES}


def with_local_files_jar(settings: dict[str, str]) -> dict[str, str]:
    """``settings`` with ``local_files_jar`` on the driver's own classpath. Every driver started
    here gets it, whatever its master (its classes serve only when ``forkless_local_files`` names
    them), so local and cluster drivers have one class path and map one class-data archive."""
    jar = str(local_files_jar())
    classpath = [p for p in settings.get("spark.driver.extraClassPath", "").split(os.pathsep) if p]
    if jar in classpath:
        return settings
    return {**settings, "spark.driver.extraClassPath": os.pathsep.join([*classpath, jar])}


def local_class_archive() -> Path:
    """Where the class-data archive of a driver started here with the engine's defaults is, local
    or on a cluster (``_class_archive``; ``app.spark_class_archive`` writes it)."""
    return class_archive(with_local_files_jar({}))


def classpath_jars(settings: dict[str, str]) -> list[str]:
    """Configured ``spark.jars`` plus the operator and, unless configured already, the connector."""
    jars = [j for j in settings.get("spark.jars", "").split(",") if j]
    jars.append(str(operator_jar()))
    if "spark-sql-kafka" not in settings.get("spark.jars.packages", "") + settings.get("spark.jars", ""):
        jars += [str(j) for j in connector_jars()]
    return jars


def class_loads(spark, name: str) -> bool:
    return bool(spark.sparkContext._jvm.org.apache.spark.util.Utils.classIsLoadable(name))


def require_classes(spark, kafka: bool) -> None:
    """Raise ``SparkSetupError`` naming the jar to pass when the operator (or the connector) is missing."""
    if not class_loads(spark, OPERATOR_CLASS):
        raise SparkSetupError(
            f"the engine's operator ({OPERATOR_CLASS}) is not on Spark's classpath: pass "
            f"--jars {operator_jar()} to spark-submit"
        )
    if kafka and not class_loads(spark, KAFKA_CLASS):
        raise SparkSetupError(
            "Spark's Kafka connector is not on the classpath: run scripts/bootstrap --services (fetches it into "
            f"{cache_dir() / 'jars' / 'spark-kafka'}), or give spark-submit --jars with those jars or "
            "--packages org.apache.spark:spark-sql-kafka-0-10_2.13:<the pyspark version>"
        )
