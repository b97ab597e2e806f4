"""The batch pipeline (poll → judge → deliver → commit) over inspectable fakes."""

import json
import threading

import pytest

from adapters import InMemoryMetrics
from adapters.memory import InMemoryStateStore
from adapters.testing import (
    FakeClock,
    FlakyStateStore,
    ListDeadLetterSink,
    ListNotificationSource,
    ListSink,
    ListSource,
    RecordingCommitter,
)
from domain import (
    BatchAborted,
    BatchCommitter,
    BatchPipeline,
    Deduplicator,
    Delivery,
    Event,
    Notification,
    Policies,
    PolicyExhausted,
    RawRecord,
    RuleSet,
    SourceCommitter,
    SourcePosition,
    SourceUnavailable,
    StateUnavailable,
)

T = 1_700_000_000


def event(unique_value: str, t: int = T) -> bytes:
    return json.dumps(
        {"id": f"id-{unique_value}-{t}", "uniqueValue": unique_value, "type": "APP", "timestamp": t}
    ).encode()


def records(*values: bytes, first: int = 0) -> list[RawRecord]:
    return [RawRecord(v, SourcePosition("in", 0, first + i)) for i, v in enumerate(values)]


def pipeline(
    source,
    journal=None,
    state=None,
    committer=None,
    notifications=None,
    policies=None,
    *,
    max_batch_delay=0.0,
    batch_size=1000,
    poll_timeout=0.5,
):
    core = Deduplicator(
        RuleSet(), InMemoryStateStore() if state is None else state, FakeClock(), policies or Policies()
    )
    delivery = Delivery(core, ListSink(journal=journal), ListDeadLetterSink())
    return BatchPipeline(
        core,
        source,
        delivery,
        InMemoryMetrics(),
        committer,
        notifications=notifications,
        batch_size=batch_size,
        poll_timeout=poll_timeout,
        max_batch_delay=max_batch_delay,
    )


def test_each_batch_is_acknowledged_only_after_its_outcomes_were_flushed():
    journal = []
    source = ListSource([records(event("a"), event("a", T + 1)), [], [], records(event("b"), first=2)], journal)
    seen = []

    totals = pipeline(source, journal).run(on_batch=lambda t: seen.append(t.as_dict()["in"]))

    assert journal == ["flush", ("ack", [0, 1]), "flush", ("ack", [2])]
    assert (totals.records_in, totals.out, totals.duplicates) == (3, 2, 1) and totals.balanced
    assert seen == [2, 2, 3]  # the running totals after every loop: committed batches and the idle wait
    assert source.polls == 5  # an idle wait is not the end; the empty poll after the last batch is


def test_an_idle_input_is_waited_on_for_one_record_which_ends_the_wait():
    source = ListSource([[], records(event("a")), [], []])
    line = pipeline(source, batch_size=100, poll_timeout=30.0, max_batch_delay=0.05)

    totals = line.run()

    assert totals.out == 1
    # what is buffered (0 s), then the wait for a first record (up to poll_timeout, for one record)…
    assert source.waits[:2] == [0, 30.0]
    # …then the batch waits for more only while its oldest record is younger than max_batch_delay
    assert source.waits[2:-1] and all(0 < wait <= 0.05 for wait in source.waits[2:-1])


def test_a_batch_closes_when_full_without_waiting():
    source = ListSource([records(*(event(f"k{i}") for i in range(5)))])
    line = pipeline(source, batch_size=2, max_batch_delay=60.0)
    journal_sizes = []
    line.run(on_batch=lambda t: journal_sizes.append(t.records_in))
    assert journal_sizes == [2, 4, 5] and max(source.waits) < 60.0


@pytest.mark.guard  # reaches into the pipeline's poll clock: waiting a minute is no test
def test_records_buffered_while_a_batch_ran_close_the_next_batch_at_once():
    source = ListSource([records(event("a")), records(event("b"), first=1)])
    line = pipeline(source, max_batch_delay=60.0)
    line._polled_at -= 60.0  # the previous batch ended a minute ago: what waits in the buffer is due
    line.run()
    assert source.waits[0] == 0 and line.totals.out == 2 and max(source.waits) < 60.0


def test_the_latency_of_each_unique_event_is_observed_from_its_arrival_by_rule():
    import time

    arrived = time.time() - 2.0
    batch = [
        RawRecord(event("a"), SourcePosition("in", 0, 0), arrived=arrived),
        RawRecord(event("a", T + 1), SourcePosition("in", 0, 1), arrived=arrived),
        RawRecord(b"not json", SourcePosition("in", 0, 2), arrived=arrived),
    ]
    line = pipeline(ListSource([batch]))
    line.run()
    latencies = line.metrics.observations["end_to_end_latency_seconds"]
    assert len(latencies) == 1 and 2.0 <= latencies[0] < 60.0  # one unique event; not the duplicate or dead letter


def test_the_default_committer_acknowledges_the_source():
    line = pipeline(ListSource([]))
    assert isinstance(line.committer, SourceCommitter) and isinstance(line.committer, BatchCommitter)


