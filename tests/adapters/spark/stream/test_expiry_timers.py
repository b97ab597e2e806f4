"""When a key of the Spark operator wakes (``streamdedup.stream.ExpiryTimers``): when it did
before, and the expiries a wake covers (a key whose expiry it covers keeps it); timers an earlier
version set cover only the expiries up to their second.

Spark's event-time watermark moves in whole seconds (the operator's eviction clock), so each
``now`` here is a whole second, or -1 before the first watermark."""

from __future__ import annotations

import itertools

import pytest

pytestmark = pytest.mark.spark

EXPIRIES = [0, 1, 599, 1_200, 1_689_020_000]
AHEADS_MS = [0, 1_000, 7_000, 997_000, 998_000, 5_000_000]
NOWS_MS = [-1, 0, 1_000, 1_199_000, 1_200_000, 1_201_000, 1_689_019_000_000, 1_689_020_000_000, 1_689_030_000_000]


@pytest.fixture(scope="module")
def timers(spark):
    return spark._jvm.streamdedup.stream.ExpiryTimers


def wakes_at(timer: int) -> int:
    """The first whole second (ms) of Spark's watermark at or past ``timer``: when it fires."""
    return -(-timer // 1000) * 1000


@pytest.mark.parametrize("expiry", EXPIRIES)
def test_a_timer_wakes_its_key_when_the_lagging_rule_may_have_let_its_emissions_expire(timers, expiry):
    for ahead, now in itertools.product(AHEADS_MS, NOWS_MS):
        timer = timers.wake(expiry, ahead, now)
        assert timer > now, (expiry, ahead, now)
        # as an earlier version's timer, max(now + 1, expiry * 1000 + ahead), fired
        assert wakes_at(timer) == wakes_at(max(now + 1, expiry * 1000 + ahead)), (expiry, ahead, now)
        assert timers.covers(timer) >= expiry


def test_a_timer_set_by_an_earlier_version_covers_only_the_expiries_up_to_its_second(timers):
    """Format 4's first timers: expiry * 1000 + ahead (whole seconds), or Spark's watermark + 1 ms."""
    for expiry, ahead, now in itertools.product(EXPIRIES, AHEADS_MS, NOWS_MS):
        earlier = max(now + 1, expiry * 1000 + ahead)
        assert timers.covers(earlier) == earlier // 1000, (expiry, ahead, now)
        assert timers.covers(earlier) * 1000 <= earlier  # kept for the expiries it was set at or after
