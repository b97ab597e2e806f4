from adapters.memory.state_store import InMemoryStateStore
from domain.migration import MigratingStateStore
from tests.contracts.state_store_contract import StateStoreContract, claim


class TestInMemoryStateStore(StateStoreContract):
    def make_store(self):
        return InMemoryStateStore()

    def reopen(self):
        return InMemoryStateStore()

    def test_expired_keys_are_evicted_not_just_ignored(self):
        for i in range(1000):
            self.store.check_and_set(claim(f"APP\x1fk{i}", 100 + i, now=100))
        assert len(self.store) == 1000
        self.store.check_and_set(claim("APP\x1flast", 2000))
        assert len(self.store) == 1


class TestMigratingStateStoreOverEmptyOld(StateStoreContract):
    def make_store(self):
        return MigratingStateStore(InMemoryStateStore(), InMemoryStateStore(), retention=600)

    def reopen(self):
        return self.make_store()