def test_a_given_committer_frames_every_batch():
    journal = []
    source = ListSource([records(event("a")), records(event("b"), first=1)], journal)
    pipeline(source, journal, committer=RecordingCommitter(journal)).run()
    assert journal == ["begin", "flush", ("commit", [0]), "begin", "flush", ("commit", [1])]


def test_the_metrics_count_what_the_totals_count():
    line = pipeline(ListSource([records(event("a"), event("a", T + 1), b"not json")]))
    totals = line.run()
    counters = dict(line.metrics.counters)
    assert counters == {"in": 3, "out": 1, "duplicates": 1, "dead_lettered": 1, "invalid": 1}
    assert (totals.out, totals.duplicates, totals.dead_lettered, totals.invalid) == (1, 1, 1, 1)


def test_notifications_are_applied_before_each_batch_is_judged():
    forget_a = Notification("INVALIDATE", "downstream lost it", Event("x", "a", "APP", T))
    notes = ListNotificationSource([[], [forget_a]])
    source = ListSource([records(event("a")), records(event("a", T + 1), first=1)])
    line = pipeline(source, notifications=notes)

    totals = line.run()

    # 1. a is emitted; 2. the notification makes the state forget a; 3. a's repeat is emitted again
    assert (totals.out, totals.duplicates, totals.invalidations) == (2, 0, 1)
    assert notes.commits == 1 and line.metrics.counters["invalidations"] == 1


class FlakyInvalidation(InMemoryStateStore):
    def __init__(self, failures):
        super().__init__()
        self.failures = failures

    def invalidate(self, key):
        if self.failures:
            self.failures -= 1
            raise StateUnavailable("state store down")
        return super().invalidate(key)


@pytest.mark.parametrize("transient, applied", [("retry(attempts=3,delay=0)>fail", True), ("fail", False)])
def test_a_state_away_while_a_notification_is_applied_is_retried_under_the_transient_policy(transient, applied):
    forget_a = Notification("INVALIDATE", "downstream lost it", Event("x", "a", "APP", T))
    notes = ListNotificationSource([[], [forget_a]])
    line = pipeline(
        ListSource([records(event("a")), records(event("a", T + 1), first=1)]),
        notifications=notes,
        state=FlakyInvalidation(failures=2),
        policies=Policies.from_strings({"transient": transient}),
    )
    if applied:
        totals = line.run()
        assert (totals.out, totals.invalidations, notes.commits) == (2, 1, 1)
    else:
        with pytest.raises(PolicyExhausted):
            line.run()
        assert notes.commits == 0 and line.totals.invalidations == 0  # not acknowledged: read again


def test_a_fail_policy_aborts_the_batch_and_nothing_is_acknowledged():
    journal, seen = [], []
    source = ListSource([records(event("a"))], journal)
    line = pipeline(
        source,
        journal,
        state=FlakyStateStore(InMemoryStateStore(), failures=1),
        committer=RecordingCommitter(journal),
        policies=Policies.from_strings({"transient": "fail"}),
    )

    with pytest.raises(PolicyExhausted):
        line.run(on_batch=seen.append)

    assert journal == ["begin", "abort"]
    assert line.totals.records_in == 0 and seen == [] and dict(line.metrics.counters) == {}


def test_a_batch_that_cannot_be_committed_is_not_counted():
    journal = []
    failing = RecordingCommitter(journal, fail_commit=SourceUnavailable("the group coordinator went away"))
    line = pipeline(ListSource([records(event("a"))]), journal, committer=failing)

    with pytest.raises(SourceUnavailable):
        line.run()

    assert journal == ["begin", "flush"] and line.totals.records_in == 0


def test_a_set_stop_ends_the_run_before_the_next_poll():
    stop = threading.Event()
    stop.set()
    source = ListSource([records(event("a"))])
    assert pipeline(source).run(stop).records_in == 0 and source.polls == 0


class AbortingCommitter(RecordingCommitter):
    """Aborts the first ``times`` commits as a transactional committer does when the transaction
    cannot commit: the batch is handed to the source again (its rewind) and ``BatchAborted`` raised."""

    def __init__(self, source, times):
        super().__init__()
        self.source, self.times = source, times

    def commit(self, records):
        if self.times:
            self.times -= 1
            self.source.batches.insert(0, list(records))
            raise BatchAborted("the transaction cannot commit")
        super().commit(records)


def test_a_batch_aborted_to_be_judged_again_counts_once_and_keeps_its_verdicts():
    source = ListSource([records(event("a"), event("a", T + 1), event("b"))])
    committer = AbortingCommitter(source, times=3)
    line = pipeline(source, committer=committer)

    totals = line.run()

    assert (totals.records_in, totals.out, totals.duplicates) == (3, 2, 1) and totals.balanced
    assert committer.journal.count("begin") == 4 and committer.journal[-1] == ("commit", [0, 1, 2])
    assert line.core.clock.sleeps == [0.1, 0.2, 0.4]  # a growing pause before each new attempt


def test_a_batch_aborted_again_and_again_stops_the_pipeline_unacknowledged():
    source = ListSource([records(event("a"))])
    line = pipeline(source, committer=AbortingCommitter(source, times=100))

    with pytest.raises(PolicyExhausted, match="cannot commit"):
        line.run()
    assert line.totals.records_in == 0
