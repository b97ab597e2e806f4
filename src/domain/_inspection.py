"""A summary of a deduplication state, whatever store holds it.

Adapters feed ``(key, stored value)`` pairs; the report counts keys per rule, samples a
few keys (their values, decoded from the key's spelling, joined by `` | ``), gives the
oldest and newest expiry and the format versions found.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from domain._keys import SEPARATOR, decode_key, display_value
from domain._state import StateFormatError, current_key, decode, version_of


@dataclass
class StateReport:
    store: str
    keys_per_rule: Counter[str] = field(default_factory=Counter)
    versions: Counter[int | str] = field(default_factory=Counter)  # a value format, or a Spark operator's "name/format"
    samples: dict[str, list[str]] = field(default_factory=dict)
    oldest_expiry: int | None = None
    newest_expiry: int | None = None
    unreadable: int = 0
    size_bytes: int | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def note_expiries(self, oldest: int | None, newest: int | None) -> None:
        """Widen the oldest/newest expiry seen so far by ``oldest`` and ``newest`` (``None``: nothing)."""
        if oldest is not None:
            self.oldest_expiry = oldest if self.oldest_expiry is None else min(self.oldest_expiry, oldest)
        if newest is not None:
            self.newest_expiry = newest if self.newest_expiry is None else max(self.newest_expiry, newest)

    @property
    def keys(self) -> int:
        return sum(self.keys_per_rule.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "keys": self.keys,
            "keys_per_rule": dict(self.keys_per_rule),
            "format_versions": {_version_label(v): n for v, n in sorted(self.versions.items(), key=str)},
            "oldest_expiry": self.oldest_expiry,
            "newest_expiry": self.newest_expiry,
            "unreadable": self.unreadable,
            "size_bytes": self.size_bytes,
            "samples": self.samples,
            **({"details": self.details} if self.details else {}),
        }


def _version_label(version: int | str) -> str:
    """``v2`` for a domain codec version; other stores label their own formats (e.g. ``window-dedup/1``)."""
    return f"v{version}" if isinstance(version, int) else version


def inspect_state(
    store: str, items: Iterable[tuple[str, str | bytes]], sample_size: int = 3, size_bytes: int | None = None
) -> StateReport:
    report = StateReport(store, size_bytes=size_bytes)
    for key, value in items:
        version = _note_value(report, value)
        rule, sample = key_sample(key if version is None else current_key(key, version))
        report.keys_per_rule[rule] += 1
        samples = report.samples.setdefault(rule, [])
        if len(samples) < sample_size:
            samples.append(sample)
    return report


def _note_value(report: StateReport, value: str | bytes) -> int | None:
    """Counts ``value``'s format version and expiries in ``report``; its version, None when unreadable."""
    try:
        entries, version = decode(value), version_of(value)
    except (StateFormatError, ValueError):
        report.unreadable += 1
        return None
    report.versions[version] += 1
    for e in entries:
        report.note_expiries(e.expires_at, e.expires_at)
    return version


def key_sample(key: str) -> tuple[str, str]:
    """A key's rule and its values as one line (``v1 | v2``); a malformed key shown as it is."""
    try:
        rule, values = decode_key(key)
    except ValueError:
        return key.partition(SEPARATOR)[0], repr(key)
    return rule, " | ".join(display_value(v) for v in values)
