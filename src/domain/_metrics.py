"""The metrics port: where an engine and the domain's counters report what they did.

A leaf module (``domain._ports`` names it too), so the accounting and the watermarks can type
what they publish to without importing the ports.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Metrics(Protocol):
    """Where an engine reports what it did. Names are the accounting's (``Accounting.as_dict``)
    and the engines' figures (``state_rows``, ``batch_duration_seconds``…); labels are keyword
    arguments (``increment("duplicates", 3, rule="APP")``, ``domain._accounting.LABEL_OF``)."""

    def increment(self, name: str, amount: int = 1, **labels: str) -> None:
        """Add ``amount`` to a counter."""

    def gauge(self, name: str, value: float, **labels: str) -> None:
        """Set a figure that goes up and down."""

    def observe(self, name: str, value: float, **labels: str) -> None:
        """Record one measurement of a distribution (a batch's duration)."""

    def observe_many(self, name: str, values: Sequence[float], **labels: str) -> None:
        """Record many measurements of one series at once (each event's latency in a batch)."""
