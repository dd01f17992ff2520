"""A tiny side HTTP endpoint for ``/metrics`` (Prometheus) and ``/healthz`` (probes).

Shared by the scheduler and the agent; runs in a daemon thread.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from proto.errors import InputError
from proto.ports import check_port


class _V6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def start_http(registry: CollectorRegistry, port: int, host: str = "127.0.0.1",
               healthy: Callable[[], bool] = lambda: True,
               ready: Callable[[], bool] = lambda: True) -> ThreadingHTTPServer:
    """``/metrics``, ``/healthz`` (200 while ``healthy()``) and ``/readyz`` (200 while ``ready()``; a scheduler
    replica that is not the leader is not ready, so Services send agents to the leader), else 503.

    On loopback unless ``host`` says otherwise (``--metrics-address``): the DaemonSet and Deployment pass
    ``0.0.0.0`` for Prometheus and the kubelet's probes; on a shared machine nobody else needs the figures."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
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

        def log_message(self, *args: object) -> None:  # keep probes out of the log
            pass

    server = _V6Server if ":" in host else ThreadingHTTPServer
    check_port(host, port, flag="--metrics-port", also=" (0 turns it off), or --metrics-address ADDRESS")
    try:
        httpd = server((host.strip("[]"), port), Handler)
    except (OSError, OverflowError) as exc:  # taken since the check, or an address that is not this machine's
        raise InputError(f"--metrics-address/--metrics-port: cannot listen on {host}:{port} "
                         f"({getattr(exc, 'strerror', None) or exc})") from None
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, name="http", daemon=True).start()
    return httpd
