import json
import urllib.error
import urllib.request

import pytest

from adapters.metrics.prometheus import PrometheusMetrics
from app.metrics_server import MetricsServer


@pytest.fixture
def server():
    metrics = PrometheusMetrics(["APP", "WEB"])
    srv = MetricsServer(metrics, 0, host="127.0.0.1").start()
    yield srv
    srv.stop()


def get(srv, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}{path}", timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_metrics_are_served_in_prometheus_text_with_labels_and_zeros(server):
    server.metrics.increment("in", 10)
    server.metrics.increment("duplicates", 3, rule="APP")
    server.metrics.increment("dead_lettered", 2, reason="not_json")
    server.metrics.gauge("state_rows", 42)
    server.metrics.observe("batch_duration_seconds", 0.3)
    status, body = get(server, "/metrics")
    assert status == 200
    assert "dedup_records_in_total 10.0" in body
    assert 'dedup_duplicates_total{rule="APP"} 3.0' in body and 'dedup_duplicates_total{rule="WEB"} 0.0' in body
    assert 'dedup_dead_lettered_total{reason="not_json"} 2.0' in body and 'dedup_dead_lettered_total{reason="late"} 0.0' in body
    assert "dedup_late_total{rule=\"none\"} 0.0" in body and "dedup_skipped_total 0.0" in body  # zeros are series
    assert "# TYPE dedup_state_rows gauge\ndedup_state_rows 42.0" in body
    assert 'dedup_batch_duration_seconds_bucket{le="0.5"} 1.0' in body and "process_cpu_seconds_total" in body


def test_a_name_outside_the_catalog_or_with_other_labels_is_dropped_not_raised(server):
    server.metrics.increment("no_such_count", 1)
    server.metrics.increment("duplicates", 1)  # needs its rule label
    assert "no_such_count" not in get(server, "/metrics")[1]


def test_health_turns_503_when_progress_stalls(server):
    assert get(server, "/health")[0] == 200
    server.stall_after = -1
    status, body = get(server, "/health")
    assert status == 503 and json.loads(body)["status"] == "stalled"


def test_health_says_idle_while_polls_bring_nothing_and_ok_while_records_move(server):
    server.progressed(0)
    assert json.loads(get(server, "/health")[1])["status"] == "idle"
    server.progressed(5)
    assert json.loads(get(server, "/health")[1])["status"] == "ok"
    server.progressed(5)
    status, body = get(server, "/health")
    assert status == 200 and json.loads(body)["status"] == "idle"
