"""A ``memory:PATH`` snapshot as a ``SavedState``: read for ``dedup state inspect`` and
``explain``; it records no watermark, and is not migrated (a new run reads it as it is)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from adapters.memory._errors import SnapshotUnusable
from adapters.memory._state_store import read_snapshot, unreadable
from domain import WALL_CLOCK, Emission, RuleSet, StateReport, current_key, decode, inspect_state, version_of


class SnapshotState:
    """The snapshot at ``path``; ``SnapshotUnusable`` when there is none or it cannot be read."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise SnapshotUnusable(
                f"invalid setting state: no snapshot at {self.path}"
                f"{' (a directory; a snapshot is a file)' if self.path.is_dir() else ''}"
            )
        self.name = f"snapshot {self.path}"

    def report(self, sample_size: int) -> StateReport:
        try:
            return inspect_state(self.name, read_snapshot(self.path), sample_size, self.path.stat().st_size)
        except (ValueError, OSError) as exc:
            raise self._unreadable(exc) from None

    def recorded_key_fields(self, rule: str) -> tuple[str, ...] | None:
        return None

    def emissions(self, keys: Sequence[str]) -> dict[str, tuple[Emission, ...]]:
        wanted, found = set(keys), {}
        try:
            for key, value in read_snapshot(self.path):
                current = current_key(key, version_of(value))
                if current in wanted:
                    found[current] = decode(value)
        except (ValueError, OSError) as exc:
            raise self._unreadable(exc) from None
        return found

    def clock(self, rule: str, now: int) -> tuple[int, str]:
        return now, WALL_CLOCK

    def migrate_to(
        self, target: str, rules: RuleSet, old_key_fields: dict[str, tuple[str, ...]], dry_run: bool
    ) -> list[str]:
        raise SnapshotUnusable(
            "invalid setting --from/--to: migrate spark:CHECKPOINT to spark:NEW_CHECKPOINT or redis:// to "
            f"redis://; a memory snapshot ({self.path}) is read by the new version as it is"
        )

    def close(self) -> None:
        pass

    def _unreadable(self, exc: Exception) -> SnapshotUnusable:
        failure = unreadable(self.path, exc)
        return SnapshotUnusable(f"invalid setting state: {failure}")
