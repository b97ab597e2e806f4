"""MigratingStateStore retires the old state per rule: each rule has its own watermark."""

from adapters.memory.state_store import InMemoryStateStore
from domain.migration import MigratingStateStore
from domain.state import Claim


def claim(key, t, window=30):
    return Claim(key, t, window, t + 2 * window, t)


def test_a_rule_whose_clock_runs_ahead_does_not_retire_another_rules_old_state():
    old, new = InMemoryStateStore(), InMemoryStateStore()
    old.check_and_set(claim("APP\x1fa", 100))
    migrating = MigratingStateStore(new, old, retention=60)
    # WEB's watermark jumps far ahead first (claims of a batch may come grouped by rule)
    assert migrating.check_and_set_many([claim("WEB\x1fw", 100), claim("WEB\x1fz", 5000),
                                         claim("APP\x1fa", 110)]) == [True, True, False]
    assert migrating.retired_rules == {"WEB"} and not migrating.retired
    # APP retires when its own watermark is one retention past its start
    assert migrating.check_and_set(claim("APP\x1fa", 170)) is True
    assert migrating.retired


def test_the_old_state_refuses_inside_the_window_only_and_never_a_replay_of_its_own_emission():
    old = InMemoryStateStore()
    old.check_and_set(Claim("APP\x1fa", 100, 30, 160, 100, owner="in/0/7"))
    migrating = MigratingStateStore(InMemoryStateStore(), old, retention=60)
    # 29 s away is inside the window, 30 s away is not (|t - t_emitted| < window)
    assert migrating.check_and_set_many([claim("APP\x1fa", 129), claim("APP\x1fb", 100)]) == [False, True]
    assert migrating.check_and_set(claim("APP\x1fa", 130)) is True
    # the record that made the old emission, replayed, is not its own duplicate
    assert migrating.check_and_set(Claim("APP\x1fa", 100, 30, 160, 131, owner="in/0/7")) is True
