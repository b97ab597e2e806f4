"""``dedup state inspect``, ``explain`` and ``migrate``: look into a dedup state, ask what it
remembers of one key, or prepare an upgrade.

States are named by URI: ``memory:SNAPSHOT_PATH``, ``redis://HOST:PORT/DB`` or
``spark:CHECKPOINT_DIR`` (a Spark job's checkpoint, read through Spark's state data source).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from app.container import build_state_store, container_for
from app.errors import UsageError
from app.settings import load_settings
from domain.explanation import Explanation, explain, key_spellings
from domain.inspection import StateReport, inspect_state
from domain.redaction import redact
from domain.rules import RuleSet
from domain.state import NO_WATERMARK, Emission, current_key, decode, version_of


def add_state_commands(commands) -> None:
    state = commands.add_parser("state", help="look into a deduplication state, or migrate it").add_subparsers(
        dest="state_command", required=True
    )
    add_inspect(state.add_parser("inspect", help="keys per rule, samples, expiries, format version, size"))
    add_explain(state.add_parser("explain", help="what the state remembers of one key, and who made it"))
    add_migrate(state.add_parser("migrate", help="prepare a new job version's state from the old one's"))


def add_inspect(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state", required=True, help="memory:SNAPSHOT_PATH, redis://HOST:PORT/DB or spark:CHECKPOINT_DIR"
    )
    parser.add_argument("--samples", type=int, default=3, help="keys shown per rule (default 3)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(handler=cmd_inspect)


def cmd_inspect(args: argparse.Namespace) -> int:
    report = inspect_state_store(args.state, args.samples).as_dict()
    if args.json:
        show(json.dumps(report, indent=2))
        return 0
    for name, value in report.items():
        if isinstance(value, dict):
            show(f"{name}:")
            for k, v in value.items():
                show(f"  {k}: {v}")
        else:
            show(f"{name}: {value}")
    return 0


def show(text: str) -> None:
    """Print a report line; a state's URI in it is shown without its secrets."""
    print(redact(text))


def add_explain(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state", required=True, help="memory:SNAPSHOT_PATH, redis://HOST:PORT/DB or spark:CHECKPOINT_DIR"
    )
    parser.add_argument("--rule", required=True, help="the rule (event type), e.g. APP")
    parser.add_argument(
        "--key",
        action="append",
        required=True,
        metavar="FIELD=VALUE[,FIELD=VALUE]",
        help="the key's values by field (repeat it, or separate with commas)",
    )
    parser.add_argument("--config", help="the job's settings file (its rules' key fields)")
    parser.add_argument(
        "--at",
        type=int,
        help="judge liveness at this time (epoch s; default: the rule's "
        "watermark where the state records it, else now)",
    )
    parser.add_argument("--json", action="store_true", help="print the explanation as JSON")
    parser.set_defaults(handler=cmd_explain)


def cmd_explain(args: argparse.Namespace) -> int:
    given = key_values(args.key)
    explanations = explain_key(args.state, args.rule, given, args.config, args.at)
    for explanation in explanations:
        if args.json:
            show(explanation.json())
        else:
            for line in explanation.lines():
                show(line)
    return 0


def key_values(values: list[str]) -> dict[str, str]:
    """``["uniqueValue=a,session=b"]`` as ``{"uniqueValue": "a", "session": "b"}``; a piece without ``=``
    belongs to the value before it (a value may hold commas)."""
    pairs: list[list[str]] = []
    for piece in (p for value in values for p in value.split(",")):
        name, sep, text = piece.partition("=")
        if sep and name.strip():
            pairs.append([name.strip(), text])
        elif pairs:
            pairs[-1][1] += "," + piece
        else:
            raise UsageError(f"invalid setting --key: expected FIELD=VALUE, got {piece!r}")
    return dict(pairs)


