"""A tiny side HTTP endpoint for ``/metrics`` (Prometheus) and ``/healthz`` (probes).

Shared by the scheduler and the agent; runs in a daemon thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


def start_http(registry: CollectorRegistry, port: int, host: str = "0.0.0.0", healthy: Callable[[], bool] = lambda: True,
               ready: Callable[[], bool] = lambda: True) -> ThreadingHTTPServer:
    """``/metrics``, ``/healthz`` (200 while ``healthy()``) and ``/readyz`` (200 while ``ready()``; a scheduler
    replica that is not the leader is not ready, so Services send agents to the leader), else 503."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            if self.path.startswith("/metrics"):
                body, kind = generate_latest(registry), CONTENT_TYPE_LATEST
            elif self.path.startswith(("/healthz", "/readyz")):
                probe, name = (healthy, "unhealthy") if self.path.startswith("/healthz") else (ready, "not ready")
                if not probe():
                    self.send_error(503, name)
                    return
                body, kind = b"ok\n", "text/plain"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # keep probes out of the log
            pass

    httpd = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=httpd.serve_forever, name="http", daemon=True).start()
    return httpd
