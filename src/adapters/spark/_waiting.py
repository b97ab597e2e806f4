"""Waiting for the streaming query: until a bounded one ends or a stop is asked for, and a
graceful stop that lets the running micro-batch commit first (``stopping`` stops it).
"""

from __future__ import annotations

import time
from typing import Protocol

from adapters.spark._restart import query_failure
from adapters.spark._stopping import QueryStopper


class Stop(Protocol):
    """What ends the wait for a query: a ``threading.Event``, or the lease's ``or_lost(event)``."""

    def is_set(self) -> bool: ...


def await_query(query, bounded: bool, stop: Stop, stopper: QueryStopper | None = None) -> None:
    """Wait for a bounded query to finish or for ``stop``. Raises ``_restart.query_failure`` if it
    failed (its running micro-batch was not committed: a restart replays it); no query is left
    running either way. ``stopper``: stops the query (``stopping``)."""
    stopper = stopper or QueryStopper()
    try:
        while query.isActive:
            if stop.is_set():
                stop_after_running_batch(query, stopper=stopper)
                break
            query.awaitTermination(0.2 if bounded else 0.5)
    except Exception:
        if query.exception() is None:
            raise
    finally:
        if query.isActive:  # waiting failed (e.g. the gateway)
            stopper.stop(query)
    failure = query.exception()
    if failure is not None:
        raise query_failure(failure) from failure


def stop_after_running_batch(query, poll: float = 0.1, stopper: QueryStopper | None = None) -> None:
    """Graceful stop: let the running micro-batch commit, then stop the query.

    Stops as soon as no micro-batch runs, or right after the running one reported its
    progress: behind a backlog Spark starts the next batch at once, and waiting for a gap
    would drain the whole backlog. That next batch is cancelled before it commits and is
    processed again on restart (``stopping``: it ends as stopped, not failed).
    """
    seen = _last_progress(query)
    while query.isActive and query.status["isTriggerActive"] and _last_progress(query) == seen:
        time.sleep(poll)
    (stopper or QueryStopper()).stop(query)


def _last_progress(query) -> tuple | None:
    last = query.lastProgress
    return None if last is None else (last["batchId"], last["timestamp"])
