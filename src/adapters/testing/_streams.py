"""Sources, sinks and a committer over lists: what a test hands the pipeline and reads back
(``domain.ports``' event source, sinks and batch committer)."""

from __future__ import annotations

from domain import SinkUnavailable


class ListSource:
    """An event source handing out one of ``batches`` per poll (``[]`` is an empty poll), at most
    ``max_records`` of it (the rest is the next poll's); bounded. The ``timeout`` of each poll
    goes to ``waits``, acknowledgements to ``journal`` as ``("ack", offsets)``.
    """

    def __init__(self, batches, journal=None):
        self.batches = list(batches)
        self.polls = 0
        self.waits = []
        self.journal = [] if journal is None else journal

    def poll(self, max_records, timeout):
        self.polls += 1
        self.waits.append(timeout)
        if not self.batches:
            return []
        batch = self.batches.pop(0)
        if len(batch) > max_records:
            self.batches.insert(0, batch[max_records:])
        return list(batch[:max_records])

    @property
    def exhausted(self):
        return not self.batches

    def assignment(self):
        return None

    def retain(self, records):
        return records

    def commit(self, records):
        self.journal.append(("ack", offsets(records)))

    def close(self):
        pass


class ListSink:
    """Collects written events; ``fail_values`` are rejected with ``error``; flushes go to ``journal``."""

    def __init__(self, fail_values=(), error=None, journal=None):
        self.written: list[bytes] = []
        self.fail_values = set(fail_values)
        self.error = error or SinkUnavailable("broker refused the write")
        self.flushes = 0
        self.journal = [] if journal is None else journal

    def write(self, record, event):
        if record.value in self.fail_values:
            raise self.error
        self.written.append(record.value)

    def flush(self):
        self.flushes += 1
        self.journal.append("flush")

    def close(self):
        pass


class ListDeadLetterSink:
    """Collects the dead letters written (``domain.DeadLetter``), in order."""

    def __init__(self):
        self.written = []

    def write(self, dead_letter):
        self.written.append(dead_letter)

    def flush(self):
        pass

    def close(self):
        pass


class ListNotificationSink:
    """Collects the notifications published (``domain.Notification``), in order."""

    def __init__(self):
        self.published = []

    def publish(self, notification):
        self.published.append(notification)

    def close(self):
        pass


class ListNotificationSource:
    """Hands out one list of ``arrivals`` per poll; counts the acknowledgements."""

    def __init__(self, arrivals):
        self.arrivals = list(arrivals)
        self.commits = 0
        self.rejected = 0

    def poll(self, timeout, final=False):
        return self.arrivals.pop(0) if self.arrivals else []

    def commit(self):
        self.commits += 1

    def close(self):
        pass


class RecordingCommitter:
    """A batch committer writing its calls to ``journal``; ``fail_commit`` is raised by ``commit``."""

    def __init__(self, journal=None, fail_commit=None):
        self.journal = [] if journal is None else journal
        self.fail_commit = fail_commit

    def begin(self):
        self.journal.append("begin")

    def commit(self, records):
        if self.fail_commit is not None:
            raise self.fail_commit
        self.journal.append(("commit", offsets(records)))

    def abort(self):
        self.journal.append("abort")


def offsets(records) -> list[int]:
    """The offsets of ``records``, in order (what the journals note of an acknowledgement)."""
    return [r.position.offset for r in records]
