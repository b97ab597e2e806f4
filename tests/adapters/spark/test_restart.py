"""Restart strategies (domain._restart) and the supervisor that applies them to a failing job; the
JVM sink's failed writes retried by starting the query again, per the ``transient`` policy."""

from __future__ import annotations

import threading

import pytest

from adapters.spark import query_failure, run_restarting, run_retrying_writes
from adapters.spark.shared import CheckpointInUse
from app import SettingsError, load_settings
from domain import PermanentError, Policies, PolicyExhausted, RestartsExhausted, parse_restart


@pytest.mark.parametrize(
    "text, failure_times, delays",
    [
        # fixed delay: the same wait, at most `attempts` restarts
        ("fixed-delay(attempts=2,delay=10)", [0, 1, 2], [10, 10, None]),
        # exponential: delay * factor**(k-1), capped by max_delay
        ("exponential-delay(attempts=4,delay=1,max_delay=5,factor=3)", [0, 1, 2, 3, 4], [1, 3, 5, 5, None]),
        # failure rate: gives up when more than `failures` fell within the interval
        ("failure-rate(failures=2,interval=60,delay=7)", [0, 10, 100, 110, 115], [7, 7, 7, 7, None]),
        ("none", [0], [None]),
    ],
)
def test_each_strategy_waits_then_gives_up(text, failure_times, delays):
    strategy = parse_restart(text)
    got = [strategy.delay_after(failure_times[: k + 1]) for k in range(len(failure_times))]
    assert got == delays


def test_durations_take_units_and_the_strategy_prints_back():
    strategy = parse_restart("failure-rate(failures=3, interval=5m, delay=2s)")
    assert (strategy.interval, strategy.delay) == (300, 2)
    assert parse_restart(str(strategy)) == strategy


@pytest.mark.parametrize(
    "value, message",
    [
        ("sometimes", "must be one of none(...), fixed-delay(...)"),
        ("fixed-delay(attempts=2,factor=3)", "fixed-delay takes attempts, delay; got 'factor'"),
        ("fixed-delay(attempts=x)", "attempts must be a whole number, got 'x'"),
        ("fixed-delay(attempts=3,delay=-1)", "delay must not be negative, got '-1'"),
        ("failure-rate(interval=inf)", "interval must be a finite duration, got 'inf'"),
        ("exponential-delay(factor=0.5)", "factor must be >= 1, got 0.5"),
    ],
)
def test_a_bad_restart_setting_stops_with_one_line_naming_it(value, message):
    with pytest.raises(SettingsError) as error:
        load_settings(spark={"restart": value})
    text = str(error.value)
    assert text.startswith("invalid setting spark.restart (DEDUP_SPARK__RESTART): ") and message in text
    assert "\n" not in text


class FailingJob:
    """A job that fails its first ``failures`` runs, then returns ``"done"``."""

    def __init__(self, failures: int, error: Exception | None = None):
        self.failures, self.runs = failures, 0
        self.error = error or RuntimeError("Job aborted.\nCaused by: broker gone\n\tat org.apache...")

    def __call__(self):
        self.runs += 1
        if self.runs <= self.failures:
            raise self.error
        return "done"


def test_a_failing_job_is_restarted_with_the_strategys_delays():
    sleeps = []
    job = FailingJob(failures=2)
    stop = threading.Event()
    stop.wait = lambda delay: sleeps.append(delay) or False
    strategy = parse_restart("exponential-delay(attempts=3,delay=1,factor=2)")
    assert run_restarting(job, strategy, stop, clock=iter(range(100)).__next__) == "done"
    assert (job.runs, sleeps) == (3, [1, 2])


def test_when_the_strategy_gives_up_the_job_stops_with_one_line():
    job = FailingJob(failures=5)
    with pytest.raises(RestartsExhausted) as error:
        run_restarting(job, parse_restart("fixed-delay(attempts=2,delay=0)"), threading.Event())
    assert job.runs == 3
    assert str(error.value) == (
        "the streaming query failed 3 time(s) and the restart strategy "
        "fixed-delay(attempts=2,delay=0) gave up; last error: Job aborted."
    )


def test_setup_errors_are_not_restarted():
    class SetupError(PermanentError):
        error_class = "setup"

    job = FailingJob(failures=1, error=SetupError("no javac"))
    with pytest.raises(SetupError):
        run_restarting(job, parse_restart("fixed-delay(attempts=5,delay=0)"), threading.Event())
    assert job.runs == 1


def test_a_failure_that_took_sparks_jvm_down_is_not_restarted_in_the_process():
    job = FailingJob(failures=3, error=ConnectionRefusedError(111, "Connection refused"))
    with pytest.raises(RestartsExhausted) as error:
        run_restarting(job, parse_restart("fixed-delay(attempts=30,delay=0)"), threading.Event(), alive=lambda: False)
    assert job.runs == 1 and "Spark's JVM is gone" in str(error.value) and "\n" not in str(error.value)


