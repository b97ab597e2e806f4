"""The composition root: the one place that knows every adapter.

``Container`` wires constructors by keyword from the typed ``Settings`` (``settings.provided.…``):
the engine, the state store and each source and sink are chosen by configuration here.
Adapters with heavy libraries (Kafka, Redis, Spark) are imported only when chosen. Tests
override a provider (``container.state_store.override(providers.Object(store))``) instead of
building by hand.
"""

from __future__ import annotations

import logging

from dependency_injector import containers, providers

from adapters import SystemClock
from adapters.files import (
    JsonlDeadLetterSink,
    JsonlDuplicateSink,
    JsonlNotificationSink,
    JsonlNotificationSource,
    JsonlSink,
    JsonlSource,
)
from adapters.json import read_event
from adapters.memory import InMemoryEngine, InMemoryStateStore
from adapters.metrics import PrometheusMetrics
from app._errors import UsageError
from app._setting_names import env_name
from app._settings import (
    KafkaSettings,
    MigrationSettings,
    PolicySettings,
    RedisSettings,
    RuleSettings,
    Settings,
    SparkSettings,
)
from app._uris import CHECKPOINT, MEMORY_DEAD_LETTERS, REDIS_SCHEMES
from domain import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_BYTES,
    BatchPipeline,
    Deduplicator,
    DedupRule,
    Delivery,
    Policies,
    RuleSet,
    SavedState,
    SetupError,
    StateStore,
    UnknownTypePolicy,
    Watermarks,
    parse_restart,
    redact_uri,
)

log = logging.getLogger(__name__)


def _window(name: str, rule: RuleSettings) -> int:
    if rule.window is None:  # the settings refuse it (Settings._rules_have_windows); a caller's own may not
        raise UsageError(f"invalid setting rules.{name}.window: a rule needs a window")
    return rule.window


def build_rules(rules: dict[str, RuleSettings], unknown_types: UnknownTypePolicy) -> RuleSet:
    compiled = {
        name: DedupRule(name, _window(name, r), tuple(r.key_fields), r.time_basis, r.allowed_lateness, r.max_ahead)
        for name, r in rules.items()
    }
    return RuleSet(compiled, unknown_types)


def build_metrics(rules: RuleSet, latency_objective: float) -> PrometheusMetrics:
    """The service's metrics; ``latency_objective`` is exported for the latency alert to compare with."""
    metrics = PrometheusMetrics(rules.rules)
    metrics.gauge("latency_objective_seconds", latency_objective)
    return metrics


def build_policies(policies: PolicySettings) -> Policies:
    return Policies.from_strings(policies.model_dump())


def build_state_store(
    uri: str,
    migration: MigrationSettings | None = None,
    rules: RuleSet | None = None,
    redis: RedisSettings | None = None,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
) -> StateStore:
    """The state store at ``uri``; with ``migration.state_from``, consulting that old store read-only.

    ``redis``: given (a job that judges with the store), every Redis store is first checked for
    an evicting ``maxmemory-policy`` (``adapters.redis._eviction``); ``dedup state`` only reads.
    ``idle_timeout``: the job's ``idle_partition_timeout``; a Redis store's expiry sweep stops
    waiting for a source partition silent that long (``adapters.redis._state_store``).
    """
    store = _state_store(uri, redis, idle_timeout)
    if migration is None or not migration.state_from:
        return store
    from domain import KeyTranslation, MigratingStateStore

    if rules is None:
        raise ValueError("a migration needs the job's rules")
    translations = {}
    for rule, old_fields in migration.old_key_fields.items():
        try:
            translations[rule] = KeyTranslation(tuple(old_fields), rules.rules[rule].key_fields)
        except (ValueError, KeyError) as exc:
            raise UsageError(f"invalid setting migration.old_key_fields.{rule}: {exc}") from None
    old = _state_store(migration.state_from, redis, idle_timeout)
    return MigratingStateStore(store, old, rules.max_retention, translations, started_at=old_state_ends(old))


