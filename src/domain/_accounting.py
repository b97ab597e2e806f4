"""Where every input record ended: the counts each engine reports.

Every record read ends in exactly one of ``out``, ``duplicates``, ``dead_lettered`` or
``skipped``, so ``in == out + duplicates + dead_lettered + skipped`` holds after every
batch. ``late``, ``invalid`` and ``passed_through`` break those buckets down (late and
invalid records are dead-lettered; events without a rule are passed through to ``out``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields

from domain._metrics import Metrics

BUCKETS = ("out", "duplicates", "dead_lettered", "skipped")
LABEL_OF = {"out": "rule", "duplicates": "rule", "late": "rule", "dead_lettered": "reason"}
"""The counts broken down by a label: per rule (the rule's event type; ``NO_RULE`` for events of a
type without one, passed through) or per dead-letter reason (``domain._errors`` codes)."""
NO_RULE = "none"
UNKNOWN = "unknown"  # a label the counting engine did not know


@dataclass
class Accounting:
    records_in: int = 0
    out: int = 0
    duplicates: int = 0
    dead_lettered: int = 0
    skipped: int = 0
    late: int = 0
    invalid: int = 0
    passed_through: int = 0
    invalidations: int = 0
    rejected_notifications: int = 0  # invalid notifications: dead-lettered (Kafka) or logged (files)
    detail: Counter[tuple[str, str]] = field(default_factory=Counter, compare=False, repr=False)
    """``(name, label value) -> count`` for the names in ``LABEL_OF``; sums to the name's count."""

    @property
    def balanced(self) -> bool:
        return bool(self.records_in == sum(getattr(self, b) for b in BUCKETS))

    def tally(self, name: str, amount: int = 1, label: str | None = None) -> None:
        """Count ``amount`` (may be negative: a record moved on) under ``name`` and, for a
        labelled name, under its ``label`` value."""
        setattr(self, name, getattr(self, name) + amount)
        if name in LABEL_OF:
            self.detail[name, label or UNKNOWN] += amount

    def add(self, other: Accounting) -> None:
        for name, value in other.counts().items():
            setattr(self, name, getattr(self, name) + value)
        self.detail.update(other.detail)

    def by_label(self, name: str) -> dict[str, int]:
        """``name``'s count per label value; what no label accounts for is under ``UNKNOWN``."""
        found = {label: n for (counted, label), n in self.detail.items() if counted == name and n}
        rest = getattr(self, "records_in" if name == "in" else name) - sum(found.values())
        if rest:
            found[UNKNOWN] = found.get(UNKNOWN, 0) + rest
        return found

    def publish(self, metrics: Metrics) -> None:
        """Add the non-zero counts to a ``domain._ports.Metrics``' counters, named as ``as_dict``,
        the names of ``LABEL_OF`` per label value (``increment("duplicates", 3, rule="APP")``)."""
        for name, value in self.as_dict().items():
            if name in LABEL_OF:
                for label, amount in self.by_label(name).items():
                    metrics.increment(name, amount, **{LABEL_OF[name]: label})
            elif value:
                metrics.increment(name, value)

    def counts(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "detail"}

    def as_dict(self) -> dict[str, int]:
        counts = self.counts()
        counts["in"] = counts.pop("records_in")
        return {"in": counts.pop("in"), **counts}

    def summary_line(self) -> str:
        d = self.as_dict()
        main = ", ".join(f"{k}={d[k]}" for k in ("in", *BUCKETS))
        shown = (
            "late",
            "invalid",
            "passed_through",
            "invalidations",
            *(("rejected_notifications",) if d["rejected_notifications"] else ()),
        )
        detail = ", ".join(f"{k}={d[k]}" for k in shown)
        return f"{main} ({detail}){'' if self.balanced else ' UNBALANCED'}"