def explain_key(uri: str, rule: str, given: dict[str, str], config: str | None, at: int | None) -> list[Explanation]:
    """The explanation of the key ``given`` names under ``rule`` in the state at ``uri``: one per
    spelling that holds emissions (a value may read as a string or a number, ``domain.explanation``),
    else the string spelling's (nothing remembered)."""
    if uri.startswith("spark:"):  # a checkpoint is read through the session's Hadoop file systems
        from adapters.spark.runtime.session import build_session

        build_session()
    fields = _key_fields(uri, rule, config)
    try:
        spellings = key_spellings(rule, fields, given)
    except ValueError as exc:
        raise UsageError(f"invalid setting --key: {exc}") from None
    store, read, clock = _key_reader(uri, rule)
    found = read([key for _, key in spellings])
    moment, what = (at, "given with --at") if at is not None else clock
    explained = [explain(store, rule, values, found[key], moment, what) for values, key in spellings if found.get(key)]
    return explained or [explain(store, rule, spellings[0][0], (), moment, what)]


def _key_fields(uri: str, rule: str, config: str | None) -> tuple[str, ...]:
    """``rule``'s key fields: a Spark checkpoint's manifest records them; otherwise the settings say."""
    if uri.startswith("spark:"):
        from adapters.spark.checkpoint.logs import Checkpoint
        from adapters.spark.checkpoint.manifest import read_manifest

        manifest = read_manifest(Checkpoint.at(uri.removeprefix("spark:")).ours)
        recorded = manifest.key_fields(rule) if manifest else None
        if recorded:
            return recorded
    rules = container_for(load_settings(config)).rules()
    if rule not in rules.rules:
        raise UsageError(f"invalid setting --rule: no rule {rule!r} (rules: {', '.join(sorted(rules.rules))})")
    return rules.rules[rule].key_fields


def _key_reader(uri: str, rule: str):
    """``(store's name, read(keys) -> {key: emissions}, (default time, what it is))`` for the state at ``uri``."""
    now = int(time.time())
    wall = (now, "the wall clock: this state does not record the job's watermark")
    if uri.startswith("spark:"):
        from adapters.spark.checkpoint.logs import Checkpoint
        from adapters.spark.checkpoint.state_reader import key_emissions, rule_watermark
        from adapters.spark.runtime.session import build_session

        location = uri.removeprefix("spark:")
        if not Checkpoint.at(location).path.exists():
            raise UsageError(f"invalid setting state: no checkpoint at {location}")
        watermark = rule_watermark(location, rule, now)
        clock = (
            (watermark, f"rule {rule}'s watermark in the checkpoint")
            if watermark is not None
            else (0, f"rule {rule} has no watermark in the checkpoint yet: nothing has expired")
        )
        return f"spark checkpoint {location}", lambda keys: key_emissions(build_session(), location, keys), clock
    if uri.startswith("memory:"):
        from adapters.memory.state_store import read_snapshot, unreadable

        path = Path(uri.removeprefix("memory:"))
        if not path.is_file():
            raise UsageError(f"invalid setting state: no snapshot at {path}")

        def read_memory(keys: list[str]) -> dict[str, tuple[Emission, ...]]:
            wanted, found = set(keys), {}
            try:
                for key, value in read_snapshot(path):
                    current = current_key(key, version_of(value))
                    if current in wanted:
                        found[current] = decode(value)
            except (ValueError, OSError) as exc:
                raise UsageError(f"invalid setting state: {unreadable(path, exc)}") from None
            return found

        return f"snapshot {path}", read_memory, wall
    store = build_state_store(uri)
    if not store.durable:
        store.close()
        raise UsageError(f"invalid setting state: {redact(uri)!r} cannot be read (a volatile in-memory state)")
    from adapters.redis.state_store import RedisStateStore

    assert isinstance(store, RedisStateStore)  # the one durable store build_state_store makes without a migration

    def read_store(keys: list[str]) -> dict[str, tuple[Emission, ...]]:
        try:
            return {key: store.entries(key, NO_WATERMARK) for key in keys}
        finally:
            store.close()

    return f"redis {store.address}", read_store, wall


def add_migrate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--from", dest="source", required=True, help="the old job's state: spark:CHECKPOINT_DIR or redis://HOST:PORT/DB"
    )
    parser.add_argument(
        "--to",
        dest="target",
        required=True,
        help="the new job's state: a new spark:CHECKPOINT_DIR, or redis://HOST:PORT/DB",
    )
    parser.add_argument("--config", help="the NEW job's settings file (its rules and key fields)")
    parser.add_argument(
        "--old-key-fields",
        action="append",
        default=[],
        metavar="RULE=FIELD,FIELD",
        help="the old job's key fields for RULE, when its state does not record them",
    )
    parser.add_argument("--dry-run", action="store_true", help="report what would be done; write nothing")
    parser.set_defaults(handler=cmd_migrate)


