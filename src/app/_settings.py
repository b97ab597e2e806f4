"""Settings from the environment (``DEDUP_`` prefix, ``__`` for nesting), a config file, and the CLI.

Priority: command-line options, then environment variables, then the config file
(YAML, JSON or TOML, from ``--config`` or ``DEDUP_CONFIG``), then defaults. Every value is
validated; ``load_settings`` raises ``SettingsError`` with a one-line message naming the
setting (and its environment variable).
"""

from __future__ import annotations

import json
import logging
import os
import re
import tomllib
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings import SettingsError as _SourceError

from adapters.spark import DEFAULT_TRIGGER
from app._errors import SettingsError
from app._setting_names import Misspelt, misspelt, unknown_variables
from app._uris import CHECKPOINT, check_state_uri, check_stream_uri, distinct_files
from domain import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_AHEAD,
    DEFAULT_MAX_BATCH_DELAY,
    DEFAULT_MAX_BYTES,
    DEFAULT_POLICIES,
    DEFAULT_RULES,
    ERROR_CLASSES,
    TimeBasis,
    UnknownTypePolicy,
    first_line,
    parse_chain,
    parse_duration,
    parse_restart,
    redact_setting,
    remember,
    secrets_of_settings,
)

log = logging.getLogger(__name__)
_SPARK_INTERVAL = re.compile(r"^\s*\d+\s+(millisecond|second|minute|hour|day)s?\s*$", re.IGNORECASE)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RuleSettings(_Strict):
    window: int | None = None
    key_fields: Annotated[list[str], NoDecode] = Field(default_factory=lambda: ["uniqueValue"], min_length=1)
    time_basis: TimeBasis = TimeBasis.EVENT_TIME
    allowed_lateness: int | None = None
    max_ahead: int = Field(default=DEFAULT_MAX_AHEAD, ge=0)
    enabled: bool = True

    @field_validator("window", "allowed_lateness", "max_ahead", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return value if value is None else parse_duration(value)

    @field_validator("window")
    @classmethod
    def _positive(cls, value: int | None) -> int | None:
        if value is not None and value <= 0:
            raise ValueError("must be a positive duration")
        return value

    @field_validator("key_fields", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return [f.strip() for f in value.split(",") if f.strip()] if isinstance(value, str) else value

    @field_validator("key_fields")
    @classmethod
    def _named(cls, value: list[str]) -> list[str]:
        if any(not field.strip() for field in value):
            raise ValueError("a key field is the name of an event field, not empty")
        return value


class PolicySettings(_Strict):
    """One chain per error class (``domain._policies``); the defaults are the domain's."""

    invalid: str = DEFAULT_POLICIES["invalid"]
    bug: str = DEFAULT_POLICIES["bug"]
    transient: str = DEFAULT_POLICIES["transient"]

    @field_validator(*ERROR_CLASSES)
    @classmethod
    def _chain(cls, value: str) -> str:
        parse_chain(value)
        return value


class KafkaSettings(_Strict):
    """``commit_topic_replication_factor``: of the Spark engine's exactly-once commit-marker
    topic when it creates it (default: the broker's ``default.replication.factor``)."""

    delivery: Literal["at-least-once", "exactly-once"] = "at-least-once"
    transactional_id: str | None = None
    config: dict[str, str] = Field(default_factory=dict)
    commit_topic_replication_factor: int | None = Field(default=None, ge=1)


class SparkSettings(_Strict):
    """The Spark engine's settings. ``master``: ``local[*]`` unless given (spark-submit's
    ``--master`` wins). ``available_now``: process what the source holds, then stop
    (default: yes for a JSONL directory source, no for Kafka). ``conf``: any Spark setting,
    over the engine's defaults. ``lease_timeout``: how long the checkpoint's lease outlives
    its holder's last renewal (one running instance per checkpoint, ``adapters.spark.checkpoint._lease``).
    ``log_file``: Spark's own log, its Java stack traces included (relative to the working
    directory; ``adapters.spark.runtime._spark_log``); the terminal gets it too at ``log_level`` DEBUG.
    ``source_tasks``: the most Spark tasks a Kafka source's micro-batch is read in (default: a
    local master's cores; on a cluster, one per topic-partition: set it to the executors' cores)."""

    master: str | None = None
    checkpoint: str = "checkpoints/dedup"
    trigger: str = DEFAULT_TRIGGER
    available_now: bool | None = None
    state_provider: Literal["rocksdb"] = "rocksdb"
    shuffle_partitions: int = Field(default=2, ge=1)
    max_offsets_per_trigger: int | None = Field(default=None, ge=1)
    source_tasks: int | None = Field(default=None, ge=1)
    conf: dict[str, str] = Field(default_factory=dict)
    restart: str = "exponential-delay(attempts=5,delay=1,max_delay=60)"
    lease_timeout: float = Field(default=30.0, gt=0)
    log_file: str = Field(default="logs/spark.log", min_length=1)

    @field_validator("restart")
    @classmethod
    def _restart(cls, value: str) -> str:
        parse_restart(value)
        return value

    @field_validator("trigger")
    @classmethod
    def _trigger(cls, value: str) -> str:
        """Spark's interval text (``1 second``, ``500 milliseconds``), or a duration (``5s``)."""
        if _SPARK_INTERVAL.match(value):
            return value
        return f"{round(parse_duration(value, 'the trigger interval', whole=False) * 1000)} milliseconds"

    @field_validator("lease_timeout", mode="before")
    @classmethod
    def _lease_duration(cls, value: Any) -> Any:
        return parse_duration(value, whole=False)

    @field_validator("state_provider", mode="before")
    @classmethod
    def _provider_without_timers(cls, value: Any) -> Any:
        """``hdfs-backed`` (and ``memory``, its earlier name) went with state format 4: Spark runs
        the operator's ``transformWithState`` on RocksDB only."""
        if value in ("hdfs-backed", "memory"):
            raise ValueError(
                f"{value!r} is no longer offered: since state format 4 the operator keeps its state "
                "and timers in RocksDB (Spark runs transformWithState on no other store); write rocksdb, "
                "and carry an older checkpoint over with `dedup state migrate`"
            )
        return value


class MigrationSettings(_Strict):
    """An upgrade of the memory/kafka engines' state: the old store is consulted read-only until retired."""

    state_from: str | None = None
    old_key_fields: dict[str, Annotated[list[str], Field(min_length=1)]] = Field(default_factory=dict)

    @field_validator("state_from")
    @classmethod
    def _state_uri(cls, value: str | None) -> str | None:
        return value if value is None else check_state_uri(value)


class RedisSettings(_Strict):
    """The Redis state's settings. ``allow_eviction``: start even when the server's
    ``maxmemory-policy`` may evict keys (anything but ``noeviction``; ``adapters.redis._eviction``).
    An evicted key lets its duplicates through, so such a server is refused unless this is set."""

    allow_eviction: bool = False


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DEDUP_", env_nested_delimiter="__", extra="forbid")

    engine: Literal["memory", "kafka", "spark"] = "memory"
    source: str = "-"
    sink: str = "-"
    dlq: str | None = None
    dlq_max_bytes: int = Field(default=DEFAULT_MAX_BYTES, ge=1024)  # a dead letter's key plus value at most
    notifications: str | None = None
    notifications_out: str | None = None
    duplicates: str | None = None  # the report of every duplicate (domain._duplicates); off when not given
    state: str = "memory"
    rules: dict[str, RuleSettings] = Field(default_factory=dict)
    unknown_types: UnknownTypePolicy = UnknownTypePolicy.PASS
    policies: PolicySettings = Field(default_factory=PolicySettings)
    batch_size: int = Field(default=DEFAULT_BATCH_SIZE, ge=1, le=1_000_000)
    poll_timeout: float = Field(default=0.5, gt=0, le=3600)  # how long an idle input is waited on per poll
    max_batch_delay: float = Field(default=DEFAULT_MAX_BATCH_DELAY, ge=0, le=60)  # a record's wait for its batch
    latency_objective: float = Field(default=2.0, gt=0)  # the p99 end-to-end latency above which the alert fires
    idle_partition_timeout: int = Field(default=int(DEFAULT_IDLE_TIMEOUT), gt=0)
    metrics_port: int | None = Field(default=None, ge=0, le=65535)
    metrics_host: str = Field(default="127.0.0.1", min_length=1)
    stall_timeout: float = Field(default=120.0, gt=0)  # /health is 503 after this long without a poll or batch
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "WARNING"
    log_format: Literal["text", "json"] = "text"  # json: one object per line (app._logs)
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    spark: SparkSettings = Field(default_factory=SparkSettings)
    migration: MigrationSettings = Field(default_factory=MigrationSettings)
    redis: RedisSettings = Field(default_factory=RedisSettings)

    @classmethod
    def settings_customise_sources(
        cls, settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings
    ):
        return init_settings, _EnvSource(settings_cls), _ConfigFileSource(settings_cls)

    @field_validator("idle_partition_timeout", mode="before")
    @classmethod
    def _idle_duration(cls, value: Any) -> Any:
        return parse_duration(value)

    @field_validator("max_batch_delay", "latency_objective", mode="before")
    @classmethod
    def _batch_delay(cls, value: Any) -> Any:
        return parse_duration(value, whole=False)

    @field_validator("stall_timeout", mode="before")
    @classmethod
    def _stall_duration(cls, value: Any) -> Any:
        return parse_duration(value, whole=False)

    @field_validator("source", "sink", "dlq", "notifications", "notifications_out", "duplicates")
    @classmethod
    def _stream_uri(cls, value: str | None, info) -> str | None:
        if value == "" and info.field_name not in ("source", "sink"):
            return None  # an optional output or input given empty: not given
        return value if value is None else check_stream_uri(value, info.field_name)

    @field_validator("state")
    @classmethod
    def _state_uri(cls, value: str) -> str:
        return check_state_uri(value)

    @model_validator(mode="after")
    def _state_of_the_engine(self) -> Settings:
        """``memory`` (the default) means the Spark engine's own state, in its checkpoint: ``checkpoint``."""
        if self.engine == "spark" and self.state == "memory":
            if "state" in self.model_fields_set:
                log.warning(
                    "state=memory with the spark engine is deprecated: its state is kept in the checkpoint, "
                    "write state=checkpoint (DEDUP_STATE=checkpoint)"
                )
            self.state = CHECKPOINT
        elif self.engine != "spark" and self.state == CHECKPOINT:
            raise ValueError(
                "state (DEDUP_STATE): 'checkpoint' is the spark engine's state; the memory and kafka "
                "engines keep theirs in memory, memory:SNAPSHOT_PATH or redis://HOST:PORT/DB"
            )
        return self

    @model_validator(mode="after")
    def _files_distinct(self) -> Settings:
        if self.engine == "memory":
            distinct_files(
                {
                    "source": self.source,
                    "sink": self.sink,
                    "dlq": self.dlq,
                    "notifications": self.notifications,
                    "notifications_out": self.notifications_out,
                    "duplicates": self.duplicates,
                },
                self.state,
            )
        return self

    @model_validator(mode="after")
    def _rules_have_windows(self) -> Settings:
        for name, rule in self.effective_rules().items():
            if rule.window is None:
                raise ValueError(
                    f"rules.{name}.window (DEDUP_RULES__{name.upper()}__WINDOW): required for "
                    f"type {name}, which has no default window"
                )
        return self

    def effective_rules(self) -> dict[str, RuleSettings]:
        """The default rules (APP 30 s, WEB 10 min) overlaid with the configured ones."""
        merged = {r.event_type: RuleSettings(window=r.window) for r in DEFAULT_RULES}
        for name, rule in self.rules.items():
            base = merged.get(name, RuleSettings())
            merged[name] = base.model_copy(update=rule.model_dump(exclude_unset=True))
        return {name: rule for name, rule in merged.items() if rule.enabled}


class _EnvSource(EnvSettingsSource):
    """Environment variables; rule names in them are upper-cased (``DEDUP_RULES__WEB__WINDOW``,
    ``DEDUP_MIGRATION__OLD_KEY_FIELDS__WEB``), Spark's keys spelt as written. A ``DEDUP_*``
    variable that names no setting is refused, naming the closest one."""

    def __call__(self) -> dict[str, Any]:
        for wrong in unknown_variables(Settings, self.env_vars):
            given, closest = wrong.as_env()
            raise SettingsError(f"unknown setting {given} in the environment{_suggestion(closest)}")
        data = super().__call__()
        remember(secrets_of_settings(data))
        if isinstance(data.get("rules"), dict):
            data["rules"] = {name.upper(): rule for name, rule in data["rules"].items()}
        migration = data.get("migration")
        if isinstance(migration, dict) and isinstance(migration.get("old_key_fields"), dict):
            migration["old_key_fields"] = {name.upper(): fields for name, fields in migration["old_key_fields"].items()}
        spark = data.get("spark")
        if isinstance(spark, dict) and isinstance(spark.get("conf"), dict):
            spark["conf"] = _spark_keys_as_written(spark["conf"])
        return data


_SPARK_CONF_VARIABLE = "DEDUP_SPARK__CONF__"


def _spark_keys_as_written(conf: dict[str, Any]) -> dict[str, Any]:
    """``conf`` with the keys that came from ``DEDUP_SPARK__CONF__<key>`` variables spelt as in
    the variable's name: the names are read case-insensitively, so they arrive lower-cased, and
    Spark's keys are case-sensitive (``...rocksdb.maxmemoryusagemb`` is a setting Spark ignores)."""
    written = {
        name[len(_SPARK_CONF_VARIABLE) :].lower(): name[len(_SPARK_CONF_VARIABLE) :]
        for name in os.environ
        if name.upper().startswith(_SPARK_CONF_VARIABLE)
    }
    return {written.get(key, key): value for key, value in conf.items()}


_CONFIG_FILE: ContextVar[str | None] = ContextVar("config_file", default=None)


class _ConfigFileSource(PydanticBaseSettingsSource):
    """The file ``load_settings`` was given (``--config``), else the one ``DEDUP_CONFIG`` names."""

    def get_field_value(self, field, field_name):  # pragma: no cover - __call__ is used
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        path = _CONFIG_FILE.get() or os.environ.get("DEDUP_CONFIG")
        return read_config_file(Path(path)) if path else {}


class _StrictYamlLoader(yaml.SafeLoader):
    """YAML as a settings file takes it: a key given twice is refused (not last-wins), and so are
    aliases (``*name``), which settings never need and which can expand a small file without bound."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.constructor.ConstructorError(
                None, None, "aliases (*name) are not accepted in a settings file", event.start_mark
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} is given twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


def read_config_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise SettingsError(f"config file {path}: {exc.strerror}") from None
    try:
        if path.suffix in (".yaml", ".yml"):
            data = yaml.load(text, Loader=_StrictYamlLoader) or {}
        elif path.suffix == ".toml":
            data = tomllib.loads(text)
        else:
            data = json.loads(text)
    except (yaml.YAMLError, tomllib.TOMLDecodeError, ValueError) as exc:
        raise SettingsError(
            f"config file {path}: not valid {path.suffix.lstrip('.') or 'JSON'}: {first_line(exc)}"
        ) from None
    if not isinstance(data, dict):
        raise SettingsError(f"config file {path}: must hold a mapping of settings")
    remember(secrets_of_settings(data))
    return data


def load_settings(config_file: str | None = None, **overrides: Any) -> Settings:
    """Build the settings; raises ``SettingsError`` naming the first invalid setting."""
    token = _CONFIG_FILE.set(config_file)
    given = {k: v for k, v in overrides.items() if v is not None}
    remember(secrets_of_settings(given))
    try:
        return Settings(**given)
    except ValidationError as exc:
        raise SettingsError(describe(exc)) from None
    except _SourceError as exc:
        field = re.search(r'field "([^"]+)"', str(exc))
        name = field.group(1) if field else "settings"
        raise SettingsError(
            f"invalid setting {name} (DEDUP_{name.upper()}__*): a nested value from the environment is not valid JSON"
        ) from None
    finally:
        _CONFIG_FILE.reset(token)


def describe(exc: ValidationError) -> str:
    error = exc.errors()[0]
    if not error["loc"]:
        return "invalid setting " + error["msg"].removeprefix("Value error, ")
    loc = [str(part) for part in error["loc"] if part not in ("function-after", "function-before")]
    if error["type"] == "extra_forbidden":
        wrong = misspelt(Settings, loc) or Misspelt(tuple(loc), len(loc) - 1, None)
        given, closest = wrong.as_dotted()
        return f"unknown setting {given}{_suggestion(closest)}"
    name = ".".join(loc) or "settings"
    env = "DEDUP_" + "__".join(loc).upper()
    message = error["msg"].removeprefix("Value error, ")
    got = error.get("input")
    shown = "" if isinstance(got, dict) or got is None else f" (got {redact_setting(name, got)!r})"
    if shown and (str(redact_setting(name, got)) in message or "got " in message):
        shown = ""
    return f"invalid setting {name} ({env}): {message}{shown}"


def _suggestion(closest: str | None) -> str:
    return f"; did you mean {closest}?" if closest else " (see the settings table in docs/operations/configuration.md)"
