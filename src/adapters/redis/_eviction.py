"""Refusing a Redis that may evict the deduplication state, or cannot run the store's scripts.

Every ``maxmemory-policy`` but ``noeviction`` can remove live keys when the server reaches
``maxmemory``: the ``allkeys-*`` policies any key, the ``volatile-*`` policies
(``volatile-lru``, a common managed-Redis default, ``volatile-lfu``, ``volatile-random``,
``volatile-ttl``) the keys with a TTL, which state keys written before the expiry index
still have. An evicted key is a forgotten emission: its next duplicate passes, and nothing
says so. A policy this module does not know is treated as evicting.

The check reads the policy, not ``maxmemory``: a server without a limit today can be given
one at runtime (``CONFIG SET``), and managed services always set one.
"""

from __future__ import annotations

import logging

from adapters.redis._state_store import RedisStateStore
from domain import IncompatibleState

log = logging.getLogger(__name__)

SAFE_POLICY = "noeviction"
OLDEST_VERSION = (7, 0)
ACCEPT_SETTING = "redis.allow_eviction=true (DEDUP_REDIS__ALLOW_EVICTION=true)"


def refuse_eviction(store: RedisStateStore, *, allowed: bool) -> str | None:
    """Check the server's eviction policy before the job uses ``store``; returns the policy.

    ``noeviction`` passes. Any other policy, or a server that answers neither ``CONFIG GET``
    nor ``INFO memory`` with it, raises ``IncompatibleState`` (one line naming the policy and
    the setting that accepts it) unless ``allowed``, which logs a warning instead. Raises
    ``StateUnavailable`` when the server cannot be reached.
    """
    policy = store.eviction_policy()
    if policy == SAFE_POLICY:
        return policy
    risk = _risk(store.address, policy)
    if not allowed:
        raise IncompatibleState(
            f"{risk}. Set maxmemory-policy to noeviction on the server, or accept the risk with {ACCEPT_SETTING}"
        )
    log.warning(
        "DUPLICATES MAY PASS: %s. Starting anyway, as redis.allow_eviction accepts it; keep the server "
        "well below its maxmemory",
        risk,
    )
    return policy


def _risk(address: str, policy: str | None) -> str:
    if policy is None:
        return (
            f"cannot tell whether redis at {address} evicts keys: it answers neither CONFIG GET nor INFO memory "
            f"with its maxmemory-policy, and an evicted state key lets that key's duplicates through"
        )
    return (
        f"redis at {address} has maxmemory-policy {policy}: under memory pressure it evicts deduplication state, "
        f"and an evicted key lets that key's duplicates through"
    )


def refuse_old_server(store: RedisStateStore) -> None:
    """Raise ``IncompatibleState`` (one line) when the server is older than Redis 7.0, whose script
    flags the store relies on (a full server refusing a batch whole, the sweep running anyway).
    A server that does not tell its version is let through: its first batch says what it lacks."""
    version = store.server_version()
    if version is not None and version < OLDEST_VERSION:
        shown = ".".join(map(str, version))
        raise IncompatibleState(
            f"redis at {store.address} is version {shown}: the state store needs Redis 7.0 or later (script flags)"
        )
