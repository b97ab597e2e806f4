"""The composition root: the one place that knows every adapter.

The engine, the state store and each source and sink are chosen by configuration here.
Adapters with heavy libraries (Kafka, Redis, Spark) are imported only when chosen.
"""

from __future__ import annotations

from dependency_injector import containers, providers

from adapters.files.jsonl import JsonlDeadLetterSink, JsonlSink, JsonlSource
from adapters.files.notifications import JsonlNotificationSink, JsonlNotificationSource
from adapters.memory.engine import InMemoryEngine
from adapters.memory.state_store import InMemoryStateStore
from adapters.system import InMemoryMetrics, SystemClock
from domain.dedup import Deduplicator
from domain.delivery import Delivery
from domain.policies import Policies
from domain.rules import DedupRule, RuleSet, TimeBasis, UnknownTypePolicy


class UsageError(Exception):
    """A combination of settings the application cannot run; one line, names the settings."""


def build_rules(rules: dict, unknown_types: str) -> RuleSet:
    compiled = {name: DedupRule(name, r["window"], tuple(r["key_fields"]), TimeBasis(r["time_basis"]),
                                r["allowed_lateness"])
                for name, r in rules.items()}
    return RuleSet(compiled, UnknownTypePolicy(unknown_types))


def build_state_store(uri: str, migration: dict | None = None, rules: RuleSet | None = None):
    """The state store at ``uri``; with ``migration.state_from``, consulting that old store read-only."""
    store = _state_store(uri)
    if not migration or not migration.get("state_from"):
        return store
    from domain.migration import KeyTranslation, MigratingStateStore
    translations = {}
    for rule, old_fields in (migration.get("old_key_fields") or {}).items():
        try:
            translations[rule] = KeyTranslation(tuple(old_fields), rules.rules[rule].key_fields)
        except (ValueError, KeyError) as exc:
            raise UsageError(f"invalid setting migration.old_key_fields.{rule}: {exc}") from None
    return MigratingStateStore(store, _state_store(migration["state_from"]), rules.max_retention, translations)


def _state_store(uri: str):
    if uri == "memory":
        return InMemoryStateStore()
    if uri.startswith("memory:"):
        return InMemoryStateStore(snapshot=uri.removeprefix("memory:"))
    if uri.startswith(("redis://", "rediss://", "unix://")):
        from adapters.redis.state_store import RedisStateStore
        return RedisStateStore(uri)
    raise UsageError(f"invalid setting state: {uri!r} is not 'memory', 'memory:SNAPSHOT_PATH' or a redis:// URL")


def inspect_state_store(uri: str, sample_size: int = 3):
    """A ``StateReport`` for a saved in-memory snapshot, a Redis store or a Spark checkpoint."""
    from pathlib import Path

    from adapters.memory.state_store import read_snapshot
    from domain.inspection import inspect_state

    if uri.startswith("spark:"):
        from adapters.spark.session import build_session
        from adapters.spark.state_reader import inspect_checkpoint
        location = uri.removeprefix("spark:")
        if not Path(location).exists():
            raise UsageError(f"invalid setting state: no checkpoint at {location}")
        return inspect_checkpoint(build_session(), location, sample_size)
    if uri.startswith("memory:"):
        path = Path(uri.removeprefix("memory:"))
        if not path.exists():
            raise UsageError(f"invalid setting state: no snapshot at {path}")
        return inspect_state(f"snapshot {path}", read_snapshot(path), sample_size, path.stat().st_size)
    store = build_state_store(uri)
    if not hasattr(store, "scan_items"):
        raise UsageError(f"invalid setting state: {uri!r} cannot be inspected (a volatile in-memory state)")
    try:
        return inspect_state(f"redis {uri}", store.scan_items(), sample_size, store.memory_bytes())
    finally:
        store.close()


