"""The large-state bench's check of the state-growth alert (``bench/large_state_bench.py
--alert``): a run's series put on a live stream's time line and given to the shipped rule
(deploy/prometheus/alerts.yml) by promtool, which must fire when no key expires and stay
quiet when the state levels off."""

from bench.large_state_bench import state_alert

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
