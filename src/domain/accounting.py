"""Where every input record ended: the counts each engine reports.

Every record read ends in exactly one of ``out``, ``duplicates``, ``dead_lettered`` or
``skipped``, so ``in == out + duplicates + dead_lettered + skipped`` holds after every
batch. ``late``, ``invalid`` and ``passed_through`` break those buckets down (late and
invalid records are dead-lettered; events without a rule are passed through to ``out``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

BUCKETS = ("out", "duplicates", "dead_lettered", "skipped")


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

    @property
    def balanced(self) -> bool:
        return self.records_in == sum(getattr(self, b) for b in BUCKETS)

    def add(self, other: "Accounting") -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)

    def publish(self, metrics) -> None:
        """Add the non-zero counts to a ``domain.ports.Metrics``' counters, named as ``as_dict``."""
        for name, value in self.as_dict().items():
            if value:
                metrics.increment(name, value)

    def as_dict(self) -> dict[str, int]:
        counts = asdict(self)
        counts["in"] = counts.pop("records_in")
        return {"in": counts.pop("in"), **counts}

    def summary_line(self) -> str:
        d = self.as_dict()
        main = ", ".join(f"{k}={d[k]}" for k in ("in", *BUCKETS))
        detail = ", ".join(f"{k}={d[k]}" for k in ("late", "invalid", "passed_through", "invalidations"))
        return f"{main} ({detail}){'' if self.balanced else ' UNBALANCED'}"
