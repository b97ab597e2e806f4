"""A Redis database as a ``SavedState``: read for ``dedup state inspect`` and ``explain``,
migrated to another database for a job whose key fields changed (``migration``). Redis keeps
no watermark: liveness is judged at the wall clock unless a time is given."""

from __future__ import annotations

from collections.abc import Sequence

from adapters.redis._migration import apply_redis_migration, plan_redis_migration
from adapters.redis._state_store import RedisStateStore
from domain import NO_WATERMARK, WALL_CLOCK, Emission, RuleSet, SetupError, StateReport, inspect_state, redact_uri

SCHEMES = ("redis://", "rediss://")


class RedisSavedState:
    """The state in the Redis database at ``url`` (read-only but for ``migrate_to``)."""

    def __init__(self, url: str):
        self.url = url
        self.store = RedisStateStore(url)
        self.name = f"redis {self.store.address}"

    def report(self, sample_size: int) -> StateReport:
        return inspect_state(self.name, self.store.scan_items(), sample_size, self.store.memory_bytes())

    def recorded_key_fields(self, rule: str) -> tuple[str, ...] | None:
        return None

    def emissions(self, keys: Sequence[str]) -> dict[str, tuple[Emission, ...]]:
        found = {key: self.store.entries(key, NO_WATERMARK) for key in keys}
        return {key: entries for key, entries in found.items() if entries}

    def clock(self, rule: str, now: int) -> tuple[int, str]:
        return now, WALL_CLOCK

    def migrate_to(
        self, target: str, rules: RuleSet, old_key_fields: dict[str, tuple[str, ...]], dry_run: bool
    ) -> list[str]:
        if not target.startswith(SCHEMES):
            raise SetupError(
                f"invalid setting --to: a Redis state migrates to another redis:// database, got {redact_uri(target)!r}"
            )
        plan = plan_redis_migration(self.url, target, rules, old_key_fields)
        steps = plan.describe()
        return steps if dry_run else [*steps, f"wrote {apply_redis_migration(plan)} keys"]

    def close(self) -> None:
        self.store.close()
