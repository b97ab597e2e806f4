"""The ``SavedState`` contract on a Redis database (a real redis-server of the test session)."""

import pytest
import redis

from adapters.redis import RedisSavedState, RedisStateStore
from tests.domain.ports.saved_state_contract import SavedStateContract

pytestmark = pytest.mark.redis


class TestRedisSavedState(SavedStateContract):
    @pytest.fixture(autouse=True)
    def _database(self, redis_url):
        base = redis_url.rstrip("/").rsplit("/", 1)[0] if redis_url.count("/") > 2 else redis_url
        self.url = f"{base}/8"  # a database of its own: a saved state is read under the default prefix
        redis.Redis.from_url(self.url).flushdb()

    def job_store(self):
        return RedisStateStore(self.url)

    def saved(self):
        return RedisSavedState(self.url)
