"""The in-memory engine and state store: exact semantics, no external service (``engine``,
``state_store``, ``errors``).
"""

from adapters.memory.engine import InMemoryEngine
from adapters.memory.errors import SnapshotUnusable
from adapters.memory.saved_state import SnapshotState
from adapters.memory.state_store import (
    SNAPSHOT_HEADER,
    InMemoryStateStore,
    StoredEmission,
    newest_times,
    quote_key,
    read_snapshot,
    unquote_key,
    unreadable,
)

__all__ = [
    "SNAPSHOT_HEADER",
    "InMemoryEngine",
    "InMemoryStateStore",
    "SnapshotState",
    "SnapshotUnusable",
    "StoredEmission",
    "newest_times",
    "quote_key",
    "read_snapshot",
    "unquote_key",
    "unreadable",
]
