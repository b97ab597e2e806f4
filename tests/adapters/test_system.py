"""The metrics the library keeps in process when it is given none (``adapters.InMemoryMetrics``,
the kafka engine's default): a long-running engine observes a latency per unique event, so what
they keep must not grow with the events."""

import json
import time

from adapters import OBSERVATIONS_KEPT, InMemoryMetrics
from adapters.memory import InMemoryStateStore
from adapters.testing import FakeClock, ListDeadLetterSink, ListSink, ListSource
from domain import BatchPipeline, Deduplicator, Delivery, RawRecord, RuleSet, SourcePosition

T = 1_700_000_000


def test_in_memory_metrics_keep_the_latest_observations_and_count_them_all():
    metrics = InMemoryMetrics()
    metrics.observe_many("latency", [float(i) for i in range(OBSERVATIONS_KEPT + 5)])
    metrics.observe("latency", -1.0)
    kept = metrics.observations["latency"]
    assert len(kept) == OBSERVATIONS_KEPT
    assert (kept[0], kept[-1]) == (6.0, -1.0)  # the oldest went first
    assert metrics.observed["latency"] == OBSERVATIONS_KEPT + 6


def test_a_pipeline_observing_a_latency_per_unique_event_keeps_a_bounded_window_of_them():
    events = OBSERVATIONS_KEPT + 500
    arrived = time.time()
    records = [
        RawRecord(
            json.dumps({"id": f"e{i}", "uniqueValue": f"u{i}", "type": "WEB", "timestamp": T}).encode(),
            SourcePosition("in", 0, i),
            arrived=arrived,
        )
        for i in range(events)
    ]
    core = Deduplicator(RuleSet(), InMemoryStateStore(), FakeClock())
    metrics, sink = InMemoryMetrics(), ListSink()
    BatchPipeline(core, ListSource([records]), Delivery(core, sink, ListDeadLetterSink()), metrics).run()
    assert len(sink.written) == events
    assert metrics.observed["end_to_end_latency_seconds"] == events
    assert len(metrics.observations["end_to_end_latency_seconds"]) == OBSERVATIONS_KEPT
