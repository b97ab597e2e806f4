"""The in-memory engine and state store: exact semantics, no external service (``_engine``,
``_state_store``, ``_errors``).
"""

from adapters.memory._engine import InMemoryEngine
from adapters.memory._errors import SnapshotUnusable
from adapters.memory._saved_state import SnapshotState
from adapters.memory._state_store import (
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
