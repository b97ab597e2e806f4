"""One running instance per Spark checkpoint (``adapters.spark.checkpoint._lease``).

Two ``dedup run --engine spark`` processes on one checkpoint both used to run, each writing
every new event. Now the second is refused at start with one line; an instance whose
checkpoint is taken over (its lease went stale while it was stalled) stops with one line
instead of writing on; and Spark's own concurrent-update error is never restarted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
import threading
import time
from collections import Counter

import pytest

from adapters.spark.shared import CheckpointInUse
from app import StreamSpec, generate_parts
from tests.adapters.spark.processes import DedupProcess, FileFeed
from tests.support.streams import reference

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1200)]


def dedup_lines(process: DedupProcess) -> list[str]:
    return [line for line in process.output().splitlines() if line.startswith("dedup:")]


def lease_holder(root) -> int | None:
    try:
        return json.loads((root / "checkpoint" / "streamdedup" / "owner").read_text())["pid"]
    except (OSError, ValueError):
        return None


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout:g}s"
        time.sleep(0.5)


def test_a_second_instance_is_refused_and_one_whose_checkpoint_is_taken_over_stops(tmp_path):
    parts, _ = generate_parts(StreamSpec(uniques=600, seed=31), 4)
    feed, first = FileFeed(tmp_path / "in", parts), DedupProcess(tmp_path, name="first")
    feed.add(1)
    first.start(bounded=False)
    first.wait_for_counter("records_in", feed.records_written())

    # 1. a second instance on the same checkpoint (its own metrics port) is refused at start, one line
    second = DedupProcess(tmp_path, name="second").start(bounded=False)
    assert second.wait(timeout=300) == 2, second.output()[-3000:]  # a setup error: the same start fails the same way
    refusal = dedup_lines(second)
    assert len(refusal) == 1 and "is in use by another running instance" in refusal[0], second.output()[-3000:]
    assert first.process.poll() is None
    feed.add(1)
    first.wait_for_counter("records_in", feed.records_written())

    # 2. the first stalls (SIGSTOP) past its lease's timeout; a third instance takes the stale lease over
    os.killpg(first.process.pid, signal.SIGSTOP)
    third = DedupProcess(tmp_path, name="third").start(bounded=False)
    wait_until(lambda: lease_holder(tmp_path) == third.process.pid, 300, "the takeover")
    os.killpg(first.process.pid, signal.SIGCONT)
    # 3. the first wakes up, finds its checkpoint taken and stops: non-zero exit, one line, no restart.
    # Files have no compare-and-set: a stop landing inside the first's last renewal write lets it
    # overwrite the takeover on waking; then the third finds the lease another's and stops instead.
    # Either way exactly one instance goes on, and the output stays exact.
    wait_until(lambda: first.process.poll() is not None or third.process.poll() is not None, 120, "a stop")
    loser, survivor = (first, third) if first.process.poll() is not None else (third, first)
    assert loser.wait(timeout=60) == 2, loser.output()[-3000:]
    lost = dedup_lines(loser)
    said = "was lost to another instance" if loser is first else "another running instance|was lost to another"
    assert len(lost) == 1 and re.search(said, lost[0]), loser.output()[-3000:]
    assert "restart 1" not in loser.output()
    time.sleep(3)  # a lease's heartbeat beats every 2 s: a second loser would have stopped by now
    assert survivor.process.poll() is None, survivor.output()[-3000:]

    # 4. the survivor goes on; every unique event of every part is in the output once
    feed.rest()
    survivor.wait_for_counter("records_in", sum(len(p) for p in (parts if survivor is first else parts[2:])))
    survivor.signal(signal.SIGTERM)
    assert survivor.wait() == 0, survivor.output()[-3000:]
    want = reference([r for part in parts for r in part])
    assert Counter(survivor.committed("out")) == Counter(want.emitted)


def test_sparks_concurrent_update_error_stops_the_engine_without_a_restart(files, caplog):
    files.add({"id": "a1", "uniqueValue": "a", "type": "APP", "timestamp": 1_700_000_000})
    engine = files.engine(available_now=False, trigger="0.5 seconds")
    checkpoint, outcome, write = files.dir / "checkpoint", {}, engine.writer.write

    def write_then_lose_the_race(batch, batch_id):
        write(batch, batch_id)
        if batch_id == 1:  # another job on this checkpoint commits batch 1 first
            shutil.copy(checkpoint / "commits" / "0", checkpoint / "commits" / "1")

    def run():
        try:
            engine.run(threading.Event())
        except Exception as exc:
            outcome["error"] = exc

    engine.writer.write = write_then_lose_the_race
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    wait_until((checkpoint / "commits" / "0").exists, 120, "the first micro-batch")
    files.add({"id": "b1", "uniqueValue": "b", "type": "APP", "timestamp": 1_700_000_001})
    thread.join(180)
    # Spark's CONCURRENT_STREAM_LOG_UPDATE: the engine stops at once, with one line, and is not restarted
    assert not thread.is_alive()
    error = outcome.get("error")
    assert isinstance(error, CheckpointInUse) and "CONCURRENT_STREAM_LOG_UPDATE" in str(error), error
    assert "\n" not in str(error) and "this instance stops and is not restarted" in str(error)
    assert not [r for r in caplog.records if "restart" in r.getMessage()]


def test_a_lease_renewed_while_it_is_confirmed_is_never_taken_for_lost(spark, tmp_path):
    """Hadoop's local file system replaces a file in two renames (data, then checksum): a confirm
    reading between them once took the half-renamed lease for another owner's and stopped the job."""
    from adapters.spark.checkpoint import CheckpointLease

    lease = CheckpointLease(str(tmp_path / "checkpoint"), timeout=0.025)  # its heartbeat renews every 5 ms
    lease.take(spark)
    lease_file = tmp_path / "checkpoint" / "streamdedup" / "owner"
    first_beat = lease_beat(lease_file)
    confirms, deadline = 0, time.monotonic() + 4
    try:
        while time.monotonic() < deadline or confirms < 30:
            lease.confirm()  # raises CheckpointInUse if it read the lease half-renamed
            confirms += 1
            time.sleep(0.005)
        renewals = lease_beat(lease_file) - first_beat
    finally:
        lease.release()
    assert renewals > 30 and not lease.lost.is_set(), (renewals, confirms, lease.lost.is_set() and str(lease.error()))