def old_state_ends(old) -> dict[str, int]:
    """Per rule, the old state's newest emission time: its retirement clock starts there.

    No old entry outlives ``newest + max_retention``; counting from the new job's first event
    instead would retire live entries when that event is older than the old job's last one.
    """
    ends = old.newest_emission_times()
    log.info(
        "migration: the old state's newest emission per rule is %s; each rule's old entries are "
        "consulted until its watermark is one retention past it",
        ends,
    )
    return ends


def _state_store(
    uri: str, redis: RedisSettings | None = None, idle_timeout: float = DEFAULT_IDLE_TIMEOUT
) -> StateStore:
    if uri == "memory":
        return InMemoryStateStore()
    if uri.startswith("memory:"):
        try:
            return InMemoryStateStore(snapshot=uri.removeprefix("memory:"))
        except SetupError as exc:
            raise UsageError(f"invalid setting state (DEDUP_STATE): {exc}") from None
    if uri.startswith(REDIS_SCHEMES):
        return _redis_store(uri, redis, idle_timeout)
    if uri == CHECKPOINT:
        raise UsageError(
            "invalid setting state: 'checkpoint' is the spark engine's state, kept in its checkpoint; "
            "the memory and kafka engines keep theirs in memory, memory:SNAPSHOT_PATH or redis://…"
        )
    raise UsageError(
        f"invalid setting state: {redact_uri(uri)!r} is not 'memory', 'memory:SNAPSHOT_PATH' or a redis:// URL"
    )


def build_saved_state(uri: str) -> SavedState:
    """The state at ``uri`` read while no job runs on it (``dedup state``): a ``memory:PATH``
    snapshot, a Redis database or a ``spark:CHECKPOINT_DIR``. The one place that tells them
    apart by their URI."""
    if uri.startswith("spark:"):
        from adapters.spark import CheckpointState

        return CheckpointState(uri.removeprefix("spark:"))
    if uri.startswith("memory:"):
        from adapters.memory import SnapshotState

        return SnapshotState(uri.removeprefix("memory:"))
    if uri.startswith(REDIS_SCHEMES):
        from adapters.redis import RedisSavedState

        return RedisSavedState(uri)
    if uri == "memory":
        raise UsageError("invalid setting state: 'memory' cannot be read (a volatile in-memory state)")
    raise UsageError(
        f"invalid setting state: {redact_uri(uri)!r} is not 'memory:SNAPSHOT_PATH', a redis:// URL "
        "or 'spark:CHECKPOINT_DIR'"
    )


def _redis_store(uri: str, settings: RedisSettings | None, idle_timeout: float = DEFAULT_IDLE_TIMEOUT):
    """A ``RedisStateStore``; with ``settings``, refused on an evicting server unless they accept it."""
    from adapters.redis import RedisStateStore

    store = RedisStateStore(uri, idle_timeout=idle_timeout)
    if settings is None:
        return store
    from adapters.redis import refuse_eviction, refuse_old_server

    try:
        refuse_old_server(store)
        refuse_eviction(store, allowed=settings.allow_eviction)
    except BaseException:
        store.close()
        raise
    return store


def file_path(uri: str | None, setting: str) -> str:
    if uri is None:
        raise UsageError(f"missing setting {setting}: give a file:PATH or '-'")
    if uri == "-" or uri.startswith("file:"):
        return uri.removeprefix("file:") or "-"
    hint = " (kafka:// is read and written by --engine kafka or spark)" if uri.startswith("kafka://") else ""
    raise UsageError(
        f"invalid setting {setting}: the memory engine reads and writes file:PATH or '-', got {redact_uri(uri)!r}{hint}"
    )


