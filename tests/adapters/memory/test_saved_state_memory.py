"""The ``SavedState`` contract on a ``memory:PATH`` snapshot."""

import pytest

from adapters.memory import InMemoryStateStore, SnapshotState
from domain import SetupError
from tests.domain.ports.saved_state_contract import SavedStateContract


class TestSnapshotState(SavedStateContract):
    @pytest.fixture(autouse=True)
    def _path(self, tmp_path):
        self.path = tmp_path / "state.snapshot"

    def job_store(self):
        return InMemoryStateStore(snapshot=self.path)

    def saved(self):
        return SnapshotState(self.path)


def test_no_snapshot_is_refused_naming_the_path(tmp_path):
    with pytest.raises(SetupError, match=f"no snapshot at {tmp_path / 'absent'}"):
        SnapshotState(tmp_path / "absent")
