"""Error policies: parsing, retries with backoff, and each terminal action in the engine."""

import pytest

from adapters.memory import InMemoryStateStore
from adapters.testing import FakeClock, FlakyStateStore, ListDeadLetterSink, ListNotificationSink, ListSink
from app import load_settings
from domain import (
    DEFAULT_POLICIES,
    Accounting,
    Deduplicator,
    Delivery,
    InvalidEvent,
    Policies,
    PolicyExhausted,
    ProcessingBug,
    RawRecord,
    Retry,
    RuleSet,
    SourcePosition,
    StateUnavailable,
    Terminal,
    Verdict,
    parse_chain,
    run_with_policy,
)

EVENT = b'{"id": "1", "uniqueValue": "u", "type": "APP", "timestamp": 1700000000}'


def record(value=EVENT, offset=0):
    return RawRecord(value, SourcePosition("in", 0, offset))


def test_chain_parses_retries_then_terminal():
    chain = parse_chain("retry(attempts=2,backoff=fixed,delay=0.5)>retry(attempts=3,delay=1,max_delay=3)>dead-letter")
    assert chain.retries == (Retry(2, "fixed", 0.5), Retry(3, "exponential", 1.0, 3.0))
    assert chain.terminal is Terminal.DEAD_LETTER
    assert [chain.delay_before(n) for n in range(1, 7)] == [0.5, 0.5, 1.0, 2.0, 3.0, None]
    assert chain.max_attempts == 6


@pytest.mark.parametrize(
    "text, message",
    [
        ("retry(attempts=2)", "must end in one of"),
        ("skip>dead-letter", r"a step before the last must be one of retry\(\.\.\.\); got 'skip'"),
        ("retry(tries=2)>skip", "retry takes attempts, backoff, delay, max_delay, factor; got 'tries'"),
        ("retry(delay=1)>skip", "retry needs attempts=N"),
        ("retry(attempts=2,delay=nan)>skip", "delay must be a finite duration, got 'nan'"),
        ("retry(attempts=2,max_delay=-1)>skip", "max_delay must not be negative, got '-1'"),
        ("retry(attempts=2,backoff=linear)>skip", "fixed or exponential"),
        ("", "empty policy"),
    ],
)
def test_bad_chains_are_refused(text, message):
    with pytest.raises(ValueError, match=message):
        parse_chain(text)


def test_transient_error_is_retried_with_exponential_backoff_then_succeeds():
    clock, failures = FakeClock(), iter([StateUnavailable("down"), StateUnavailable("down")])

    def flaky():
        error = next(failures, None)
        if error:
            raise error
        return "ok"

    policies = Policies.from_strings({"transient": "retry(attempts=3,delay=0.1)>fail"})
    result = run_with_policy(flaky, policies, clock.sleep)
    assert (result.value, result.attempts, clock.sleeps) == ("ok", 3, [0.1, 0.2])


def test_unexpected_exception_is_classified_as_a_bug():
    policies = Policies.from_strings({"bug": "skip"})
    result = run_with_policy(lambda: 1 / 0, policies, FakeClock().sleep)
    assert result.action is Terminal.SKIP and isinstance(result.error, ProcessingBug)
    assert "ZeroDivisionError" in str(result.error)


def test_state_outage_beyond_retries_fails_the_batch_by_default():
    clock = FakeClock()
    core = Deduplicator(RuleSet(), FlakyStateStore(InMemoryStateStore(), failures=100), clock)
    with pytest.raises(PolicyExhausted, match="after 6 attempts"):
        core.process([record()])
    assert len(clock.sleeps) == 5


def test_state_outage_shorter_than_retries_loses_nothing():
    store = FlakyStateStore(InMemoryStateStore(), failures=2)
    core = Deduplicator(RuleSet(), store, FakeClock())
    outcomes, counts = core.process([record(), record(offset=1)])
    assert [o.verdict for o in outcomes] == [Verdict.EMIT, Verdict.DUPLICATE]
    assert store.calls == 3 and counts.balanced


def test_state_outage_can_be_dead_lettered_instead():
    policies = Policies.from_strings({"transient": "retry(attempts=1,delay=0)>dead-letter"})
    core = Deduplicator(RuleSet(), FlakyStateStore(InMemoryStateStore(), failures=5), FakeClock(), policies)
    [outcome], counts = core.process([record()])
    assert outcome.verdict is Verdict.DEAD_LETTER
    assert (outcome.dead_letter.reason, outcome.dead_letter.attempts) == ("transient", 2)
    assert counts.balanced and counts.dead_lettered == 1


def test_invalid_records_can_be_skipped_and_are_counted():
    policies = Policies.from_strings({"invalid": "skip"})
    core = Deduplicator(RuleSet(), InMemoryStateStore(), FakeClock(), policies)
    outcomes, counts = core.process([record(b"junk"), record()])
    assert [o.verdict for o in outcomes] == [Verdict.SKIP, Verdict.EMIT]
    assert (counts.skipped, counts.invalid, counts.out, counts.balanced) == (1, 1, 1, True)


def deliver(policies, sink, records):
    core = Deduplicator(RuleSet(), InMemoryStateStore(), FakeClock(), Policies.from_strings(policies))
    dead, notes = ListDeadLetterSink(), ListNotificationSink()
    outcomes, counts = core.process(records)
    Delivery(core, sink, dead, notes).deliver(outcomes, counts)
    return core, counts, dead, notes


def test_invalidate_forgets_the_key_of_an_event_whose_write_failed_so_a_resend_passes():
    sink = ListSink(fail_values={EVENT}, error=InvalidEvent("rejected", "downstream rejected it"))
    core, counts, dead, notes = deliver({"invalid": "invalidate"}, sink, [record()])
    assert (counts.out, counts.dead_lettered, counts.invalidations, counts.balanced) == (0, 1, 1, True)
    assert [d.record.value for d in dead.written] == [EVENT]
    assert [(n.kind, n.event.unique_value) for n in notes.published] == [("INVALIDATE", "u")]
    [resent], _ = core.process([record(offset=5)])
    assert resent.verdict is Verdict.EMIT


def test_dead_letter_on_write_failure_keeps_the_key_so_a_resend_is_a_duplicate():
    sink = ListSink(fail_values={EVENT}, error=InvalidEvent("rejected", "downstream rejected it"))
    core, counts, _dead, notes = deliver({"invalid": "dead-letter"}, sink, [record()])
    assert (counts.out, counts.dead_lettered, notes.published) == (0, 1, [])
    [resent], _ = core.process([record(offset=5)])
    assert resent.verdict is Verdict.DUPLICATE


def test_write_failure_with_fail_policy_stops_before_acknowledging():
    sink = ListSink(fail_values={EVENT})
    with pytest.raises(PolicyExhausted):
        deliver({"transient": "retry(attempts=2,delay=0)>fail"}, sink, [record()])


def test_accounting_balances_and_reports_unbalanced():
    counts = Accounting(records_in=3, out=1, duplicates=1, dead_lettered=1)
    assert counts.balanced and "UNBALANCED" not in counts.summary_line()
    counts.records_in = 4
    assert not counts.balanced and counts.summary_line().endswith("UNBALANCED")


def test_the_settings_default_to_the_domain_policies():
    assert load_settings().policies.model_dump() == DEFAULT_POLICIES