def build_memory_engine(
    *,
    core: Deduplicator,
    metrics,
    source: str,
    sink: str,
    dlq: str | None,
    notifications: str | None,
    notifications_out: str | None,
    batch_size: int,
    poll_timeout: float,
    max_batch_delay: float,
    dlq_max_bytes: int = DEFAULT_MAX_BYTES,
    duplicates: str | None = None,
) -> InMemoryEngine:
    dlq_path = file_path(dlq or MEMORY_DEAD_LETTERS, "dlq")
    paths = {
        "sink": file_path(sink, "sink"),
        "notifications_out": notifications_out and file_path(notifications_out, "notifications_out"),
        "duplicates": duplicates and file_path(duplicates, "duplicates"),
    }
    # the inputs first: a run refused because an input cannot be read creates no output file
    events = opened("source", JsonlSource, file_path(source, "source"))
    notes_in = (
        opened("notifications", JsonlNotificationSource, file_path(notifications, "notifications"))
        if notifications
        else None
    )
    notes_out = (
        opened("notifications_out", JsonlNotificationSink, paths["notifications_out"]) if notifications_out else None
    )
    reports = opened("duplicates", JsonlDuplicateSink, paths["duplicates"]) if duplicates else None
    delivery = Delivery(
        core,
        opened("sink", JsonlSink, paths["sink"]),
        opened("dlq", JsonlDeadLetterSink, dlq_path, dlq_max_bytes),
        notes_out,
        reports,
    )
    return InMemoryEngine(
        BatchPipeline(
            core,
            events,
            delivery,
            metrics,
            notifications=notes_in,
            batch_size=batch_size,
            poll_timeout=poll_timeout,
            max_batch_delay=max_batch_delay,
        )
    )


def opened(setting: str, adapter, *args):
    """``adapter(*args)``, a file or stdio opened for ``setting``: what cannot be opened names the setting."""
    try:
        return adapter(*args)
    except SetupError as exc:
        raise UsageError(f"invalid setting {setting} ({env_name([setting])}): {exc}") from None


def build_kafka_engine(
    *,
    core: Deduplicator,
    metrics,
    source: str,
    sink: str,
    dlq: str | None,
    notifications: str | None,
    notifications_out: str | None,
    batch_size: int,
    poll_timeout: float,
    max_batch_delay: float,
    kafka: KafkaSettings,
    dlq_max_bytes: int = DEFAULT_MAX_BYTES,
    duplicates: str | None = None,
):
    from adapters.kafka import build_kafka_engine as build

    if not dlq:
        raise UsageError(
            "--dlq kafka://HOST:PORT/TOPIC is required with --engine kafka (dead letters are never dropped)"
        )
    exactly_once = kafka.delivery == "exactly-once"
    if exactly_once and not core.state.durable:
        raise UsageError(
            "invalid setting kafka.delivery (DEDUP_KAFKA__DELIVERY): exactly-once needs a state "
            "that survives a crash (--state redis://HOST:PORT/DB); the in-memory state does not"
        )
    return build(
        core,
        source,
        sink,
        dlq,
        notifications_uri=notifications,
        notifications_out_uri=notifications_out,
        exactly_once=exactly_once,
        kafka_settings=kafka.config,
        transactional_id=kafka.transactional_id,
        batch_size=batch_size,
        metrics=metrics,
        poll_timeout=poll_timeout,
        max_batch_delay=max_batch_delay,
        dead_letter_max_bytes=dlq_max_bytes,
        duplicates_uri=duplicates,
    )


def spark_uri(uri: str | None, setting: str) -> str:
    """A JSONL directory (``file:DIR``) or a Kafka topic; the Spark engine has no stdin/stdout."""
    if uri and uri != "-" and uri.startswith(("file:", "jsonl:", "kafka://")):
        return uri
    raise UsageError(
        f"invalid setting {setting}: the spark engine reads and writes file:DIRECTORY or "
        f"kafka://HOST:PORT/TOPIC, got {redact_uri(uri or '')!r}"
    )


