"""The offline step of a Redis state migration (``dedup state migrate --from redis://… --to redis://…``).

Every stored value is read with any codec version and written in the current one
(``domain.state.encode``), under the new job's key layout, with the key's remaining TTL:

* into another store (or DB): ``SET NX`` — a key the new job already wrote is never
  overwritten;
* in place (same store, same key layout): only values of older versions are rewritten
  (``SET XX KEEPTTL``), so the store holds one format.

A new key is derived from an old one when each new key field is an old one or ``type``
(the rule's name, e.g. ``uniqueValue`` → ``uniqueValue``+``type``). A rule whose new key
needs a field the old key lacks cannot be moved offline; it is reported, and the online
fallback (``state_from``: ``domain.migration.MigratingStateStore``) covers it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import redis

from adapters.redis.state_store import DEFAULT_PREFIX, RedisStateStore, redacted_url, redis_key
from domain.errors import StateUnavailable
from domain.rules import KEY_SEPARATOR, RuleSet
from domain.state import StateFormatError, decode, encode, version_of


@dataclass
class RedisMigrationPlan:
    source: str
    target: str
    layouts: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]  # rule -> (old fields, new fields)
    keys_per_rule: Counter = field(default_factory=Counter)
    versions: Counter = field(default_factory=Counter)
    unmovable: Counter = field(default_factory=Counter)
    unreadable: int = 0

    @property
    def in_place(self) -> bool:
        return self.source == self.target and all(old == new for old, new in self.layouts.values())

    def describe(self) -> list[str]:
        found = ", ".join(f"v{v}: {n}" for v, n in sorted(self.versions.items())) or "none"
        lines = [f"read {sum(self.keys_per_rule.values())} keys from {redacted_url(self.source)} (formats {found}, "
                 f"{self.unreadable} unreadable)"]
        for rule, (old, new) in sorted(self.layouts.items()):
            if self.unmovable[rule]:
                lines.append(f"leave rule {rule}'s {self.unmovable[rule]} keys: the new key ({','.join(new)}) needs "
                             f"fields the old key ({','.join(old)}) lacks; use state_from (online fallback)")
            elif self.in_place:
                lines.append(f"rewrite rule {rule}'s older-format values in place to v2, keeping their TTL")
            else:
                lines.append(f"copy rule {rule}'s {self.keys_per_rule[rule]} keys as v2 ({','.join(old)} -> "
                             f"{','.join(new)}) to {redacted_url(self.target)}, keeping their TTL")
        return lines


def plan_redis_migration(source: str, target: str, rules: RuleSet,
                         old_key_fields: dict[str, tuple[str, ...]]) -> RedisMigrationPlan:
    """Scan ``source`` and report what ``apply_redis_migration`` would write; writes nothing."""
    layouts = {name: (tuple(old_key_fields.get(name, rule.key_fields)), tuple(rule.key_fields))
               for name, rule in rules.rules.items()}
    plan = RedisMigrationPlan(source, target, layouts)
    store = RedisStateStore(source)
    try:
        for key, value in store.scan_items():
            rule = key.partition(KEY_SEPARATOR)[0]
            plan.keys_per_rule[rule] += 1
            try:
                plan.versions[version_of(value)] += 1
                decode(value)
            except (StateFormatError, ValueError):
                plan.unreadable += 1
            if rule in layouts and _new_key(key, *layouts[rule]) is None:
                plan.unmovable[rule] += 1
    finally:
        store.close()
    return plan


def apply_redis_migration(plan: RedisMigrationPlan) -> int:
    """Write what ``plan`` describes; returns how many keys were written."""
    store, source, target = (RedisStateStore(plan.source), redis.Redis.from_url(plan.source),
                             redis.Redis.from_url(plan.target))
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
    layout = plan.layouts.get(key.partition(KEY_SEPARATOR)[0])
    new_key = _new_key(key, *layout) if layout else key
    try:
        entries, version = decode(value), version_of(value)
    except (StateFormatError, ValueError):
        return 0
    if new_key is None or not entries:
        return 0
    old = redis_key(DEFAULT_PREFIX, key)
    if plan.in_place:
        return 0 if version == 2 else int(bool(target.set(old, encode(entries), xx=True, keepttl=True)))
    ttl = source.pttl(old)
    return int(bool(target.set(redis_key(DEFAULT_PREFIX, new_key), encode(entries), nx=True,
                               px=ttl if ttl > 0 else None)))


def _new_key(key: str, old_fields: tuple[str, ...], new_fields: tuple[str, ...]) -> str | None:
    rule, *values = key.split(KEY_SEPARATOR)
    by_name = {"type": rule, **dict(zip(old_fields, values))}
    if any(f not in by_name for f in new_fields):
        return None
    return KEY_SEPARATOR.join((rule, *(by_name[f] for f in new_fields)))
