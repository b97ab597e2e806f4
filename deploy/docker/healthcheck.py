"""The image's HEALTHCHECK: exit 0 when the service's ``/health`` answers 200, 1 otherwise.

The service serves ``/health`` on ``DEDUP_METRICS_PORT`` (the ``metrics_port`` setting); it
answers 503 once the engine has made no progress for a while (see app/_metrics_server.py).
Standard library only, so it needs nothing the image does not already have.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request


def main() -> int:
    port = os.environ.get("DEDUP_METRICS_PORT", "").strip()
    if not port:
        print("healthcheck: DEDUP_METRICS_PORT is not set, so the service serves no /health")
        return 1
    url = f"http://127.0.0.1:{port}/health"
    try:
        with urllib.request.urlopen(url, timeout=float(os.environ.get("HEALTHCHECK_TIMEOUT", "4"))) as reply:
            print(reply.read().decode(errors="replace").strip())
            return 0
    except urllib.error.HTTPError as exc:
        print(f"healthcheck: {url} answered {exc.code}: {exc.read().decode(errors='replace').strip()}")
    except OSError as exc:
        print(f"healthcheck: {url}: {exc}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
