"""Test doubles of the ports and a one-call run, for tests of code that uses streamdedup as a
library: no broker, no Redis, no Spark; a run over a few thousand records takes milliseconds.

    from adapters.testing import deduplicate

    run = deduplicate(['{"id": "1", "uniqueValue": "u", "type": "APP", "timestamp": 1700000000}'] * 2)
    assert len(run.emitted) == 1 and run.accounting.duplicates == 1

``deduplicate`` (and its result, ``Run``) judges records as the memory engine does. The
doubles, to assemble a ``domain.BatchPipeline`` by hand: ``FakeClock`` (time moved by the
test), ``ListSource``, ``ListSink``, ``ListDeadLetterSink``, ``ListNotificationSource``,
``ListNotificationSink``, ``RecordingCommitter`` (lists a test fills and reads back),
``FlakyStateStore`` and ``SendingStateStore`` (a state store that fails on demand),
``SharedStateStore`` (one state several cores share, as Redis is). They are what this
project's own tests use; none is a mock: each behaves as its port says.
"""

from adapters.testing._clock import FakeClock
from adapters.testing._run import Run, deduplicate
from adapters.testing._stores import FlakyStateStore, SendingStateStore, SharedStateStore
from adapters.testing._streams import (
    ListDeadLetterSink,
    ListNotificationSink,
    ListNotificationSource,
    ListSink,
    ListSource,
    RecordingCommitter,
    offsets,
)

__all__ = [
    "FakeClock",
    "FlakyStateStore",
    "ListDeadLetterSink",
    "ListNotificationSink",
    "ListNotificationSource",
    "ListSink",
    "ListSource",
    "RecordingCommitter",
    "Run",
    "SendingStateStore",
    "SharedStateStore",
    "deduplicate",
    "offsets",
]