def build_spark_engine(
    *,
    rules: RuleSet,
    policies: Policies,
    metrics,
    source: str,
    sink: str,
    dlq: str | None,
    notifications: str | None,
    state: str,
    spark: SparkSettings,
    kafka: KafkaSettings,
    redis: RedisSettings | None = None,
    idle_partition_timeout: float | None = None,
    dlq_max_bytes: int = DEFAULT_MAX_BYTES,
    settings_file: str | None = None,
    duplicates: str | None = None,
):
    """``settings_file``: the file the settings came from (``--config``), named in the commands the
    engine's refusals suggest."""
    from adapters.spark import build_spark_engine as build

    if state != CHECKPOINT and not state.startswith(REDIS_SCHEMES):
        raise UsageError(
            f"invalid setting state: the spark engine keeps its state in its checkpoint ('checkpoint') "
            f"or in Redis (redis://HOST:PORT/DB), got {redact_uri(state)!r}"
        )
    if state.startswith(REDIS_SCHEMES):
        _redis_store(state, redis or RedisSettings()).close()  # the executors' stores: the same eviction check
    query = spark.model_dump(exclude={"restart"}) | {"settings_file": settings_file}
    if idle_partition_timeout is not None:
        query["idle_partition_timeout"] = idle_partition_timeout
    try:
        return build(
            rules,
            policies,
            source=spark_uri(source, "source"),
            sink=spark_uri(sink, "sink"),
            dead_letters=spark_uri(dlq or "file:dead-letters", "dlq"),
            state=state,
            notifications=spark_uri(notifications, "notifications") if notifications else None,
            delivery=kafka.delivery,
            kafka_config=kafka.config,
            transactional_id=kafka.transactional_id,
            commit_replication=kafka.commit_topic_replication_factor,
            restart=parse_restart(spark.restart),
            metrics=metrics,
            dead_letter_max_bytes=dlq_max_bytes,
            duplicates=spark_uri(duplicates, "duplicates") if duplicates else None,
            **query,
        )
    except ValueError as exc:
        raise UsageError(f"invalid setting kafka.config (DEDUP_KAFKA__CONFIG): {exc}") from None


class Container(containers.DeclarativeContainer):
    settings = providers.Dependency(instance_of=Settings)
    settings_file: providers.Object[str | None] = providers.Object(
        None
    )  # the settings' file (--config), when they came from one

    clock = providers.Singleton(SystemClock)
    rules = providers.Singleton(
        build_rules, rules=settings.provided.effective_rules.call(), unknown_types=settings.provided.unknown_types
    )
    metrics = providers.Singleton(build_metrics, rules=rules, latency_objective=settings.provided.latency_objective)
    policies = providers.Singleton(build_policies, policies=settings.provided.policies)
    state_store = providers.Singleton(
        build_state_store,
        uri=settings.provided.state,
        migration=settings.provided.migration,
        rules=rules,
        redis=settings.provided.redis,
        idle_timeout=settings.provided.idle_partition_timeout,
    )
    watermarks = providers.Factory(Watermarks, idle_timeout=settings.provided.idle_partition_timeout)
    core = providers.Singleton(
        Deduplicator,
        rules=rules,
        state=state_store,
        clock=clock,
        policies=policies,
        watermarks=watermarks,
        read_event=providers.Object(read_event),
    )

    _io = {
        "source": settings.provided.source,
        "sink": settings.provided.sink,
        "dlq": settings.provided.dlq,
        "dlq_max_bytes": settings.provided.dlq_max_bytes,
        "notifications": settings.provided.notifications,
        "duplicates": settings.provided.duplicates,
    }
    _batches = {
        "notifications_out": settings.provided.notifications_out,
        "batch_size": settings.provided.batch_size,
        "poll_timeout": settings.provided.poll_timeout,
        "max_batch_delay": settings.provided.max_batch_delay,
    }
    engine = providers.Selector(
        settings.provided.engine,
        memory=providers.Factory(build_memory_engine, core=core, metrics=metrics, **_io, **_batches),
        kafka=providers.Factory(
            build_kafka_engine, core=core, metrics=metrics, kafka=settings.provided.kafka, **_io, **_batches
        ),
        spark=providers.Factory(
            build_spark_engine,
            rules=rules,
            policies=policies,
            metrics=metrics,
            state=settings.provided.state,
            spark=settings.provided.spark,
            kafka=settings.provided.kafka,
            redis=settings.provided.redis,
            idle_partition_timeout=settings.provided.idle_partition_timeout,
            settings_file=settings_file,
            **_io,
        ),
    )


def container_for(settings: Settings, settings_file: str | None = None) -> Container:
    return Container(settings=providers.Object(settings), settings_file=providers.Object(settings_file))
