"""The Redis state store (redis-py): atomic, replay-idempotent check-and-set in Lua."""

from adapters.redis._eviction import ACCEPT_SETTING, OLDEST_VERSION, SAFE_POLICY, refuse_eviction, refuse_old_server
from adapters.redis._expiry import EXPIRY_TAG, file_key, filed_at, is_index, lane_of, rule_index
from adapters.redis._migration import RedisMigrationPlan, apply_redis_migration, plan_redis_migration
from adapters.redis._saved_state import SCHEMES, RedisSavedState
from adapters.redis._script import BAD_STATE, CHECK_AND_SET, PARSE, SCRIPT_SHA, SWEEP, SWEEP_SHA, claim_argument
from adapters.redis._state_store import DEFAULT_PREFIX, RedisStateStore, key_text, quoted_owner, redacted_url, redis_key

__all__ = [
    "ACCEPT_SETTING",
    "BAD_STATE",
    "CHECK_AND_SET",
    "DEFAULT_PREFIX",
    "EXPIRY_TAG",
    "OLDEST_VERSION",
    "PARSE",
    "SAFE_POLICY",
    "SCHEMES",
    "SCRIPT_SHA",
    "SWEEP",
    "SWEEP_SHA",
    "RedisMigrationPlan",
    "RedisSavedState",
    "RedisStateStore",
    "apply_redis_migration",
    "claim_argument",
    "file_key",
    "filed_at",
    "is_index",
    "key_text",
    "lane_of",
    "plan_redis_migration",
    "quoted_owner",
    "redacted_url",
    "redis_key",
    "refuse_eviction",
    "refuse_old_server",
    "rule_index",
]
