"""The service's own HTTP endpoint: Prometheus metrics at ``/metrics``, health at ``/health``.

``/metrics`` is the registry of ``adapters.metrics.prometheus.PrometheusMetrics`` in
Prometheus's text format (names, types and labels: ``adapters.metrics.catalog``).

``/health`` tells idle from stuck. Every engine reports after each poll or micro-batch, empty
ones included (``progressed``), so a running engine reports at least every few seconds whether
or not records arrive. 200 ``{"status": "ok"}`` while records moved in the last report, 200
``{"status": "idle"}`` while the engine reports but nothing arrives, 503 ``{"status":
"stalled"}`` when no report came for ``stall_after`` seconds: the engine is blocked (a sink or
the state store retried without end, a batch that never finishes). The body also says how long
ago the last report and the last record were.
"""

from __future__ import annotations

import errno
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST

from adapters.metrics.prometheus import PrometheusMetrics
from domain.errors import SetupError

_PORT_ERRORS = (errno.EADDRINUSE, errno.EACCES)  # the port is taken or privileged; anything else is the host's


class MetricsServer:
    def __init__(self, metrics: PrometheusMetrics, port: int, host: str = "127.0.0.1", stall_after: float = 120):
        self.metrics = metrics
        self.stall_after = stall_after
        self.last_progress = self.last_record = time.monotonic()
        self._records_in: int | None = None
        self._moved = False
        try:
            self._server = ThreadingHTTPServer((host, port), self._handler())
        except OSError as exc:
            setting = "metrics_port (DEDUP_METRICS_PORT, --metrics-port)" if exc.errno in _PORT_ERRORS \
                else "metrics_host (DEDUP_METRICS_HOST)"
            raise SetupError(f"invalid setting {setting}: cannot serve metrics on {host}:{port}: "
                             f"{exc.strerror or exc}") from None
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="metrics-http")

    def start(self) -> "MetricsServer":
        self._thread.start()
        return self

    def progressed(self, records_in: int) -> None:
        """The engine polled (or finished a micro-batch); ``records_in``: its count of records read so far."""
        now = time.monotonic()
        self._moved = self._records_in is None and records_in > 0 or (
            self._records_in is not None and records_in > self._records_in)
        if self._moved:
            self.last_record = now
        self.last_progress, self._records_in = now, records_in

    def health(self) -> tuple[bool, dict]:
        """Whether the engine is healthy, and the ``/health`` body (module docstring)."""
        now = time.monotonic()
        age = now - self.last_progress
        status = "stalled" if age > self.stall_after else "ok" if self._moved else "idle"
        return status != "stalled", {"status": status, "last_progress_seconds_ago": round(age, 1),
                                     "last_record_seconds_ago": round(now - self.last_record, 1)}

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path == "/metrics":
                    self._send(200, CONTENT_TYPE_LATEST, server.metrics.exposition())
                elif self.path in ("/health", "/healthz", "/ready"):
                    ok, body = server.health()
                    self._send(200 if ok else 503, "application/json", json.dumps(body))
                else:
                    self._send(404, "text/plain", "not found\n")

            def _send(self, code: int, content_type: str, body: str | bytes):
                data = body.encode() if isinstance(body, str) else body
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        return Handler
