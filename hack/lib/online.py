"""The online service the demo and the co-location benchmark run: a stdlib threaded HTTP/1.1 server
(keep-alive, quiet) whose every GET costs some CPU.

``http_server(port, respond)`` is the server (``respond(handler)`` answers one GET);
``serve_fixed_work`` is the benchmark's service: a calibrated amount of ``spin`` per request, its port
and calibration announced on stdout as ``READY <port> <iterations> <ms per request>``.
"""

from __future__ import annotations

from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from hack.lib.cpuwork import calibrate, spin

OK_REPLY = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nok\n"


def http_server(port: int, respond: Callable[[BaseHTTPRequestHandler], None], *, host: str = "127.0.0.1",
                backlog: int | None = None, nodelay: bool = False) -> ThreadingHTTPServer:
    """A threaded HTTP/1.1 server on ``host:port`` (0: any free port) answering every GET with
    ``respond(handler)``; ``backlog``: the listen queue (default the standard library's),
    ``nodelay``: TCP_NODELAY on every connection.  Call ``serve_forever()`` on it."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive
        disable_nagle_algorithm = nodelay

        def do_GET(self) -> None:
            respond(self)

        def log_message(self, *args) -> None:
            pass

    class Server(ThreadingHTTPServer):
        request_queue_size = ThreadingHTTPServer.request_queue_size if backlog is None else backlog
        daemon_threads = True

    return Server((host, port), Handler)


def serve_fixed_work(work_ms: float, connections: int) -> None:
    """The co-location benchmark's online service: ``work_ms`` of pure-Python work (calibrated here) per
    request, a fixed three-byte answer in one write, a listen queue for ``connections`` clients."""
    iterations, best = calibrate(work_ms)

    def respond(handler: BaseHTTPRequestHandler) -> None:
        spin(iterations)
        handler.wfile.write(OK_REPLY)  # one write: no write-write-read stall

    httpd = http_server(0, respond, backlog=max(128, connections * 2), nodelay=True)
    print(f"READY {httpd.server_address[1]} {iterations} {iterations * best * 1000:.4f}", flush=True)
    httpd.serve_forever()
