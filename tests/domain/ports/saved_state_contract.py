"""The ``SavedState`` port's contract (``domain._ports``): what ``dedup state`` reads from a
state no job runs on. Each adapter's test subclasses it and says how a job writes its state
(``write``, through that adapter's ``StateStore``) and how it is then opened (``saved``)."""

from __future__ import annotations

import pytest

from domain import RuleSet, SavedState, SetupError, StateStore
from tests.domain.ports.state_store_contract import claim

NOW = 1_000_000


class SavedStateContract:
    def write(self, claims) -> None:
        """Judge ``claims`` with the adapter's ``StateStore`` as a job would, then stop it."""
        store = self.job_store()
        try:
            for c in claims:
                store.check_and_set(c)
        finally:
            store.close()

    def job_store(self) -> StateStore:
        raise NotImplementedError

    def saved(self) -> SavedState:
        raise NotImplementedError

    def test_the_report_counts_what_a_job_left_per_rule(self):
        self.write([claim("APP\x1fa", 100), claim("APP\x1fb", 101), claim("WEB\x1fc", 102)])
        saved = self.saved()
        try:
            report = saved.report(sample_size=3)
        finally:
            saved.close()
        assert dict(report.keys_per_rule) == {"APP": 2, "WEB": 1}
        assert report.keys == 3 and report.store == saved.name

    def test_emissions_are_those_of_the_keys_asked_for_that_hold_any(self):
        self.write([claim("APP\x1fa", 100, owner="in:0:7"), claim("APP\x1fb", 101)])
        saved = self.saved()
        try:
            found = saved.emissions(["APP\x1fa", "APP\x1fnever"])
        finally:
            saved.close()
        assert list(found) == ["APP\x1fa"]
        assert [(e.time, e.owner) for e in found["APP\x1fa"]] == [(100, "in:0:7")]

    def test_a_state_without_a_watermark_judges_liveness_at_the_wall_clock(self):
        self.write([claim("APP\x1fa", 100)])
        saved = self.saved()
        try:
            moment, what = saved.clock("APP", NOW)
            recorded = saved.recorded_key_fields("APP")
        finally:
            saved.close()
        assert moment == NOW and "wall clock" in what
        assert recorded is None  # the job's settings say them

    def test_a_migration_to_a_state_of_another_kind_is_refused_in_one_line(self):
        self.write([claim("APP\x1fa", 100)])
        saved = self.saved()
        try:
            with pytest.raises(SetupError, match="invalid setting --") as refused:
                saved.migrate_to("spark:/nowhere" if "spark" not in saved.name else "memory:x", RuleSet(), {}, True)
        finally:
            saved.close()
        assert "\n" not in str(refused.value)
