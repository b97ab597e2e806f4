import errno
import json
import socket
import socketserver
import struct
import threading
import time
import urllib.error
import urllib.request

import pytest

from adapters.metrics import PrometheusMetrics
from app import ACCEPT_BACKOFF, MetricsServer


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
    assert (
        'dedup_dead_lettered_total{reason="not_json"} 2.0' in body
        and 'dedup_dead_lettered_total{reason="late"} 0.0' in body
    )
    assert 'dedup_late_total{rule="none"} 0.0' in body and "dedup_skipped_total 0.0" in body  # zeros are series
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


def bounded_server(**options):
    return MetricsServer(PrometheusMetrics(["APP"]), 0, host="127.0.0.1", **options).start()


def test_head_is_answered_and_a_query_string_ignored(server):
    request = urllib.request.Request(f"http://127.0.0.1:{server.port}/health", method="HEAD")
    with urllib.request.urlopen(request, timeout=5) as reply:
        assert reply.status == 200 and reply.read() == b"" and int(reply.headers["Content-Length"]) > 0
    assert get(server, "/health?verbose=1")[0] == 200
    assert get(server, "/metrics?x=1")[0] == 200 and get(server, "/nothing?x=1")[0] == 404


def test_clients_that_never_finish_a_request_are_cut_off_and_bounded_in_number():
    srv = bounded_server(request_timeout=0.5, max_connections=4)
    threads_before = threading.active_count()
    clients = []
    try:
        for _ in range(60):  # a flood of slow clients: a request line, never the blank line after it
            client = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
            client.sendall(b"GET /health HTTP/1.1\r\n")
            clients.append(client)
        time.sleep(0.2)
        assert threading.active_count() <= threads_before + 4  # one thread per served connection, at most
        deadline = time.monotonic() + 10
        while get_or_none(srv, "/health") != 200:  # served again once the slow ones time out
            assert time.monotonic() < deadline, "the endpoint stayed blocked by slow clients"
            time.sleep(0.1)
        for client in clients:  # every slow client was cut off: closed at once, or after its timeout
            try:
                while client.recv(1024):
                    pass
            except ConnectionResetError:
                pass
    finally:
        for client in clients:
            client.close()
        srv.stop()


def get_or_none(srv, path):
    try:
        return get(srv, path)[0]
    except (urllib.error.URLError, ConnectionError, OSError):
        return None


def test_a_client_resetting_its_connection_is_one_log_line_not_a_traceback(caplog, capfd):
    srv = bounded_server(request_timeout=2)
    try:
        for _ in range(5):
            client = socket.create_connection(("127.0.0.1", srv.port))
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            client.close()  # reset while the reply is written
        time.sleep(0.5)
        assert get(srv, "/health")[0] == 200
    finally:
        srv.stop()
    assert "Traceback" not in capfd.readouterr().err
    assert all("\n" not in r.getMessage() for r in caplog.records)


def test_no_file_descriptor_left_waits_between_accepts_instead_of_spinning(monkeypatch):
    srv = bounded_server()
    calls = []

    def refused():
        calls.append(time.monotonic())
        raise OSError(errno.EMFILE, "Too many open files")

    try:
        original = socketserver.TCPServer.get_request
        monkeypatch.setattr(socketserver.TCPServer, "get_request", lambda self: refused())
        client = socket.create_connection(("127.0.0.1", srv.port))  # makes the listening socket readable
        time.sleep(1.0)
        monkeypatch.setattr(socketserver.TCPServer, "get_request", original)
        client.close()
    finally:
        srv.stop()
    assert 1 <= len(calls) <= 1.0 / ACCEPT_BACKOFF + 2  # not thousands of failed accepts a second
