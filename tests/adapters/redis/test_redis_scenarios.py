"""The golden scenarios judged as the in-process engines (memory and kafka) judge them with
Redis state: claims sent to the real redis-server in chunks while the batch goes on."""

import uuid

import pytest

from adapters.redis import RedisStateStore
from tests.domain.test_memory_engine_scenarios import judged
from tests.support.scenarios import SCENARIOS

pytestmark = pytest.mark.redis


@pytest.mark.parametrize("batch_size, claim_chunk", [(3, 1), (1000, 2), (1000, 500)])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda sc: sc.name)
def test_scenario_with_redis_state(scenario, batch_size, claim_chunk, redis_url):
    store = RedisStateStore(redis_url, key_prefix=f"scenario:{uuid.uuid4().hex[:10]}:")
    try:
        labels, repeats = judged(scenario, batch_size, store, claim_chunk)
    finally:
        store.close()
    assert labels == scenario.expected()
    assert repeats == scenario.expected_repeats()