def test_a_lease_missing_while_its_owner_renews_it_is_not_taken_for_free(spark, tmp_path):
    """A renewal replaces the lease through a partial file beside it (delete, then rename on Hadoop's
    local file system). A start that finds no lease but that partial file waits for the renewal
    instead of writing its own lease over the live owner's."""
    from adapters.spark.checkpoint import CheckpointLease

    ours = tmp_path / "checkpoint" / "streamdedup"
    ours.mkdir(parents=True)
    live = {"owner": "elsewhere:1:live", "host": "elsewhere", "pid": 1, "beat": 7, "timeout": 5.0}
    partial = ours / ".owner.0123abcd.partial"
    partial.write_text(json.dumps({**live, "heartbeat": time.time()}))  # the renewal, mid-way: no lease
    seen, done = set(), threading.Event()

    def watch() -> None:
        while not done.is_set():
            holder = lease_holder_name(ours / "owner")
            if holder:
                seen.add(holder)
            time.sleep(0.002)

    def renew() -> None:
        time.sleep(0.3)
        partial.rename(ours / "owner")  # the renewal lands
        time.sleep(0.9)
        (ours / "owner").write_text(json.dumps({**live, "beat": 8, "heartbeat": time.time()}))  # and goes on

    threads = [threading.Thread(target=watch, daemon=True), threading.Thread(target=renew, daemon=True)]
    for thread in threads:
        thread.start()
    lease = CheckpointLease(str(tmp_path / "checkpoint"), timeout=5.0)
    try:
        with pytest.raises(CheckpointInUse, match="is in use by another running instance"):
            lease.take(spark)
    finally:
        done.set()
        for thread in threads:
            thread.join(5)
    assert seen == {"elsewhere:1:live"}, seen  # the starting instance never wrote over the live lease


def lease_beat(path) -> int:
    """The lease's renewal counter, read beside its heartbeat: a renewal replaces the file (delete,
    then rename), so a plain read can find it missing or half-written for an instant."""
    for _ in range(100):
        try:
            return json.loads(path.read_text())["beat"]
        except (OSError, ValueError):
            time.sleep(0.01)
    raise AssertionError(f"no readable lease at {path} for 1s")


def lease_holder_name(path) -> str | None:
    try:
        return json.loads(path.read_text())["owner"]
    except (OSError, ValueError):
        return None


