"""MigratingStateStore retires the old state per rule: each rule has its own watermark, and its
retirement counts from the old state's own newest emission."""

from adapters.memory import InMemoryStateStore
from app import MigrationSettings, build_state_store
from domain import GRANTED, Claim, DedupRule, Emission, Judgement, MigratingStateStore, RuleSet
from tests.domain.ports.state_store_contract import granted


def claim(key, t, window=30):
    return Claim(key, t, window, t + 2 * window, t)


def test_a_rule_whose_clock_runs_ahead_does_not_retire_another_rules_old_state():
    old, new = InMemoryStateStore(), InMemoryStateStore()
    old.check_and_set(claim("APP\x1fa", 100))
    migrating = MigratingStateStore(new, old, retention=60)
    # WEB's watermark jumps far ahead first (claims of a batch may come grouped by rule)
    assert granted(
        migrating.check_and_set_many([claim("WEB\x1fw", 100), claim("WEB\x1fz", 5000), claim("APP\x1fa", 110)])
    ) == [True, True, False]
    assert migrating.retired_rules == {"WEB"} and not migrating.retired
    # APP retires when its own watermark is one retention past its start
    assert migrating.check_and_set(claim("APP\x1fa", 170)) is True
    assert migrating.retired


def test_the_old_state_refuses_inside_the_window_only_and_never_a_replay_of_its_own_emission():
    old = InMemoryStateStore()
    old.check_and_set(Claim("APP\x1fa", 100, 30, 160, 100, owner="in/0/7"))
    migrating = MigratingStateStore(InMemoryStateStore(), old, retention=60)
    # 29 s away is inside the window, 30 s away is not (|t - t_emitted| < window)
    assert migrating.check_and_set_many([claim("APP\x1fa", 129), claim("APP\x1fb", 100)]) == [
        Judgement(Emission(100, 160, "in/0/7")),
        GRANTED,
    ]  # the old state's emission is the one repeated
    assert migrating.check_and_set(claim("APP\x1fa", 130)) is True
    # the record that made the old emission, replayed, is not its own duplicate
    assert migrating.check_and_set(Claim("APP\x1fa", 100, 30, 160, 131, owner="in/0/7")) is True


def test_the_old_state_retires_one_retention_after_its_own_newest_emission_not_the_new_jobs_first(tmp_path):
    # the old job emitted u at 1000; the new job's first event is older (990). Counted from 990,
    # the old state would retire at 1050 while u@1000 is live until 1060, and u@1025 would pass.
    old = InMemoryStateStore()
    old.check_and_set(Claim("APP\x1fu", 1000, 30, 1060, 1000, owner="old:0:41"))
    old.save(tmp_path / "old.snapshot")
    migration = MigrationSettings(state_from=f"memory:{tmp_path / 'old.snapshot'}")
    migrating = build_state_store("memory", migration, RuleSet({"APP": DedupRule("APP", 30)}))
    # the watermark (now) after each of v@990, w@1050, u@1025
    assert granted(
        migrating.check_and_set_many(
            [claim("APP\x1fv", 990), claim("APP\x1fw", 1050), Claim("APP\x1fu", 1025, 30, 1085, 1050)]
        )
    ) == [True, True, False]
    assert migrating.retired_rules == set()
    assert migrating.check_and_set(claim("APP\x1fx", 1060)) is True  # 1000 + 60: no old entry is live
    assert migrating.retired_rules == {"APP"}


class ReadOnlyStore(InMemoryStateStore):
    """An old store that refuses every write, as a read-only replica would."""

    def check_and_set_many(self, claims):
        raise AssertionError("the old store was written")

    def invalidate(self, key):
        raise AssertionError("the old store was written")


def test_an_invalidated_key_passes_again_without_the_old_store_being_written():
    old = ReadOnlyStore()
    InMemoryStateStore.check_and_set_many(old, [claim("APP\x1fa", 100)])
    migrating = MigratingStateStore(InMemoryStateStore(), old, retention=600)
    assert migrating.check_and_set(claim("APP\x1fa", 105)) is False  # the old store remembers a

    assert migrating.invalidate("APP\x1fa") is True  # it remembered something, now forgotten
    assert migrating.entries("APP\x1fa", 105) == ()
    assert migrating.check_and_set(claim("APP\x1fa", 106)) is True  # the re-sent event passes
    assert migrating.check_and_set(claim("APP\x1fa", 107)) is False  # and is remembered by the new store
    assert migrating.invalidate("APP\x1fb") is False
