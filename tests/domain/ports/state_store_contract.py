"""The state-store contract: every StateStore adapter must pass these scenarios.

An adapter's test module subclasses ``StateStoreContract`` and implements ``make_store``
(a fresh, empty store per test). Scenarios are stated with times in seconds.
"""

from __future__ import annotations

from domain import NO_WATERMARK, Claim, Emission, Judgement, StateStore

WINDOW = 30
RETENTION = 60


def granted(judgements: list[Judgement]) -> list[bool]:
    return [j.granted for j in judgements]


def claim(key: str, t: int, now: int | None = None, owner: str = "", window: int = WINDOW) -> Claim:
    return Claim(key, t, window, t + RETENTION, t if now is None else now, owner)


class StateStoreContract:
    def make_store(self) -> StateStore:
        raise NotImplementedError

    def reopen(self) -> StateStore:
        """A new instance over ``self.store``'s storage, as a process restarted after a crash builds it."""
        raise NotImplementedError

    def stored_keys(self) -> int:
        """How many keys ``self.store`` holds, expired ones it has not forgotten yet included."""
        raise NotImplementedError

    def setup_method(self):
        self.store = self.make_store()

    def teardown_method(self):
        self.store.close()

    def test_durable_says_whether_emissions_survive_a_crash(self):
        assert self.store.check_and_set(claim("APP\x1fa", 100)) is True
        after_crash = self.reopen()  # the first instance is never closed: nothing is saved on the way out
        assert after_crash.check_and_set(claim("APP\x1fa", 101)) is (not self.store.durable)

    def test_keys_are_forgotten_as_their_rule_s_watermark_passes_them_not_the_wall_clock(self):
        """A backlog read in a second of wall-clock time: event time decides what is kept."""
        base = 1_600_000_000
        self.store.check_and_set_many([claim(f"APP\x1fold{i}", base + i, now=base) for i in range(100)])
        self.store.check_and_set_many([claim(f"WEB\x1fold{i}", base + i, now=base) for i in range(10)])
        assert self.stored_keys() == 110
        # APP's watermark reaches base+170: keys at base+0…50 were kept until base+120…170, no longer;
        # WEB's keys stay whatever APP's watermark does
        fresh = self.store.check_and_set_many([claim(f"APP\x1fnew{i}", base + 170) for i in range(60)])
        assert granted(fresh) == [True] * 60
        assert self.stored_keys() == 110 - 51 + 60
        assert self.store.check_and_set(claim("WEB\x1fold0", base + 10, now=base)) is False

    def test_first_claim_is_granted_and_repeat_inside_window_refused(self):
        assert self.store.check_and_set(claim("APP\x1fa", 100)) is True
        assert self.store.check_and_set(claim("APP\x1fa", 129)) is False

    def test_claim_a_full_window_away_is_granted(self):
        assert self.store.check_and_set(claim("APP\x1fa", 100)) is True
        assert self.store.check_and_set(claim("APP\x1fa", 130)) is True
        assert self.store.check_and_set(claim("APP\x1fa", 159)) is False

    def test_out_of_order_claim_inside_window_is_refused(self):
        assert self.store.check_and_set(claim("APP\x1fa", 100)) is True
        assert self.store.check_and_set(claim("APP\x1fa", 71, now=100)) is False
        assert self.store.check_and_set(claim("APP\x1fa", 70, now=100)) is True

    def test_keys_are_independent(self):
        assert self.store.check_and_set(claim("APP\x1fa", 100)) is True
        assert self.store.check_and_set(claim("WEB\x1fa", 100)) is True
        assert self.store.check_and_set(claim("APP\x1fb", 100)) is True

    def test_expired_entry_is_ignored(self):
        assert self.store.check_and_set(claim("APP\x1fa", 100)) is True
        assert self.store.check_and_set(claim("APP\x1fa", 110, now=160)) is True

    def test_replay_after_restart_still_sees_an_emission_a_later_claim_outlived(self):
        # p1 emitted at 0; p3 at 90 is judged when the watermark is 100, past p1's expiry.
        # A restart resets the watermark; the replayed p2 (t=20) must still be p1's duplicate.
        assert self.store.check_and_set(claim("APP\x1fa", 0, owner="t:0:1")) is True
        assert self.store.check_and_set(claim("APP\x1fa", 90, now=100, owner="t:0:3")) is True
        assert self.store.check_and_set(claim("APP\x1fa", 20, owner="t:0:2")) is False

    def test_replay_by_same_owner_is_granted_again(self):
        assert self.store.check_and_set(claim("APP\x1fa", 100, owner="t:0:7")) is True
        assert self.store.check_and_set(claim("APP\x1fa", 100, owner="t:0:7")) is True
        assert self.store.check_and_set(claim("APP\x1fa", 100, owner="t:0:8")) is False

    def test_replay_by_same_owner_at_another_time_is_granted_again(self):
        """A processing-time record read again after a crash gets the wall clock of the re-read."""
        assert self.store.check_and_set(claim("APP\x1fa", 100, owner="t:0:7")) is True
        assert self.store.check_and_set(claim("APP\x1fa", 103, owner="t:0:7")) is True
        assert self.store.check_and_set(claim("APP\x1fa", 103, owner="t:0:8")) is False

    def test_a_claim_without_a_watermark_yet_keeps_every_emission(self):
        assert self.store.check_and_set(claim("APP\x1fa", 100, owner="t:0:1")) is True
        assert self.store.check_and_set(claim("APP\x1fa", 10_000, now=NO_WATERMARK, owner="t:0:2")) is True
        assert self.store.check_and_set(claim("APP\x1fa", 105, now=NO_WATERMARK, owner="t:0:3")) is False

    def test_batch_sees_its_own_earlier_claims(self):
        judged = self.store.check_and_set_many(
            [claim("APP\x1fa", 100), claim("APP\x1fb", 100), claim("APP\x1fa", 101), claim("APP\x1fa", 131)]
        )
        assert granted(judged) == [True, True, False, True]

    def test_batch_replayed_gets_the_same_verdicts(self):
        batch = [
            claim("APP\x1fa", 100, owner="t:0:1"),
            claim("APP\x1fa", 105, owner="t:0:2"),
            claim("APP\x1fb", 100, owner="t:0:3"),
        ]
        first = self.store.check_and_set_many(batch)
        assert self.store.check_and_set_many(batch) == first
        assert granted(first) == [True, False, True]

    def test_a_refused_claim_names_the_first_live_emission_it_repeats(self):
        judged = self.store.check_and_set_many(
            [
                claim("APP\x1fa", 100, owner="in:3:17"),
                claim("APP\x1fa", 125, owner="in:1:4"),
                claim("APP\x1fa", 131, owner="in:0:9"),
                claim("APP\x1fa", 140, owner="in:2:5"),
                claim("APP\x1fa", 150, now=161, owner="in:2:6"),
            ]
        )
        assert [j.repeats for j in judged] == [
            None,
            Emission(100, 160, "in:3:17"),
            None,
            Emission(131, 191, "in:0:9"),
            Emission(131, 191, "in:0:9"),
        ]

    def test_the_emission_a_refusal_names_keeps_an_owner_of_any_characters(self):
        owner = "dir/with,comma;semi%20:0:5"
        self.store.check_and_set(claim("APP\x1fa", 100, owner=owner))
        assert self.store.check_and_set_many([claim("APP\x1fa", 101)]) == [Judgement(Emission(100, 160, owner))]

    def test_empty_batch(self):
        assert self.store.check_and_set_many([]) == []

    def test_invalidate_forgets_the_key(self):
        self.store.check_and_set(claim("APP\x1fa", 100))
        assert self.store.invalidate("APP\x1fa") is True
        assert self.store.check_and_set(claim("APP\x1fa", 101)) is True
        assert self.store.invalidate("APP\x1fmissing") is False

    def test_entries_lists_live_emissions(self):
        self.store.check_and_set(claim("APP\x1fa", 100, owner="f:0:1"))
        self.store.check_and_set(claim("APP\x1fa", 140, owner="f:0:2"))
        entries = self.store.entries("APP\x1fa", now=150)
        assert sorted((e.time, e.owner) for e in entries) == [(100, "f:0:1"), (140, "f:0:2")]
        assert [e.time for e in self.store.entries("APP\x1fa", now=161)] == [140]

    def test_owner_with_separator_characters_round_trips(self):
        owner = "dir/with,comma;semi:0:5"
        self.store.check_and_set(claim("APP\x1fa", 100, owner=owner))
        assert [e.owner for e in self.store.entries("APP\x1fa", now=100)] == [owner]
        assert self.store.check_and_set(claim("APP\x1fa", 100, owner=owner)) is True

    def test_a_key_utf8_cannot_encode_is_judged_alone_and_kept_apart_from_every_other_key(self):
        # JSON may escape a lone surrogate ("\ud800"); no UTF-8 text holds one. Such a key is one
        # key like any other: the claims around it are judged, and it never merges with another.
        lone, other_lone, replacement = "APP\x1f\ud800", "APP\x1f\udc00", "APP\x1f\ufffd"
        batch = [
            claim("APP\x1fa", 100),
            claim(lone, 100, owner="in:0:2"),
            claim("APP\x1fb", 100),
            claim(lone, 110),
            claim(other_lone, 100),
            claim(replacement, 100),
            claim("APP\x1fa", 105),
        ]
        assert granted(self.store.check_and_set_many(batch)) == [True, True, True, False, True, True, False]
        assert [e.owner for e in self.store.entries(lone, now=100)] == ["in:0:2"]
        assert self.store.check_and_set(claim(lone, 100, owner="in:0:2")) is True  # its replay
        after_crash = self.reopen()
        assert after_crash.check_and_set(claim(lone, 120)) is (not self.store.durable)
        assert self.store.invalidate(lone) is True
        assert self.store.check_and_set(claim(lone, 121)) is True

    def test_an_owner_utf8_cannot_encode_still_replays(self):
        owner = "in\udcff.jsonl:0:3"  # a file name that is not UTF-8, as Python reads it from argv
        batch = [claim("APP\x1fa", 100, owner=owner), claim("APP\x1fb", 100)]
        assert granted(self.store.check_and_set_many(batch)) == [True, True]
        assert granted(self.store.check_and_set_many(batch[:1])) == [True]
        assert self.store.check_and_set(claim("APP\x1fa", 100, owner="in:0:4")) is False
