import resource
import signal
from contextlib import contextmanager

import pytest

from adapters.memory import InMemoryStateStore
from domain import MigratingStateStore, StateUnavailable
from tests.domain.ports.state_store_contract import StateStoreContract, claim, granted


class TestInMemoryStateStore(StateStoreContract):
    def make_store(self):
        return InMemoryStateStore()

    def reopen(self):
        return InMemoryStateStore()

    def stored_keys(self):
        return len(self.store)

    def test_every_expired_key_is_evicted_by_the_first_claim_past_it(self):
        for i in range(1000):
            self.store.check_and_set(claim(f"APP\x1fk{i}", 100 + i, now=100))
        assert len(self.store) == 1000
        self.store.check_and_set(claim("APP\x1flast", 2000))
        assert len(self.store) == 1


class TestMigratingStateStoreOverEmptyOld(StateStoreContract):
    def make_store(self):
        self.new = InMemoryStateStore()
        return MigratingStateStore(self.new, InMemoryStateStore(), retention=600)

    def reopen(self):
        return self.make_store()

    def stored_keys(self):
        return len(self.new)


@contextmanager
def file_size_limit(limit: int):
    """Writes that would grow a file past ``limit`` bytes fail with EFBIG, as on a full disk
    (the process's RLIMIT_FSIZE, with SIGXFSZ ignored so the write fails instead of killing)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


class TestInMemoryStateStoreWithSnapshot(StateStoreContract):
    """``--state memory:PATH``: the contract, and a snapshot that is replaced whole or not at all."""

    @pytest.fixture(autouse=True)
    def _snapshot(self, tmp_path):
        self.path = tmp_path / "state.snapshot"
        self.partial = tmp_path / "state.snapshot.partial"
        self.store = self.make_store()
        yield

    def setup_method(self):
        """The store is built by ``_snapshot`` (it needs the test's directory)."""

    def teardown_method(self):
        """Nothing to close: each test closes what it saves."""

    def make_store(self):
        return InMemoryStateStore(snapshot=self.path)

    def stored_keys(self):
        return len(self.store)

    def reopen(self):
        self.store.abandon()  # a crash: nothing was saved since the last close, and the lock went with it
        return InMemoryStateStore(snapshot=self.path)

    def test_a_closed_store_comes_back_with_every_key_even_those_utf8_cannot_encode(self):
        keys = ["APP\x1fa", "APP\x1f\ud800", "APP\x1f\udc00x", "APP\x1f\ufffd", "APP\x1ftab\tnew\nline%"]
        assert granted(self.store.check_and_set_many([claim(k, 100, owner="in:0:1") for k in keys])) == [True] * len(
            keys
        )
        self.store.close()
        assert not self.partial.exists()
        again = self.reopen()
        assert sorted(k for k, _ in again.items()) == sorted(keys)
        assert granted(again.check_and_set_many([claim(k, 110) for k in keys])) == [False] * len(keys)

    def test_a_save_that_fails_midway_keeps_the_previous_snapshot_and_leaves_no_partial(self):
        self.store.check_and_set(claim("APP\x1fbefore", 100))
        self.store.close()
        previous = self.path.read_bytes()
        store = self.reopen()
        store.check_and_set_many([claim(f"APP\x1fk{i}", 100) for i in range(2000)])  # ~60 kB to write
        with file_size_limit(8192), pytest.raises(StateUnavailable, match="previous snapshot was kept"):
            store.close()
        assert self.path.read_bytes() == previous
        assert not self.partial.exists()
        assert [k for k, _ in self.reopen().items()] == ["APP\x1fbefore"]

    def test_a_partial_file_left_by_a_killed_save_is_ignored_when_loading(self):
        self.store.check_and_set(claim("APP\x1fa", 100))
        self.store.close()
        self.partial.write_text("# streamdedup state snapshot\nAPP%1Fhalf-writ")
        again = self.reopen()
        assert [k for k, _ in again.items()] == ["APP\x1fa"]
        assert again.check_and_set(claim("APP\x1fa", 110)) is False
        again.close()  # the next save replaces the stray file
        assert not self.partial.exists()
