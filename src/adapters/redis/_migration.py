"""The offline step of a Redis state migration (``dedup state migrate --from redis://… --to redis://…``).

Every stored value is read with any codec version and written in the current one
(``domain._state.encode``), under the new job's key layout, with the key's remaining TTL (a key
written before the expiry index) or filed in the target's index (``adapters.redis._expiry``):

* into another store (or DB): ``SET NX`` — a key the new job already wrote is never
  overwritten;
* in place (same store, same key layout): only values of older versions are rewritten
  (``SET XX KEEPTTL``), so the store holds one format.

A new key is derived from an old one when each new key field is an old one or ``type``
(the rule's name, e.g. ``uniqueValue`` → ``uniqueValue``+``type``). A rule whose new key
needs a field the old key lacks cannot be moved offline; it is reported, and the online
fallback (``state_from``: ``domain._migration.MigratingStateStore``) covers it.

Keys are written in the current spelling (``domain._keys``): a key stored with a v1 or v2
value is respelled first (``domain._state.current_key``; ordinary keys are unchanged; in
place, the old spelling is deleted). One whose values held ``\\x1f`` is ambiguous (it splits
into more parts than the old key has fields, and which separator was a value's cannot be
told): it is reported and not moved, and expires.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import redis

from adapters.redis._expiry import file_key
from adapters.redis._state_store import DEFAULT_PREFIX, RedisStateStore, redacted_url, redis_key
from domain import (
    CURRENT_VERSION,
    SEPARATOR,
    RuleSet,
    StateFormatError,
    StateUnavailable,
    current_key,
    decode,
    decode_key,
    encode,
    encode_key,
    part_count,
    rule_of,
    version_of,
)


@dataclass
class RedisMigrationPlan:
    source: str
    target: str
    layouts: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]  # rule -> (old fields, new fields)
    keys_per_rule: Counter = field(default_factory=Counter)
    versions: Counter = field(default_factory=Counter)
    unmovable: Counter = field(default_factory=Counter)
    ambiguous: Counter = field(default_factory=Counter)  # per rule: older-format keys whose values held \x1f
    unreadable: int = 0

    @property
    def in_place(self) -> bool:
        return self.source == self.target and all(old == new for old, new in self.layouts.values())

    def describe(self) -> list[str]:
        found = ", ".join(f"v{v}: {n}" for v, n in sorted(self.versions.items())) or "none"
        lines = [
            (
                f"read {sum(self.keys_per_rule.values())} keys from {redacted_url(self.source)} (formats {found}, "
                f"{self.unreadable} unreadable)"
            )
        ]
        for rule, (old, new) in sorted(self.layouts.items()):
            if self.unmovable[rule]:
                lines.append(
                    f"leave rule {rule}'s {self.unmovable[rule]} keys: the new key ({','.join(new)}) needs "
                    f"fields the old key ({','.join(old)}) lacks; use state_from (online fallback)"
                )
            elif self.in_place:
                lines.append(
                    f"rewrite rule {rule}'s older-format values in place to v{CURRENT_VERSION}, keeping their TTL"
                )
            else:
                lines.append(
                    f"copy rule {rule}'s {self.keys_per_rule[rule]} keys as v{CURRENT_VERSION} "
                    f"({','.join(old)} -> {','.join(new)}) to {redacted_url(self.target)}, keeping their TTL"
                )
            if self.ambiguous[rule]:
                lines.append(
                    f"leave rule {rule}'s {self.ambiguous[rule]} older-format keys whose values held the "
                    "separator \\x1f (ambiguous: which part is which field cannot be told); they expire"
                )
        return lines


def plan_redis_migration(
    source: str, target: str, rules: RuleSet, old_key_fields: dict[str, tuple[str, ...]]
) -> RedisMigrationPlan:
    """Scan ``source`` and report what ``apply_redis_migration`` would write; writes nothing."""
    layouts = {
        name: (tuple(old_key_fields.get(name, rule.key_fields)), tuple(rule.key_fields))
        for name, rule in rules.rules.items()
    }
    plan = RedisMigrationPlan(source, target, layouts)
    store = RedisStateStore(source)
    try:
        for key, value in store.scan_items():
            _survey(plan, key, value)
    finally:
        store.close()
    return plan


def _survey(plan: RedisMigrationPlan, key: str, value: bytes) -> None:
    """Counts one stored key in ``plan``: its rule, its value's version, whether it can be moved."""
    current = current_key(key, _version(plan, value) or CURRENT_VERSION)
    rule = _rule(current)
    plan.keys_per_rule[rule] += 1
    layout = plan.layouts.get(rule)
    if layout and _new_key(current, *layout) is None:
        ambiguous = part_count(current) > 1 + len(layout[0])
        (plan.ambiguous if ambiguous else plan.unmovable)[rule] += 1


def _version(plan: RedisMigrationPlan, value: bytes) -> int | None:
    """``value``'s format version, counted in ``plan`` (an unreadable value counted too)."""
    try:
        version = version_of(value)
    except ValueError:
        plan.unreadable += 1
        return None
    plan.versions[version] += 1
    try:
        decode(value)
    except (StateFormatError, ValueError):
        plan.unreadable += 1
    return version


def apply_redis_migration(plan: RedisMigrationPlan) -> int:
    """Write what ``plan`` describes; returns how many keys were written."""
    store, source, target = (
        RedisStateStore(plan.source),
        redis.Redis.from_url(plan.source),
        redis.Redis.from_url(plan.target),
    )
    written = 0
    try:
        for key, value in store.scan_items():
            written += _move(source, target, plan, key, value)
    except redis.RedisError as exc:
        raise StateUnavailable(f"redis migration failed after {written} keys: {exc}") from None
    finally:
        for client in (store, source, target):
            client.close()
    return written


def _move(source, target, plan: RedisMigrationPlan, key: str, value: bytes) -> int:
    try:
        entries, version = decode(value), version_of(value)
    except (StateFormatError, ValueError):
        return 0
    current = current_key(key, version)
    layout = plan.layouts.get(_rule(current))
    new_key = _new_key(current, *layout) if layout else current
    if new_key is None or not entries:
        return 0
    old = redis_key(DEFAULT_PREFIX, key)
    if plan.in_place and new_key == key:
        return 0 if version == CURRENT_VERSION else int(bool(target.set(old, encode(entries), xx=True, keepttl=True)))
    ttl = source.pttl(old)
    written = target.set(redis_key(DEFAULT_PREFIX, new_key), encode(entries), nx=True, px=ttl if ttl > 0 else None)
    if written and ttl <= 0:  # a key without a TTL expires through the index (adapters.redis._expiry)
        file_key(target, DEFAULT_PREFIX, new_key, entries)
    if plan.in_place:
        target.delete(old)  # respelled: under its old spelling it would read as another key's
    return int(bool(written))


def _new_key(current: str, old_fields: tuple[str, ...], new_fields: tuple[str, ...]) -> str | None:
    """``current`` (the old layout, current spelling) in the new layout; None when a new field is
    not in the old key, or the key does not split into the old fields (ambiguous or malformed)."""
    try:
        rule, values = decode_key(current)
    except ValueError:
        return None
    by_name = {"type": rule, **dict(zip(old_fields, values))}
    if len(values) != len(old_fields) or any(f not in by_name for f in new_fields):
        return None
    return encode_key(rule, (by_name[f] for f in new_fields))


def _rule(key: str) -> str:
    """The rule of a stored key; a malformed one's first part as it is."""
    try:
        return rule_of(key)
    except ValueError:
        return key.partition(SEPARATOR)[0]
