"""A bounded number of connection threads for embedded mode's HTTP servers (the control API, the web view).

Each connection gets a thread, as in :class:`socketserver.ThreadingMixIn`, but at most ``max_connections`` at
once: one more is answered 503 at once instead of queueing behind the others or growing without limit.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
from typing import Any

BUSY_READ_SECONDS = 0.5  # how long a connection over the limit may take to send its request head


class ConnectionSlots(socketserver.ThreadingMixIn):
    """Mixed in before the server class; :meth:`limit_connections` is called before the server's own init."""

    daemon_threads = True
    busy_what = "this server"  # named in the 503's message
    max_connections: int
    _slots: threading.BoundedSemaphore

    def limit_connections(self, max_connections: int) -> None:
        self.max_connections = max_connections
        self._slots = threading.BoundedSemaphore(max_connections)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            busy(request, f"{self.busy_what} is serving {self.max_connections} connections already; try again")
            self.shutdown_request(request)  # type: ignore[attr-defined]  # the server class's
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def busy(request: socket.socket, message: str) -> None:
    """Answer 503 with ``{"error": message}`` and read the request head before closing.

    Closing a socket that still has unread input resets the peer (a Unix socket at once, TCP with an RST), and
    the peer then loses the answer too; so the head (64 KiB at most, ``BUSY_READ_SECONDS`` at most) is read and
    dropped first.
    """
    body = json.dumps({"error": message}).encode()
    try:
        request.settimeout(BUSY_READ_SECONDS)
        request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                        b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        request.shutdown(socket.SHUT_WR)
        seen = b""
        while b"\r\n\r\n" not in seen and len(seen) < 65536:
            chunk = request.recv(65536)
            if not chunk:
                break
            seen += chunk
        request.setblocking(False)
        while request.recv(65536):  # whatever else has already arrived
            pass
    except OSError:
        pass