@pytest.mark.parametrize("owner_write_lag", [0.0, 0.2], ids=["writes at full speed", "the owner's writes slow"])
def test_an_owner_stalled_between_reading_and_renewing_its_lease_finds_the_takeover(
    spark, tmp_path, monkeypatch, owner_write_lag
):
    """An owner stopped (SIGSTOP, a long pause) after its heartbeat read the lease and before it
    renewed it wakes past its timeout: another instance took the stale lease over meanwhile. The
    renewal, now overdue, looks again first: the owner finds the takeover and gives up, and the
    taker keeps the lease (it once renewed over the takeover, and the taker was refused).

    Others age a lease from its stamp, taken before the write: with the owner's writes slow (a
    busy file system; CI once met it by chance), a stall counted from the end of the owner's
    write looked shorter than the age the taker saw, and the owner renewed over the takeover."""
    from adapters.spark.checkpoint import CheckpointLease

    lease_module = sys.modules[CheckpointLease.__module__]  # the fault is placed inside it: after its read
    checkpoint = str(tmp_path / "checkpoint")
    owner, taker = CheckpointLease(checkpoint, timeout=0.5), CheckpointLease(checkpoint, timeout=0.5)
    armed, stalled, taken = threading.Event(), threading.Event(), threading.Event()
    read, write = lease_module._read, lease_module.HadoopPath.write_text

    def slow_when_the_owners(path, text):
        if owner.owner in text:
            time.sleep(owner_write_lag)
        write(path, text)

    monkeypatch.setattr(lease_module.HadoopPath, "write_text", slow_when_the_owners)

    def read_then_stall(path, *args):
        holder = read(path, *args)
        on_heartbeat = threading.current_thread() is not threading.main_thread()
        if armed.is_set() and on_heartbeat and holder and holder["owner"] == owner.owner and not stalled.is_set():
            stalled.set()  # the owner's heartbeat has read its own lease: it stops here
            assert taken.wait(10), "no takeover"
        return holder

    monkeypatch.setattr(lease_module, "_read", read_then_stall)
    owner.take(spark)
    # armed once ``take`` returned: a heartbeat stalled inside its read holds the lease's lock, and
    # ``hold`` reading the lease on a busy machine waited for it (a SIGSTOP stalls both alike)
    armed.set()
    try:
        assert stalled.wait(10), "the owner's heartbeat never read its lease"
        taker.claim(spark)  # waits until the stalled owner's lease is stale, then writes its own
        taken.set()  # the owner wakes up
        taker.hold()  # read back a moment later: still the taker's
        assert owner.lost.wait(5) and "taken over by " + taker.owner in str(owner.error())
        assert lease_holder_name(tmp_path / "checkpoint" / "streamdedup" / "owner") == taker.owner
        with pytest.raises(CheckpointInUse, match="was lost to another instance"):
            owner.confirm()
    finally:
        taken.set()
        with pytest.raises(CheckpointInUse):
            owner.release()
        taker.release()


def test_an_owner_whose_renewals_keep_failing_loses_the_checkpoint_after_its_timeout(spark, tmp_path, monkeypatch):
    """The file system stops taking the owner's writes (reads still answer): each failed renewal
    is retried at the next beat, and once ``timeout`` has passed since the last renewal written
    the checkpoint is lost (another instance may take it over from then). A failed attempt is not
    a renewal: counting it as one kept the owner going on a lease nobody renewed."""
    from adapters.spark.checkpoint import CheckpointLease
    from domain import StateUnavailable

    lease_module = sys.modules[CheckpointLease.__module__]
    owner = CheckpointLease(str(tmp_path / "checkpoint"), timeout=0.5)
    write, failing = lease_module.HadoopPath.write_text, threading.Event()

    def refused_once_failing(path, text):
        if failing.is_set():
            raise StateUnavailable(f"checkpoint file system: {path}: no space left on device")
        write(path, text)

    monkeypatch.setattr(lease_module.HadoopPath, "write_text", refused_once_failing)
    owner.take(spark)
    failing.set()
    try:
        assert owner.lost.wait(3), "renewals failed for 3 s, six times the timeout, and the lease was kept"
        assert "could not be renewed for 0.5s" in str(owner.error())
        with pytest.raises(CheckpointInUse, match="was lost to another instance"):
            owner.confirm()
    finally:
        with pytest.raises(CheckpointInUse):
            owner.release()
