"""One running instance per checkpoint: a lease kept in the checkpoint.

Two Spark jobs started on one checkpoint both ran. Spark notices only when both write the
same offsets-log entry (a ``ConcurrentModificationException``, "Multiple streaming queries
are concurrently using …"), which the restart strategy took for a passing failure, so both
went on, each writing every new event's output (twice the output with at-least-once).

``CheckpointLease`` keeps ``streamdedup/owner`` in the checkpoint, through its own Hadoop
file system: the owner's id (host, pid, a random part) and a heartbeat (wall-clock time and
a counter), renewed every ``timeout / 5`` seconds by a daemon thread.

* ``take`` (at start, before anything is written): no lease, this instance's own or a stale
  one (last renewed ``timeout`` or more ago) is written as this instance's. A fresh lease of
  another instance is watched: renewed, its owner is alive and the start is refused
  (``CheckpointInUse``, one line); not renewed before it turns stale (a killed driver), it
  is taken over. The lease is read back after a moment, so of two instances taking it at
  the same time the one written last keeps it and the other is refused. ``take`` is
  ``claim`` (the write) then ``hold`` (the read back): the engine builds its plan, which only
  reads the checkpoint, in between, so the moment costs a start nothing.
* The heartbeat reads the lease before renewing it: another owner in it (a takeover after
  this instance stalled for ``timeout``), no lease, or no renewal possible for ``timeout``
  means the checkpoint is lost: ``lost`` is set, the engine stops its query and ``release``
  raises ``CheckpointInUse``. A renewal overdue by ``timeout / 2`` (the process stalled,
  between the read and the write or before them) reads the lease once more right before
  writing, so a takeover made during the stall is found rather than written over. Overdue is
  measured from just before the last stamp was taken, never from the end of its write: others
  age the lease from the stamp, and a slow write must not make a stall look shorter. File systems offer no
  compare-and-set, so a stall landing inside that last write can still overwrite a takeover:
  then the taker is the one that finds the lease another's (its read-back in ``hold`` or its
  heartbeat) and stops, and one instance goes on either way.
* ``confirm`` runs before each micro-batch's output is written and raises ``CheckpointInUse``
  unless the lease is still this instance's: an instance that lost the checkpoint writes
  nothing more, so at-least-once output is not written by two instances either. It reads the
  lease only when the heartbeat has not found it this instance's (and renewed it) within
  ``timeout / 2``: another instance takes a lease over only once it has not been renewed for
  ``timeout``, so a fresher renewal proves it is still ours without a read on the batch's path.
* ``release`` (the query ended) stops the heartbeat and deletes the lease if it is still ours.

``CheckpointInUse`` is never restarted (``error_class`` ``setup``): a restart would find the
other instance's lease. Hosts sharing a checkpoint need clocks that agree to well within
``timeout`` (a lease's age is its heartbeat's wall-clock time).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable

from adapters.spark.checkpoint._hadoop_files import HadoopPath
from adapters.spark.checkpoint._logs import Checkpoint
from adapters.spark.shared import CheckpointInUse, CorruptFile
from domain import DedupError

log = logging.getLogger(__name__)

OWNER = "owner"
DEFAULT_TIMEOUT = 30.0
SETTLE = 1.0  # seconds between writing the lease and reading it back at start


class CheckpointLease:
    """The lease of one engine instance on its checkpoint (see the module docstring)."""

    def __init__(self, location: str, timeout: float = DEFAULT_TIMEOUT):
        self.location, self.timeout = location, timeout
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lost = threading.Event()
        self._path: HadoopPath | None = None
        self._reason = ""
        self._beat = 0
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._io = threading.Lock()  # a read never meets this instance's own renewal half-renamed
        self._ours_at = float("-inf")  # monotonic time of the last read that found the lease ours
        self._claimed_at = float("-inf")  # monotonic time ``claim`` wrote the lease
        self._stamped_at = float("-inf")  # monotonic time taken just before the last renewal's stamp
        self._watchers: list[tuple[Callable[[], None], Callable[[str], None]]] = []  # ``watch``

    def watch(self, ours: Callable[[], None], lost: Callable[[str], None]) -> None:
        """Tell ``ours()`` each time the lease is found this instance's, ``lost(reason)`` once it is
        lost, until ``release``: what a check made outside Python (the JVM sink's) confirms by."""
        self._watchers.append((ours, lost))
        if self._ours_at > float("-inf"):
            ours()

    def _found_ours(self, read_at: float) -> None:
        self._ours_at = read_at
        for ours, _ in list(self._watchers):
            _tell(ours)

    @property
    def interval(self) -> float:
        return self.timeout / 5

    def take(self, spark) -> None:
        """Hold the lease, or raise ``CheckpointInUse`` while another live instance holds it."""
        self.claim(spark)
        self.hold()

    def claim(self, spark) -> None:
        """The first half of ``take``: once the lease is free (or stale), write it as this
        instance's and start renewing it; raises ``CheckpointInUse`` while another live instance
        holds it. Work that only reads the checkpoint may run before ``hold``, which confirms the
        claim once the settling moment has passed; nothing may be written to the checkpoint before."""
        self.lost.clear()
        self._stopped.clear()
        self._path = Checkpoint.at(self.location, spark).ours / OWNER
        try:
            self._wait_until_free()
            self._renew()
        except BaseException:
            self._path = None
            raise
        self._claimed_at = time.monotonic()
        # the heartbeat reads before it renews, and reads again when its renewal is overdue: an
        # instance that stalled past ``timeout`` finds a takeover made meanwhile (the module docstring)
        self._thread = threading.Thread(target=self._heartbeat, name=f"lease {self.location}", daemon=True)
        self._thread.start()

    def hold(self) -> None:
        """The second half of ``take``: once ``SETTLE`` has passed since ``claim`` (waiting only for
        what is left of it), read the lease back; of two instances that claimed it at the same time
        the one written last keeps it and the other is refused (``CheckpointInUse``)."""
        time.sleep(max(0.0, self._claimed_at + min(SETTLE, self.interval) - time.monotonic()))
        read_at = time.monotonic()
        try:
            holder = self._read()
            if not _ours(holder, self.owner):
                raise CheckpointInUse(self._refusal(holder))
        except BaseException:
            self._stopped.set()
            if self._thread is not None:
                self._thread.join()
            self._path = None
            raise
        self._found_ours(read_at)
        if self.lost.is_set():  # the heartbeat found it another's meanwhile
            raise self.error()

    def confirm(self) -> None:
        """Raise ``CheckpointInUse`` unless this instance still holds the lease (before writing output)."""
        if self._path is None:
            return
        if not self.lost.is_set() and time.monotonic() - self._ours_at >= self.timeout / 2:
            read_at = time.monotonic()
            holder = self._read()
            if not _ours(holder, self.owner):
                self._lose(self._taken_by(holder))
            else:
                self._found_ours(read_at)
        if self.lost.is_set():
            raise self.error()

    def release(self) -> None:
        """Stop renewing and give the lease up; raises ``CheckpointInUse`` if it was lost while held."""
        path = self._path
        if path is None:
            return
        self._stopped.set()  # the heartbeat stops before the path goes: a last beat still finds it
        if self._thread is not None:
            self._thread.join()
        self._path = None
        self._watchers.clear()
        if self.lost.is_set():
            raise self.error()
        try:
            with self._io:
                holder = _read(path)
            if _ours(holder, self.owner):
                path.unlink(missing_ok=True)
        except DedupError as exc:
            log.warning(
                "could not give up the lease of checkpoint %s (%s); it expires %gs after its last renewal",
                self.location,
                exc,
                self.timeout,
            )

    def or_lost(self, stop: threading.Event) -> _Either:
        """``stop``, or the loss of the lease: what ends the engine's wait for its query."""
        return _Either(stop, self.lost)

    def error(self) -> CheckpointInUse:
        return CheckpointInUse(
            f"checkpoint {self.location} was lost to another instance: {self._reason}; this "
            "instance stops writing and exits (run one instance per spark.checkpoint)"
        )

    def _wait_until_free(self) -> None:
        """Return once the lease is free, ours or stale; raise once it proves alive."""
        seen = self._read()
        if seen is not None and seen["owner"] != self.owner and _age(seen) < self.timeout:
            log.warning(
                "checkpoint %s is leased by %s (renewed %.1fs ago): waiting up to %.0fs for it to expire",
                self.location,
                seen["owner"],
                _age(seen),
                self.timeout - _age(seen),
            )
        while seen is not None and seen["owner"] != self.owner and _age(seen) < self.timeout:
            time.sleep(min(self.interval, self.timeout - _age(seen)))
            now = self._read()
            if now is not None and now != seen:
                raise CheckpointInUse(self._refusal(now))
            seen = now
        if seen is not None and seen["owner"] != self.owner:
            log.warning(
                "taking over checkpoint %s from %s: its lease was last renewed %.0fs ago",
                self.location,
                seen["owner"],
                _age(seen),
            )

    def _heartbeat(self) -> None:
        while not self._stopped.wait(self.interval):
            try:
                read_at = time.monotonic()
                holder = self._read()
                if _ours(holder, self.owner) and self._overdue():
                    # this process stalled (e.g. stopped) since its last renewal, before the read or
                    # after it: another instance may have taken the stale lease over meanwhile, so look
                    # again just before writing
                    read_at = time.monotonic()
                    holder = self._read()
                if not _ours(holder, self.owner):
                    return self._lose(self._taken_by(holder))
                self._renew()
                self._found_ours(read_at)
            except DedupError as exc:  # the file system did not answer: retried at the next beat
                log.warning("could not renew the lease of checkpoint %s: %s", self.location, exc)
                if time.monotonic() - self._stamped_at >= self.timeout:
                    return self._lose(f"its lease could not be renewed for {self.timeout:g}s ({exc})")

    def _overdue(self) -> bool:
        """Whether the last renewal is ``timeout / 2`` old: a beat is due every ``timeout / 5``, so
        only a stall gets there, and another instance may take the lease over once its stamp is
        ``timeout`` old. Measured from before the stamp was taken (``_stamped_at``): the write that
        follows it can be slow, and the age others see runs from the stamp, not from the write's end."""
        return time.monotonic() - self._stamped_at >= self.timeout / 2

    def _lose(self, reason: str) -> None:
        if not self.lost.is_set():
            self._reason = reason
            log.error("checkpoint %s lost: %s", self.location, reason)
            self.lost.set()
            for _, lost in list(self._watchers):
                _tell(lost, reason)

    def _renew(self) -> None:
        with self._io:
            if self._path is None:  # released meanwhile (the heartbeat raced the query's end)
                return
            self._beat += 1
            stamped_at = time.monotonic()  # no later than the stamp others age the lease from
            self._path.write_text(
                json.dumps(
                    {
                        "owner": self.owner,
                        "host": socket.gethostname(),
                        "pid": os.getpid(),
                        "heartbeat": time.time(),
                        "beat": self._beat,
                        "timeout": self.timeout,
                    }
                )
            )
            self._stamped_at = stamped_at  # only a renewal written counts: a failed one leaves it overdue

    def _read(self) -> dict | None:
        with self._io:
            if self._path is None:  # released meanwhile (the heartbeat can race ``release``): _read(None) failed too
                raise RuntimeError(f"the lease of checkpoint {self.location} is not held")
            return _read(self._path)

    def _refusal(self, holder: dict | None) -> str:
        who = f"{holder['owner']}, lease renewed {_age(holder):.1f}s ago" if holder else "another instance"
        return (
            f"checkpoint {self.location} is in use by another running instance ({who}); not starting. Run one "
            f"instance per spark.checkpoint; a stopped instance's lease expires {self.timeout:g}s after its "
            "last renewal (spark.lease_timeout)"
        )

    @staticmethod
    def _taken_by(holder: dict | None) -> str:
        return f"its lease was taken over by {holder['owner']}" if holder else "its lease was removed"


class _Either:
    """``is_set()`` of two events: set when either is."""

    def __init__(self, first: threading.Event, second: threading.Event):
        self.first, self.second = first, second

    def is_set(self) -> bool:
        return self.first.is_set() or self.second.is_set()


def _read(path: HadoopPath, looks: int = 8) -> dict | None:
    """The lease, or None when there is none. Replacing a file is delete-then-rename on some file
    systems (Hadoop's local one among them: the data file, then its checksum file), so a lease
    being renewed can be missing, or fail its checksum, for an instant: it is believed gone or
    unreadable only after a few looks spread over about a second. A lease missing with no
    renewal under way (no partial file of it beside it: ``HadoopPath.write_text`` writes one
    before it replaces the lease, and it is there until the lease is back) is believed gone
    after one more look, with no wait: the start of every new or released checkpoint."""
    corrupt = False
    for look in range(looks):
        try:
            return json.loads(path.read_text())
        except CorruptFile:
            corrupt = True
        except FileNotFoundError:
            corrupt = False
            if look == 0 and not _being_replaced(path):
                try:
                    return json.loads(path.read_text())  # renewed between the two looks
                except FileNotFoundError:
                    return None
                except (CorruptFile, ValueError):
                    pass
        except ValueError:
            corrupt = False
        if look + 1 < looks:
            time.sleep(0.05 * (look + 1) / 2)
    if corrupt:  # a holder killed while renewing it: unreadable for good, so it ages from its last write
        return {"owner": "an unreadable lease (its holder died writing it)", "heartbeat": path.modified()}
    return None


def _being_replaced(path: HadoopPath) -> bool:
    """Whether a partial file of ``path`` (``HadoopPath.write_text``) is beside it: a write under way."""
    try:
        names = [p.name for p in path.parent.iterdir()]
    except FileNotFoundError:  # no directory: nothing was ever written there
        return False
    return any(name.startswith(f".{path.name}.") and ".partial" in name for name in names)


def _ours(holder: dict | None, owner: str) -> bool:
    return holder is not None and holder["owner"] == owner


def _tell(watcher: Callable[..., None], *args) -> None:
    """A watcher told (``CheckpointLease.watch``); one that fails (the JVM it calls is gone) is logged."""
    try:
        watcher(*args)
    except Exception as exc:
        log.warning("a watcher of the checkpoint lease failed: %s: %s", type(exc).__name__, exc)


def _age(holder: dict) -> float:
    return max(0.0, time.time() - float(holder["heartbeat"]))