def migrate_state(source: str, target: str, rules: RuleSet, old_key_fields: dict[str, tuple[str, ...]],
                  dry_run: bool) -> list[str]:
    """Plan the offline step of a state migration and, unless ``dry_run``, do it; returns the steps."""
    if source.startswith("spark:") and target.startswith("spark:"):
        from adapters.spark.migration import migrate, plan_migration
        from adapters.spark.session import build_session
        spark = build_session()
        plan = plan_migration(spark, source.removeprefix("spark:"), target.removeprefix("spark:"), rules,
                              old_key_fields)
        if not dry_run:
            migrate(spark, plan)
        return plan.describe()
    if source.startswith(("redis://", "rediss://")) and target.startswith(("redis://", "rediss://")):
        from adapters.redis.migration import apply_redis_migration, plan_redis_migration
        redis_plan = plan_redis_migration(source, target, rules, old_key_fields)
        steps = redis_plan.describe()
        return steps if dry_run else [*steps, f"wrote {apply_redis_migration(redis_plan)} keys"]
    raise UsageError(f"invalid setting --from/--to: migrate spark:CHECKPOINT to spark:NEW_CHECKPOINT or redis:// "
                     f"to redis://, got {source!r} and {target!r}")


def file_path(uri: str | None, setting: str) -> str:
    if uri is None:
        raise UsageError(f"missing setting {setting}: give a file:PATH or '-'")
    if uri == "-" or uri.startswith("file:"):
        return uri.removeprefix("file:") or "-"
    raise UsageError(f"invalid setting {setting}: the memory engine reads and writes file:PATH or '-', "
                     f"got {uri!r} (use --engine kafka for kafka:// URIs)")


def build_memory_engine(core: Deduplicator, metrics, source: str, sink: str, dlq: str | None,
                        notifications: str | None, notifications_out: str | None,
                        batch_size: int, poll_timeout: float) -> InMemoryEngine:
    from domain.pipeline import BatchPipeline
    dlq_path = file_path(dlq or "file:dead-letters.jsonl", "dlq")
    notes_in = JsonlNotificationSource(file_path(notifications, "notifications")) if notifications else None
    notes_out = JsonlNotificationSink(file_path(notifications_out, "notifications_out")) if notifications_out else None
    delivery = Delivery(core, JsonlSink(file_path(sink, "sink")), JsonlDeadLetterSink(dlq_path), notes_out)
    return InMemoryEngine(BatchPipeline(core, JsonlSource(file_path(source, "source")), delivery, metrics,
                                        notifications=notes_in, batch_size=batch_size, poll_timeout=poll_timeout))


def build_kafka_engine(core: Deduplicator, metrics, source: str, sink: str, dlq: str | None,
                       notifications: str | None, notifications_out: str | None, batch_size: int,
                       poll_timeout: float, kafka: dict):
    from adapters.kafka.engine import build_kafka_engine as build
    if not dlq:
        raise UsageError("--dlq kafka://HOST:PORT/TOPIC is required with --engine kafka "
                         "(dead letters are never dropped)")
    if kafka["delivery"] == "exactly-once" and isinstance(core.state, InMemoryStateStore):
        raise UsageError("invalid setting kafka.delivery (DEDUP_KAFKA__DELIVERY): exactly-once needs a state "
                         "that survives a crash (--state redis://HOST:PORT/DB); the in-memory state does not")
    return build(core, source, sink, dlq, notifications_uri=notifications,
                 notifications_out_uri=notifications_out,
                 exactly_once=kafka["delivery"] == "exactly-once", kafka_settings=kafka["config"],
                 transactional_id=kafka["transactional_id"], batch_size=batch_size, metrics=metrics,
                 poll_timeout=poll_timeout)


def spark_uri(uri: str | None, setting: str) -> str:
    """A JSONL directory (``file:DIR``) or a Kafka topic; the Spark engine has no stdin/stdout."""
    if uri and uri != "-" and uri.startswith(("file:", "jsonl:", "kafka://")):
        return uri
    raise UsageError(f"invalid setting {setting}: the spark engine reads and writes file:DIRECTORY or "
                     f"kafka://HOST:PORT/TOPIC, got {uri!r}")