def test_a_stop_while_waiting_for_a_restart_ends_the_job_without_restarting_it():
    job, stop = FailingJob(failures=1), threading.Event()
    stop.wait = lambda delay: True  # SIGTERM arrived during the wait
    assert run_restarting(job, parse_restart("fixed-delay(attempts=5,delay=30)"), stop) is None
    assert job.runs == 1


@pytest.mark.parametrize(
    "spark_says",
    [
        "[CONCURRENT_STREAM_LOG_UPDATE] Concurrent update to the log. Multiple streaming jobs detected for 7.",
        "java.util.ConcurrentModificationException: Multiple streaming queries are concurrently using file:/c/offsets",
    ],
)
def test_losing_the_checkpoint_to_another_query_is_never_restarted(spark_says):
    runs = []

    def run():
        runs.append(1)
        raise query_failure(RuntimeError(spark_says))

    with pytest.raises(CheckpointInUse) as stopped:
        run_restarting(run, parse_restart("fixed-delay(attempts=5,delay=0)"), threading.Event())
    assert runs == [1] and "\n" not in str(stopped.value)


def test_any_other_query_failure_is_a_bug_the_strategy_restarts():
    assert type(query_failure(RuntimeError("[STREAM_FAILED] boom\nat ..."))).__name__ == "ProcessingBug"


class AbortingStarts:
    """Query starts that fail with Spark's abort of the batches named in turn (None: a start that
    fails otherwise), then return ``"done"``; ``aborted()`` as the JVM sink's hooks answer it."""

    def __init__(self, *batches: int | None):
        self.batches, self.runs, self.aborted = list(batches), 0, None

    def __call__(self):
        self.runs += 1
        self.aborted = None
        if self.batches:
            self.aborted = self.batches.pop(0)
            raise RuntimeError("Job aborted due to stage failure: KafkaWriteFailed: broker gone")
        return "done"


def waits_recorded() -> tuple[threading.Event, list[float]]:
    stop, waits = threading.Event(), []
    stop.wait = lambda delay: waits.append(delay) or False
    return stop, waits


def test_a_sinks_aborted_write_is_retried_per_the_transient_policy_counting_each_batch_anew():
    policies = Policies.from_strings({"transient": "retry(attempts=3,backoff=exponential,delay=1,factor=2)>fail"})
    starts, (stop, waits) = AbortingStarts(4, 4, 9, 9), waits_recorded()
    assert run_retrying_writes(starts, lambda: starts.aborted, policies, stop) == "done"
    # batch 4 failed twice (waits 1, 2), then batch 9 twice: its count starts again
    assert (starts.runs, waits) == (5, [1, 2, 1, 2])


def test_when_the_transient_policy_gives_up_on_a_write_the_restart_strategy_decides():
    policies = Policies.from_strings({"transient": "retry(attempts=2,backoff=fixed,delay=0)>fail"})
    starts, (stop, waits) = AbortingStarts(4, 4, 4), waits_recorded()
    with pytest.raises(PolicyExhausted) as error:
        run_retrying_writes(starts, lambda: starts.aborted, policies, stop)
    assert starts.runs == 3 and waits == [0, 0]
    assert str(error.value) == (
        "batch 4 write failed: Job aborted due to stage failure: KafkaWriteFailed: broker gone (after 3 attempts)"
    )
    # and the supervisor restarts the query per its strategy (the policy's error is not a setup error)
    again = AbortingStarts(4, 4, 4)
    assert (
        run_restarting(
            lambda: run_retrying_writes(again, lambda: again.aborted, policies, stop),
            parse_restart("fixed-delay(attempts=1,delay=0)"),
            threading.Event(),
        )
        == "done"
    )


def test_a_start_that_failed_without_an_aborted_write_or_lost_its_checkpoint_is_not_retried_here():
    policies = Policies.from_strings({"transient": "retry(attempts=5,backoff=fixed,delay=0)>fail"})
    starts, (stop, waits) = AbortingStarts(None), waits_recorded()
    with pytest.raises(RuntimeError):
        run_retrying_writes(starts, lambda: starts.aborted, policies, stop)
    assert starts.runs == 1 and waits == []

    def lost_after_an_abort():  # the lease's release found the checkpoint taken over
        raise CheckpointInUse("checkpoint /c is in use by another running instance")

    with pytest.raises(CheckpointInUse):
        run_retrying_writes(lost_after_an_abort, lambda: 4, policies, stop)
    assert waits == []


def test_a_stop_while_waiting_to_retry_a_write_ends_the_job():
    starts, stop = AbortingStarts(4), threading.Event()
    stop.wait = lambda delay: True
    assert run_retrying_writes(starts, lambda: starts.aborted, Policies(), stop) is None
    assert starts.runs == 1
