"""``dedup state inspect``, ``explain`` and ``migrate``: look into a dedup state, ask what it
remembers of one key, or prepare an upgrade.

States are named by URI: ``memory:SNAPSHOT_PATH``, ``redis://HOST:PORT/DB`` or
``spark:CHECKPOINT_DIR`` (a Spark job's checkpoint, read through Spark's state data source).
"""

from __future__ import annotations

import argparse
import json
import time

from app._container import build_saved_state, container_for
from app._errors import UsageError
from app._settings import load_settings
from domain import Explanation, RuleSet, StateReport, explain, key_spellings, redact


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
    spelling that holds emissions (a value may read as a string or a number, ``domain._explanation``),
    else the string spelling's (nothing remembered)."""
    saved = build_saved_state(uri)
    try:
        fields = saved.recorded_key_fields(rule) or _configured_key_fields(rule, config)
        try:
            spellings = key_spellings(rule, fields, given)
        except ValueError as exc:
            raise UsageError(f"invalid setting --key: {exc}") from None
        found = saved.emissions([key for _, key in spellings])
        moment, what = (at, "given with --at") if at is not None else saved.clock(rule, int(time.time()))
    finally:
        saved.close()
    explained = [
        explain(saved.name, rule, values, found[key], moment, what) for values, key in spellings if found.get(key)
    ]
    return explained or [explain(saved.name, rule, spellings[0][0], (), moment, what)]


def _configured_key_fields(rule: str, config: str | None) -> tuple[str, ...]:
    """``rule``'s key fields as the settings say (for a state that does not record them)."""
    rules = container_for(load_settings(config)).rules()
    if rule not in rules.rules:
        raise UsageError(f"invalid setting --rule: no rule {rule!r} (rules: {', '.join(sorted(rules.rules))})")
    return rules.rules[rule].key_fields


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
    """A ``StateReport`` for a saved in-memory snapshot, a Redis database or a Spark checkpoint."""
    saved = build_saved_state(uri)
    try:
        return saved.report(sample_size)
    finally:
        saved.close()


def migrate_state(
    source: str, target: str, rules: RuleSet, old_key_fields: dict[str, tuple[str, ...]], dry_run: bool
) -> list[str]:
    """Plan the offline step of a state migration and, unless ``dry_run``, do it; returns the steps."""
    saved = build_saved_state(source)
    try:
        return saved.migrate_to(target, rules, old_key_fields, dry_run)
    finally:
        saved.close()


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