def cmd_migrate(args: argparse.Namespace) -> int:
    settings = load_settings(args.config)
    rules = container_for(settings).rules()
    steps = migrate_state(args.source, args.target, rules, old_key_fields(args.old_key_fields), args.dry_run)
    for step in steps:
        show(f"{'would ' if args.dry_run else ''}{step}")
    show(
        "dedup state migrate: dry run, nothing was written"
        if args.dry_run
        else f"dedup state migrate: done; start the new job on {args.target}"
    )
    return 0


def inspect_state_store(uri: str, sample_size: int = 3) -> StateReport:
    """A ``StateReport`` for a saved in-memory snapshot, a durable store (Redis) or a Spark checkpoint."""
    if uri.startswith("spark:"):
        from adapters.spark.checkpoint.logs import Checkpoint
        from adapters.spark.checkpoint.state_reader import inspect_checkpoint
        from adapters.spark.runtime.session import build_session

        location, spark = uri.removeprefix("spark:"), build_session()
        if not Checkpoint.at(location, spark).path.exists():
            raise UsageError(f"invalid setting state: no checkpoint at {location}")
        return inspect_checkpoint(spark, location, sample_size)
    if uri.startswith("memory:"):
        from adapters.memory.state_store import read_snapshot, unreadable

        path = Path(uri.removeprefix("memory:"))
        if not path.is_file():
            raise UsageError(
                f"invalid setting state: no snapshot at {path}"
                f"{' (a directory; a snapshot is a file)' if path.is_dir() else ''}"
            )
        try:
            return inspect_state(f"snapshot {path}", read_snapshot(path), sample_size, path.stat().st_size)
        except (ValueError, OSError) as exc:
            raise UsageError(f"invalid setting state: {unreadable(path, exc)}") from None
    store = build_state_store(uri)
    if not store.durable:
        raise UsageError(f"invalid setting state: {redact(uri)!r} cannot be inspected (a volatile in-memory state)")
    from adapters.redis.state_store import RedisStateStore

    try:
        assert isinstance(store, RedisStateStore)  # the one durable store build_state_store makes without a migration
        return inspect_state(f"redis {store.address}", store.scan_items(), sample_size, store.memory_bytes())
    finally:
        store.close()


def migrate_state(
    source: str, target: str, rules: RuleSet, old_key_fields: dict[str, tuple[str, ...]], dry_run: bool
) -> list[str]:
    """Plan the offline step of a state migration and, unless ``dry_run``, do it; returns the steps."""
    if source.startswith("spark:") and target.startswith("spark:"):
        from adapters.spark.checkpoint.migration import migrate, plan_migration
        from adapters.spark.runtime.session import build_session

        spark = build_session()
        plan = plan_migration(
            spark, source.removeprefix("spark:"), target.removeprefix("spark:"), rules, old_key_fields
        )
        if not dry_run:
            migrate(spark, plan)
        return plan.describe()
    if source.startswith(("redis://", "rediss://")) and target.startswith(("redis://", "rediss://")):
        from adapters.redis.migration import apply_redis_migration, plan_redis_migration

        redis_plan = plan_redis_migration(source, target, rules, old_key_fields)
        steps = redis_plan.describe()
        return steps if dry_run else [*steps, f"wrote {apply_redis_migration(redis_plan)} keys"]
    raise UsageError(
        f"invalid setting --from/--to: migrate spark:CHECKPOINT to spark:NEW_CHECKPOINT or redis:// "
        f"to redis://, got {redact(source)!r} and {redact(target)!r}"
    )


def old_key_fields(values: list[str]) -> dict[str, tuple[str, ...]]:
    """``["WEB=uniqueValue", …]`` as ``{"WEB": ("uniqueValue",)}``."""
    fields = {}
    for value in values:
        rule, sep, names = value.partition("=")
        parsed = tuple(n.strip() for n in names.split(",") if n.strip())
        if not sep or not rule or not parsed:
            raise UsageError(f"invalid setting --old-key-fields: expected RULE=FIELD[,FIELD…], got {value!r}")
        fields[rule] = parsed
    return fields
