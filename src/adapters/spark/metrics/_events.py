"""A ``StreamingQueryListener``'s events, each read from the JVM in one call.

PySpark's own wrapper (``pyspark.sql.streaming.listener.JStreamingQueryListener``) builds each
event field by field, one py4j call per field, per entry of every map (the state store's
custom metrics, each source's metrics) and per observed row: about a hundred calls per
micro-batch's progress, served by the listener thread of the driver's JVM (18% of a core at
one micro-batch a second, in thread dumps of a run: docs/design/latency.md). Here the JVM
writes the event as JSON (what Spark Connect sends its clients) and PySpark's ``fromJson``
reads it: the same event objects.
"""

from __future__ import annotations

import json

from pyspark.sql.streaming.listener import (
    QueryIdleEvent,
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
    StreamingQueryListener,
)


class JsonEvents:
    """The JVM side of ``listener``: a py4j callback of Spark's ``PythonStreamingQueryListener``."""

    def __init__(self, listener: StreamingQueryListener):
        self.listener = listener

    def onQueryStarted(self, jevent) -> None:
        self.listener.onQueryStarted(QueryStartedEvent.fromJson(json.loads(jevent.json())))

    def onQueryProgress(self, jevent) -> None:
        self.listener.onQueryProgress(QueryProgressEvent.fromJson(json.loads(jevent.json())))

    def onQueryIdle(self, jevent) -> None:
        self.listener.onQueryIdle(QueryIdleEvent.fromJson(json.loads(jevent.json())))

    def onQueryTerminated(self, jevent) -> None:
        self.listener.onQueryTerminated(QueryTerminatedEvent.fromJson(json.loads(jevent.json())))

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


class JsonEventListener(StreamingQueryListener):
    """A listener whose events come through ``JsonEvents``: ``spark.streams.addListener`` (and
    ``removeListener``) register the JVM object this gives PySpark."""

    @property
    def _jlistener(self):
        from pyspark import SparkContext

        if getattr(self, "_json_events", None) is None:
            self._json_events = SparkContext._jvm.PythonStreamingQueryListenerWrapper(JsonEvents(self))
        return self._json_events
