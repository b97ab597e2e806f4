"""The large-state bench's check of the state-growth alert (``bench/large_state_bench.py
--alert``): a run's series put on a live stream's time line and given to the shipped rule
(deploy/prometheus/alerts.yml) by promtool, which must fire when no key expires and stay
quiet when the state levels off; and its summary's medians and ratios (``summarize``)."""

from argparse import Namespace

from bench.large_state_bench import OPERATOR_SUMMARY, accounting_holds, state_alert, summarize

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


LARGE, PROBE = 500_000, 5_000


def micro_batch(n: int, records: int, seconds: float, live_keys: int, cold: bool = False, off_heap_mb: int = 1_000):
    return {
        "batch": n,
        "records": records,
        "seconds": seconds,
        "rate": records / seconds,
        "live_keys": live_keys,
        "written": 2**20,
        "driver_mb": 2_000,
        "off_heap_mb": off_heap_mb,
        "cold": cold,
    }


def run_to_30m_keys(first_seconds: float, restarted_seconds: float) -> list[dict]:
    """A process that grows the state to 30 M keys, then a restarted one at 30 M. Each process's
    first micro-batch takes ``first_seconds`` / ``restarted_seconds``; the warm large ones near
    1 M keys 25 s and 20 s (20,000 and 25,000 records/s), at 30 M 27.5 s; probes 1 s near 1 M
    keys, 1.1 s at 30 M."""
    batches = [micro_batch(0, LARGE, first_seconds, 500_000, cold=True)]
    batches += [micro_batch(1, LARGE, 25.0, 1_000_000), micro_batch(2, LARGE, 20.0, 1_500_000)]
    batches += [micro_batch(n, PROBE, 1.0, 1_500_000) for n in (3, 4)]
    batches += [micro_batch(n, LARGE, 27.5, 30_000_000, off_heap_mb=1_000 + n) for n in range(5, 11)]
    batches += [micro_batch(n, PROBE, 1.1, 30_000_000) for n in (11, 12)]
    batches += [micro_batch(13, LARGE, restarted_seconds, 30_000_000, cold=True)]
    return batches + [micro_batch(n, LARGE, 27.5, 30_000_000) for n in (14, 15)]


def summary_of(batches: list[dict]) -> dict:
    args = Namespace(batch=LARGE, probe=PROBE, kafka=None)
    counts = {"out": 8, "out_id_sum": 28, "dead_letters": 0}
    return summarize(args, batches, None, counts, EXPECTED)


def test_the_ratios_compare_warm_batches_whatever_the_first_batch_of_each_process_took():
    for first in (20.0, 25.0, 400.0):
        summary = summary_of(run_to_30m_keys(first, 10 * first))
        assert summary["large_batch_rate"] == {"at ~1M keys": 25_000.0, "at the steady state": LARGE / 27.5}
        assert round(summary["rate_ratio"], 3) == round(20.0 / 27.5, 3)
        assert round(summary["probe_ratio"], 3) == 1.1
        assert summary["peak_live_keys"] == 30_000_000
        assert summary["accounting_holds"]


def test_a_first_batch_not_marked_cold_moves_the_medians_and_marked_counts_only_as_state_and_memory():
    batches = run_to_30m_keys(400.0, 400.0)
    batches[0]["cold"] = False
    assert summary_of(batches)["large_batch_rate"]["at ~1M keys"] == 20_000.0  # the middle of 1,250 / 20,000 / 25,000
    batches[0]["cold"] = True
    marked = summary_of(batches)
    assert marked["large_batch_rate"]["at ~1M keys"] == 25_000.0
    assert marked["steady_batches"] == 11  # the restart's cold batch is still a batch at the steady state
    assert marked["off_heap_mb_steady"] == [1_000, 1_010]


def test_memory_by_thirds_is_the_median_of_each_third_of_the_steady_state_in_the_order_of_the_run():
    batches = run_to_30m_keys(20.0, 20.0)
    steady = [b for b in batches if b["live_keys"] == 30_000_000]
    assert len(steady) == 11  # thirds of 3, 4 and 4 batches; of an even count the upper middle
    for n, batch in enumerate(steady):
        batch["off_heap_mb"] = [100, 900, 200, 300, 400, 350, 500, 800, 700, 750, 600][n]
        used = [1, 2, 3, 4, 6, 5, 4, 9, 8, 7, 10][n] * 2**20
        batch["operator"] = dict.fromkeys(OPERATOR_SUMMARY, 0) | {"memoryUsedBytes": used}
    summary = summary_of(batches)
    assert summary["off_heap_mb_steady_by_thirds"] == [200, 400, 750]
    assert summary["rocksdb_mb_steady_by_thirds"] == [2, 5, 9]
    for batch in steady[:3]:
        del batch["operator"]  # a batch that reported no operator figures counts in no third of RocksDB's
    assert summary_of(batches)["rocksdb_mb_steady_by_thirds"] == [6, 5, 8]
