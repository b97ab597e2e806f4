import json
import urllib.error
import urllib.request

import pytest

from adapters.system import InMemoryMetrics
from app.metrics_server import MetricsServer


@pytest.fixture
def server():
    metrics = InMemoryMetrics()
    srv = MetricsServer(metrics, 0, host="127.0.0.1").start()
    yield srv
    srv.stop()


def get(srv, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}{path}", timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_metrics_are_served_in_prometheus_text(server):
    server.metrics.increment("in", 10)
    server.metrics.increment("duplicates", 3)
    server.metrics.gauge("state_rows", 42)
    status, body = get(server, "/metrics")
    assert status == 200
    assert "dedup_records_in_total 10" in body and "dedup_duplicates_total 3" in body
    assert "# TYPE dedup_state_rows gauge\ndedup_state_rows 42" in body


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
