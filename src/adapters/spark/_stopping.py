"""Stopping the streaming query while a micro-batch runs, so Spark ends it as stopped.

``StreamingQuery.stop()`` interrupts the stream thread; the micro-batch it runs is not
committed and a restart processes it again. When that thread is inside the Python
``foreachBatch`` function, the interruption reaches Python as a ``Py4JJavaError`` whose text
holds the whole Java stack (8 KB and more), and Spark tells a stop from a failure by matching
that text against a pattern (``StreamExecution.PROXY_ERROR``, SPARK-39218) whose group is
matched recursively, one stack frame per character: on such a text the stream thread
overflows its stack, and stderr gets a ``StackOverflowError`` of about a thousand lines.

``QueryStopper`` stops the query and remembers it did; the ``foreachBatch`` body runs inside
``QueryStopper.translated()``, which replaces any failure that ends a batch after the stop
with ``StoppedMidBatch``: a short text that Spark's pattern recognises, so the query ends
"Stopped", without an exception and without the overflow. The batch's work is retried with
``QueryStopper.sleep`` between attempts: a stop ends the retries at once, instead of the stop
waiting for the transient policy's retries of work it cancelled.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["QueryStopper", "StoppedMidBatch"]


class StoppedMidBatch(Exception):
    """The query was stopped while this micro-batch ran: it is not committed, and a restart
    processes it again. Its text is what Spark recognises as the interruption of a Python
    ``foreachBatch`` by ``stop()`` (see the module's text), kept short."""

    def __init__(self):
        super().__init__(
            "py4j.protocol.Py4JJavaError: An error occurred while calling foreachBatch: "
            "java.lang.InterruptedException (the query was stopped during this micro-batch, "
            "which a restart processes again)"
        )


class QueryStopper:
    """Stops a query (``stop``) and translates the failure that this causes in its running
    micro-batch (``translated``). ``arm`` before each start of the query."""

    def __init__(self):
        self._stopped = threading.Event()

    def arm(self) -> None:
        """A new start of the query: nothing stopped it yet."""
        self._stopped.clear()

    def stop(self, query) -> None:
        """Stop ``query``; a micro-batch it interrupts raises ``StoppedMidBatch``."""
        self._stopped.set()
        query.stop()

    def sleep(self, seconds: float) -> None:
        """A wait between retries of a micro-batch's work: cut short by the stop, which raises
        ``StoppedMidBatch`` (an interrupted batch is not retried)."""
        if self._stopped.wait(seconds):
            raise StoppedMidBatch()

    @contextmanager
    def translated(self) -> Iterator[None]:
        """Runs a ``foreachBatch`` body: a failure once the query was stopped is ``StoppedMidBatch``."""
        try:
            yield
        except Exception:
            if self._stopped.is_set():
                raise StoppedMidBatch() from None
            raise
