"""The service's own HTTP endpoint: Prometheus metrics at ``/metrics``, health at ``/health``.

``/metrics`` is the registry of ``adapters.metrics._prometheus.PrometheusMetrics`` in
Prometheus's text format (names, types and labels: ``adapters.metrics._catalog``).

``/health`` tells idle from stuck. Every engine reports after each poll or micro-batch, empty
ones included (``progressed``), so a running engine reports at least every few seconds whether
or not records arrive. 200 ``{"status": "ok"}`` while records moved in the last report, 200
``{"status": "idle"}`` while the engine reports but nothing arrives, 503 ``{"status":
"stalled"}`` when no report came for ``stall_after`` seconds: the engine is blocked (a sink or
the state store retried without end, a batch that never finishes). The body also says how long
ago the last report and the last record were.

The endpoint is exposed (``0.0.0.0`` in the image), so it is bounded: a request must arrive
within ``request_timeout`` seconds of connecting, at most ``max_connections`` are served at once
(more are closed at once), a failing ``accept`` (no file descriptor left) waits before the
next one instead of spinning, and a client's error is one redacted log line, never a
traceback. ``HEAD`` is answered, a query string ignored. Python's ``http.server`` is kept
(rather than a third-party server) because those four bounds are all it lacked.
"""

from __future__ import annotations

import errno
import json
import logging
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from prometheus_client import CONTENT_TYPE_LATEST

from adapters.metrics import PrometheusMetrics
from domain import SetupError, first_line, redact

log = logging.getLogger(__name__)

_PORT_ERRORS = (errno.EADDRINUSE, errno.EACCES)  # the port is taken or privileged; anything else is the host's
_OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
MAX_CONNECTIONS = 16
REQUEST_TIMEOUT = 5.0
ACCEPT_BACKOFF = 0.2  # seconds between accepts while no file descriptor is left


class _BoundedServer(ThreadingHTTPServer):
    """A thread per connection, at most ``max_connections`` of them; over the bound a new
    connection is closed at once."""

    def __init__(self, address, handler, max_connections: int):
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(max_connections)
        self._warned = 0.0

    def get_request(self):
        try:
            return super().get_request()
        except OSError as exc:
            if exc.errno in _OUT_OF_RESOURCES:
                if time.monotonic() - self._warned > 10:
                    self._warned = time.monotonic()
                    log.warning("metrics endpoint: cannot accept a connection: %s", exc.strerror)
                time.sleep(ACCEPT_BACKOFF)
            raise

    def process_request(self, request, client_address):
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request, client_address):
        error = sys.exc_info()[1]
        log.info("metrics endpoint: %s from %s: %s", type(error).__name__, client_address[0], redact(first_line(error)))


class MetricsServer:
    def __init__(
        self,
        metrics: PrometheusMetrics,
        port: int,
        host: str = "127.0.0.1",
        stall_after: float = 120,
        *,
        request_timeout: float = REQUEST_TIMEOUT,
        max_connections: int = MAX_CONNECTIONS,
    ):
        self.metrics = metrics
        self.stall_after = stall_after
        self.request_timeout = request_timeout
        self.last_progress = self.last_record = time.monotonic()
        self._records_in: int | None = None
        self._moved = False
        try:
            self._server = _BoundedServer((host, port), self._handler(), max_connections)
        except OSError as exc:
            setting = (
                "metrics_port (DEDUP_METRICS_PORT, --metrics-port)"
                if exc.errno in _PORT_ERRORS
                else "metrics_host (DEDUP_METRICS_HOST)"
            )
            raise SetupError(
                f"invalid setting {setting}: cannot serve metrics on {host}:{port}: {exc.strerror or exc}"
            ) from None
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="metrics-http")

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def progressed(self, records_in: int) -> None:
        """The engine polled (or finished a micro-batch); ``records_in``: its count of records read so far."""
        now = time.monotonic()
        self._moved = (self._records_in is None and records_in > 0) or (
            self._records_in is not None and records_in > self._records_in
        )
        if self._moved:
            self.last_record = now
        self.last_progress, self._records_in = now, records_in

    def health(self) -> tuple[bool, dict]:
        """Whether the engine is healthy, and the ``/health`` body (module docstring)."""
        now = time.monotonic()
        age = now - self.last_progress
        status = "stalled" if age > self.stall_after else "ok" if self._moved else "idle"
        return status != "stalled", {
            "status": status,
            "last_progress_seconds_ago": round(age, 1),
            "last_record_seconds_ago": round(now - self.last_record, 1),
        }

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            timeout = server.request_timeout  # for the request and for writing the reply

            def do_GET(self, body: bool = True):
                path = urlsplit(self.path).path
                if path == "/metrics":
                    self._send(200, CONTENT_TYPE_LATEST, server.metrics.exposition(), body)
                elif path in ("/health", "/healthz", "/ready"):
                    ok, health = server.health()
                    self._send(200 if ok else 503, "application/json", json.dumps(health), body)
                else:
                    self._send(404, "text/plain", "not found\n", body)

            def do_HEAD(self):
                self.do_GET(body=False)

            def _send(self, code: int, content_type: str, body: str | bytes, with_body: bool = True):
                data = body.encode() if isinstance(body, str) else body
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if with_body:
                    self.wfile.write(data)

            def log_message(self, *args):
                pass

        return Handler
