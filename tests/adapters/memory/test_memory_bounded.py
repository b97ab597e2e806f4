"""Under a steady stream, the in-memory state holds only the keys inside their retention."""

import gc
import io
import json

from adapters.memory import InMemoryStateStore
from adapters.testing import FakeClock
from app import ProgressLine
from domain import Accounting, Claim, Deduplicator, DedupRule, RawRecord, RuleSet, SourcePosition


def test_state_size_stays_bounded_by_the_retention():
    store = InMemoryStateStore()
    clock = FakeClock()
    core = Deduplicator(RuleSet({"APP": DedupRule("APP", 30)}), store, clock)
    sizes = []
    for second in range(2000):
        clock.time = 1_700_000_000 + second  # a live stream: event time is the wall clock
        batch = [
            RawRecord(
                json.dumps(
                    {"id": "x", "uniqueValue": f"{second}-{i}", "type": "APP", "timestamp": 1_700_000_000 + second}
                ).encode(),
                SourcePosition("s", 0, second * 10 + i),
            )
            for i in range(10)
        ]
        core.process(batch)
        sizes.append(len(store))
    # 10 new keys a second, retention = window + lateness = 60 s, kept one retention more
    assert max(sizes[200:]) <= 10 * 121
    assert sizes[-1] >= 10 * 119


def test_progress_line_shows_rate_and_counts():
    stream = io.StringIO()
    progress = ProgressLine(stream, interval=0)
    progress(Accounting(records_in=100, out=60, duplicates=30, dead_lettered=10))
    progress.close()
    text = stream.getvalue()
    assert text.startswith("\r") and "in=100 out=60 dup=30 dlq=10" in text and "ev/s" in text


def test_the_state_gives_the_cycle_collector_nothing_to_walk_per_key():
    """A full collection stops the engine for as long as it walks the tracked objects: the
    store's keys and emissions (repeats and evictions included) must not be among them."""
    store = InMemoryStateStore()
    gc.collect()
    before = len(gc.get_objects())
    for second in range(200):
        now = 1_700_000_000 + second
        claims = [Claim(f"APP\x1f{second}-{i}", now, 30, now + 30, now - 31, f"s:0:{second}-{i}") for i in range(100)]
        repeats = [Claim(f"APP\x1f{second - 1}-{i}", now, 30, now + 30, now - 31, "s:1:x") for i in range(10)]
        store.check_and_set_many(claims + repeats)
    del claims, repeats
    assert len(store) > 5_000
    for _ in range(3):
        gc.collect()
    assert len(gc.get_objects()) - before < 500
