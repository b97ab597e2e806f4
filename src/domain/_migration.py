"""Moving deduplication memory from an old state format or key layout to a new one.

``MigratingStateStore`` writes every new emission to the new store and consults the old
store read-only as a fallback: a claim refused by an old, still-live emission is a
duplicate, exactly as if the old job had remembered it. Once a rule's watermark has moved
past the migration's start by the longest retention, every old entry of that rule has
expired and the old store is no longer consulted for it (retired, and logged); each rule
has its own watermark, so each retires on its own.

The old store is read under the current key spelling (``domain._keys``). An old v1/v2 store
holds the few keys whose values contained ``\\x1e`` or ``\\x1f`` under their legacy spelling:
those are not found here; ``dedup state migrate`` translates the unambiguous ones.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from domain._errors import SetupError
from domain._keys import decode_key, encode_key, rule_of
from domain._ports import StateStore
from domain._state import Claim, Emission, Judgement

log = logging.getLogger(__name__)


class IncompatibleState(SetupError):
    """The job cannot use the state it was pointed at (another key layout or state format).

    The message is one line naming the change and the remedy; nothing was modified.
    """


@dataclass(frozen=True)
class KeyTranslation:
    """Maps a key in the new layout to the old one by field name.

    The old key fields must be a subset of the new ones (e.g. ``uniqueValue`` →
    ``uniqueValue``+``type``); otherwise an old key cannot be derived and the migration is
    refused.
    """

    old_fields: tuple[str, ...]
    new_fields: tuple[str, ...]

    def __post_init__(self) -> None:
        missing = [f for f in self.old_fields if f not in self.new_fields]
        if missing:
            raise ValueError(f"cannot migrate: old key field(s) {', '.join(missing)} are not in the new key")

    def old_key(self, new_key: str) -> str:
        rule, values = decode_key(new_key)
        by_name = dict(zip(self.new_fields, values))
        return encode_key(rule, (by_name[f] for f in self.old_fields))


@dataclass
class MigratingStateStore:
    """The new store, with the old one consulted read-only; retired per rule.

    Each rule has its own watermark, so each rule's old entries are retired on their own:
    once a claim's ``now`` is ``retention`` past the first ``now`` seen for its rule.
    """

    new: StateStore
    old: StateStore
    retention: int
    translations: dict[str, KeyTranslation] = field(default_factory=dict)
    started_at: dict[str, int] = field(default_factory=dict)
    retired_rules: set[str] = field(default_factory=set)
    forgotten: set[str] = field(default_factory=set)  # keys invalidated while the old store is consulted

    @property
    def durable(self) -> bool:
        """New emissions go to the new store: it decides what survives a crash."""
        return self.new.durable

    @property
    def retired(self) -> bool:
        """Every rule seen so far has retired its old entries."""
        return bool(self.started_at) and set(self.started_at) <= self.retired_rules

    def check_and_set(self, claim: Claim) -> bool:
        return self.check_and_set_many([claim])[0].granted

    def check_and_set_many(self, claims: Sequence[Claim]) -> list[Judgement]:
        refused = [self._refused_by_old(c) for c in claims]
        fresh = [c for c, r in zip(claims, refused) if r is None]
        judged = iter(self.new.check_and_set_many(fresh) if fresh else [])
        return [next(judged) if r is None else Judgement(r) for r in refused]

    def invalidate(self, key: str) -> bool:
        """Forget ``key`` in the new store; the old one is never written, so this job stops
        consulting it for that key (a restart before the rule retires consults it again)."""
        old_forgot = False
        if rule_of(key) not in self.retired_rules and key not in self.forgotten:
            old_forgot = bool(self.old.entries(self._old_key(key), 0))  # anything it holds
            self.forgotten.add(key)
        return self.new.invalidate(key) or old_forgot

    def entries(self, key: str, now: int) -> tuple[Emission, ...]:
        return self._old_entries(key, now) + self.new.entries(key, now)

    def close(self) -> None:
        self.new.close()
        self.old.close()

    def _refused_by_old(self, claim: Claim) -> Emission | None:
        """The old store's emission ``claim`` repeats, if any."""
        if self._retires(rule_of(claim.key), claim.now):
            return None
        return next(
            (e for e in self._old_entries(claim.key, claim.now) if claim.within_window(e) and not claim.replays(e)),
            None,
        )

    def _old_entries(self, key: str, now: int) -> tuple[Emission, ...]:
        if rule_of(key) in self.retired_rules or key in self.forgotten:
            return ()
        return self.old.entries(self._old_key(key), now)

    def _retires(self, rule: str, now: int) -> bool:
        start = self.started_at.setdefault(rule, now)
        if rule not in self.retired_rules and now >= start + self.retention:
            log.warning(
                "old state retired for rule %s: its watermark %d is one retention (%d s) past the "
                "migration's start %d; it is no longer consulted",
                rule,
                now,
                self.retention,
                start,
            )
            self.retired_rules.add(rule)
        return rule in self.retired_rules

    def _old_key(self, key: str) -> str:
        translation = self.translations.get(rule_of(key))
        return translation.old_key(key) if translation else key
