"""The large-state bench's check of the state-growth alert (``bench/large_state_bench.py
--alert``): a run's series put on a live stream's time line and given to the shipped rule
(deploy/prometheus/alerts.yml) by promtool, which must fire when no key expires and stay
quiet when the state levels off."""

from argparse import Namespace

from bench.large_state_bench import accounting_holds, state_alert

PER_SECOND = 100  # records a second of event time
BATCH = 10_000  # records a micro-batch: 100 s of event time
BATCHES = 6 * 36  # six hours


def alert_over_six_hours(live_keys) -> dict[str, bool]:
    """``state_alert`` over a run whose micro-batch n leaves ``live_keys(records read)`` keys."""
    ends = [BATCH * (n + 1) for n in range(BATCHES)]
    batches = [{"files_done": n + 1, "live_keys": live_keys(end)} for n, end in enumerate(ends)]
    return state_alert(batches, ends, PER_SECOND)


def test_the_alert_fires_when_no_key_expires():
    fired = alert_over_six_hours(lambda records: records)
    assert list(fired) == ["3h", "4h", "5h", "6h"]
    assert not fired["3h"]  # the input is compared with the hour before from 2h on, for 2h
    assert fired["5h"] and fired["6h"]


def test_the_alert_stays_quiet_when_the_state_levels_off():
    retention = 1200 * PER_SECOND  # keys of the last retention live; the older ones expired
    fired = alert_over_six_hours(lambda records: min(records, retention) + (records // BATCH) % 2 * BATCH // 2)
    assert fired == {"3h": False, "4h": False, "5h": False, "6h": False}


EXPECTED = {"records": 10, "out": 8, "out_id_sum": 28, "dead_letters": 0}


def test_over_kafka_at_least_once_may_write_a_key_twice_and_exactly_once_may_not():
    doubled = {"out": 9, "distinct": 8, "out_id_sum": 28, "dead_letters": 0}
    assert accounting_holds(Namespace(kafka="at-least-once"), doubled, EXPECTED)
    assert not accounting_holds(Namespace(kafka="exactly-once"), doubled, EXPECTED)
    once = {"out": 8, "distinct": 8, "out_id_sum": 28, "dead_letters": 0}
    assert accounting_holds(Namespace(kafka="exactly-once"), once, EXPECTED)


def test_a_key_lost_or_dead_lettered_breaks_the_accounting_of_every_delivery():
    lost = {"out": 8, "distinct": 7, "out_id_sum": 21, "dead_letters": 0}
    dead = {"out": 8, "distinct": 8, "out_id_sum": 28, "dead_letters": 1}
    for delivery in ("at-least-once", "exactly-once"):
        assert not accounting_holds(Namespace(kafka=delivery), lost, EXPECTED)
        assert not accounting_holds(Namespace(kafka=delivery), dead, EXPECTED)
    assert not accounting_holds(Namespace(kafka=None), {"out": 7, "out_id_sum": 21, "dead_letters": 0}, EXPECTED)
