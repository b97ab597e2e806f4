"""The Redis state store (redis-py): atomic, replay-idempotent check-and-set in Lua."""