def build_spark_engine(rules: RuleSet, metrics, source: str, sink: str, dlq: str | None, spark: dict,
                       kafka: dict, policies: Policies, state: str, notifications: str | None):
    from adapters.spark.batch_writers import writer_for
    from adapters.spark.kafka_options import spark_kafka_options
    from adapters.spark.policy_engine import PolicySparkEngine
    from adapters.spark.restart import RestartingEngine
    from domain.restart import parse_restart
    try:
        kafka_options = {role: spark_kafka_options(kafka["config"], role) for role in ("consumer", "producer")}
    except ValueError as exc:
        raise UsageError(f"invalid setting kafka.config (DEDUP_KAFKA__CONFIG): {exc}") from None
    sink, dlq = spark_uri(sink, "sink"), spark_uri(dlq or "file:dead-letters", "dlq")
    writer = writer_for(sink, dlq, kafka["delivery"], spark["checkpoint"], policies, kafka["config"],
                        kafka["transactional_id"], kafka_options["producer"])
    engine = PolicySparkEngine(rules, spark_uri(source, "source"), sink, dlq, checkpoint=spark["checkpoint"],
                               trigger_interval=spark["trigger"], available_now=spark["available_now"],
                               state_provider=spark["state_provider"], master=spark["master"],
                               max_records_per_batch=spark["max_offsets_per_trigger"],
                               shuffle_partitions=spark["shuffle_partitions"], conf=spark["conf"],
                               kafka_options=kafka_options, metrics=metrics, writer=writer, policies=policies,
                               notifications=spark_uri(notifications, "notifications") if notifications else None,
                               redis_state=spark_redis_state(state, spark["shuffle_partitions"]))
    return RestartingEngine(engine, parse_restart(spark["restart"]))


def spark_redis_state(uri: str, partitions: int):
    """``None`` for Spark's own state store (``memory``, the default), a Redis judge for ``redis://``."""
    if uri == "memory":
        return None
    if uri.startswith(("redis://", "rediss://", "unix://")):
        from adapters.spark.redis_state import RedisBatchJudge
        return RedisBatchJudge(uri, partitions=partitions)
    raise UsageError(f"invalid setting state: the spark engine keeps its state in its checkpoint ('memory') "
                     f"or in Redis (redis://HOST:PORT/DB), got {uri!r}")


class Container(containers.DeclarativeContainer):
    config = providers.Configuration(strict=True)

    clock = providers.Singleton(SystemClock)
    metrics = providers.Singleton(InMemoryMetrics)
    rules = providers.Singleton(build_rules, config.rules, config.unknown_types)
    policies = providers.Singleton(Policies.from_strings, config.policies)
    state_store = providers.Singleton(build_state_store, config.state, config.migration, rules)
    core = providers.Singleton(Deduplicator, rules=rules, state=state_store, clock=clock, policies=policies)

    engine = providers.Selector(
        config.engine,
        memory=providers.Factory(build_memory_engine, core, metrics, config.source, config.sink, config.dlq,
                                 config.notifications, config.notifications_out, config.batch_size,
                                 config.poll_timeout),
        kafka=providers.Factory(build_kafka_engine, core, metrics, config.source, config.sink, config.dlq,
                                config.notifications, config.notifications_out, config.batch_size,
                                config.poll_timeout, config.kafka),
        spark=providers.Factory(build_spark_engine, rules, metrics, config.source, config.sink, config.dlq,
                                config.spark, config.kafka, policies, config.state, config.notifications),
    )


def container_for(settings) -> Container:
    container = Container()
    values = settings.model_dump(mode="json")
    values["rules"] = {name: rule.model_dump(mode="json") for name, rule in settings.effective_rules().items()}
    container.config.from_dict(values)
    return container
