"""The service's own HTTP endpoint: Prometheus metrics at ``/metrics``, health at ``/health``.

Counters are exported as ``dedup_<name>_total``, gauges as ``dedup_<name>``. ``/health``
answers 200 while the engine made progress within ``stall_after`` seconds (or is idle
with nothing to read), 503 otherwise.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from adapters.system import InMemoryMetrics

HELP = {
    "in": "Records read from the input",
    "out": "Unique events written to the output",
    "duplicates": "Duplicates dropped",
    "dead_lettered": "Records sent to the dead-letter output (invalid, late, failed)",
    "skipped": "Records skipped by a skip policy",
    "late": "Records older than the watermark minus the allowed lateness",
    "invalid": "Records that are not valid events",
    "passed_through": "Events without a rule, passed through",
    "invalidations": "INVALIDATE notifications applied",
}


def render(metrics: InMemoryMetrics) -> str:
    lines = []
    for name, value in sorted(dict(metrics.counters).items()):
        metric = f"dedup_{'records_in' if name == 'in' else name}_total"
        lines += [f"# HELP {metric} {HELP.get(name, name)}", f"# TYPE {metric} counter", f"{metric} {value}"]
    for name, value in sorted(dict(metrics.gauges).items()):
        lines += [f"# TYPE dedup_{name} gauge", f"dedup_{name} {value}"]
    return "\n".join(lines) + "\n"


class MetricsServer:
    def __init__(self, metrics: InMemoryMetrics, port: int, host: str = "127.0.0.1", stall_after: float = 120):
        self.metrics = metrics
        self.stall_after = stall_after
        self.last_progress = time.monotonic()
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="metrics-http")

    def start(self) -> "MetricsServer":
        self._thread.start()
        return self

    def progressed(self) -> None:
        self.last_progress = time.monotonic()

    def healthy(self) -> tuple[bool, dict]:
        age = time.monotonic() - self.last_progress
        return age <= self.stall_after, {"last_progress_seconds_ago": round(age, 1)}

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path == "/metrics":
                    self._send(200, "text/plain; version=0.0.4", render(server.metrics))
                elif self.path in ("/health", "/healthz", "/ready"):
                    ok, detail = server.healthy()
                    self._send(200 if ok else 503, "application/json",
                               json.dumps({"status": "ok" if ok else "stalled", **detail}))
                else:
                    self._send(404, "text/plain", "not found\n")

            def _send(self, code: int, content_type: str, body: str):
                data = body.encode()
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        return Handler
