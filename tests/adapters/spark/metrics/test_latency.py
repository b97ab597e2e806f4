"""The Spark engine's end-to-end latency (``adapters.spark.metrics._latency``): one observation
per unique event written, per rule, exported as ``dedup_end_to_end_latency_seconds``."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from adapters.metrics import PrometheusMetrics
from adapters.spark.metrics import BOUNDS, latency_counts, publish_latency
from domain import RuleSet

pytestmark = pytest.mark.spark
EXPORTED = "dedup_end_to_end_latency_seconds"


class Observations:
    """A ``domain._ports.Metrics`` keeping what was observed."""

    def __init__(self):
        self.seen: list[tuple[str, float, dict]] = []

    def increment(self, name, amount=1, **labels):
        pass

    def gauge(self, name, value, **labels):
        pass

    def observe(self, name, value, **labels):
        self.seen.append((name, value, labels))

    def observe_many(self, name, values, **labels):
        self.seen.extend((name, value, labels) for value in values)


def test_cumulative_bucket_counts_replay_as_one_observation_per_event():
    # 3 APP events: 1 within the first bound, 1 within the third, 1 past the last; 1 WEB event past all
    values = {
        "latency:APP:n": 3,
        "latency:APP:0": 1,
        "latency:APP:1": 1,
        **{f"latency:APP:{i}": 2 for i in range(2, len(BOUNDS))},
        "latency:WEB:n": 1,
        "out@APP": 3,
    }
    counts = latency_counts(values)
    assert counts == {"APP": [1, 0, 1, *[0] * (len(BOUNDS) - 3), 1], "WEB": [0] * len(BOUNDS) + [1]}
    seen = Observations()
    publish_latency(seen, counts, delay=0.5)
    got = sorted((labels["rule"], round(value, 4)) for _, value, labels in seen.seen)
    middle = lambda i: ((BOUNDS[i - 1] if i else 0) + BOUNDS[i]) / 2 + 0.5  # noqa: E731
    assert got == sorted(
        [
            ("APP", round(middle(0), 4)),
            ("APP", round(middle(2), 4)),
            ("APP", BOUNDS[-1] + 0.5),
            ("WEB", BOUNDS[-1] + 0.5),
        ]
    )


def test_every_unique_event_written_is_observed_once_with_a_plausible_latency(files):
    files.add(
        {"id": "a1", "uniqueValue": "u1", "type": "APP", "timestamp": 1_700_000_000},
        {"id": "a2", "uniqueValue": "u1", "type": "APP", "timestamp": 1_700_000_001},  # duplicate
        {"id": "w1", "uniqueValue": "u2", "type": "WEB", "timestamp": 1_700_000_002},
        "not json",
    )
    files.add({"id": "w2", "uniqueValue": "u3", "type": "WEB", "timestamp": 1_700_000_003})
    metrics = PrometheusMetrics(RuleSet().rules)

    result = files.run(metrics=metrics)

    assert result.counts["out"] == 3
    samples = [
        s
        for family in text_string_to_metric_families(metrics.exposition().decode())
        for s in family.samples
        if s.name.startswith(EXPORTED)
    ]
    count = {s.labels["rule"]: s.value for s in samples if s.name == f"{EXPORTED}_count"}
    total = {s.labels["rule"]: s.value for s in samples if s.name == f"{EXPORTED}_sum"}
    assert {rule: n for rule, n in count.items() if n} == {"APP": 1, "WEB": 2}
    for rule, n in count.items():
        if n:
            assert 0 <= total[rule] / n < 60, (rule, total[rule], n)
