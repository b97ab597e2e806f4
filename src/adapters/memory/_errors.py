"""The memory adapter's errors."""

from __future__ import annotations

from domain import SetupError


class SnapshotUnusable(SetupError):
    """A ``memory:PATH`` snapshot this run cannot use: in use by another run, in a directory it
    cannot write, or not a readable snapshot."""
