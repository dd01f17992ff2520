"""Embedded mode's live web view: nodes with their pods, queues with what they deserve against what they have, and
the co-location picture over time as plots, served on loopback (``serve --embedded --web-port PORT``).

**Who can see it.**  The control API is a socket only its owner can open; a browser cannot open a Unix socket, so
the view listens on TCP, on a loopback address only (``--web-address`` refuses any other), and answers its data
(``/api/state``) only to a request that carries a random token made at start (``Authorization: Bearer TOKEN``).
The token is in the address written to ``STATE/web.url`` (``0600``, in the ``0700`` state folder): whoever may read
the state folder — the scheduler's user, root — may open the view, as with the control API; another local user
can reach the port but gets 403.  The page and its script carry no data and no token: they are served to anyone
who asks, and the page reads the token from its own address.  A request whose ``Host`` is not a loopback name of
this port is refused (a DNS-rebinding page cannot read the view through a name of its own).  Every answer forbids
framing, caching and referrers, and the page loads nothing from elsewhere (its Content-Security-Policy says
``'self'``): no CDN, plots drawn in SVG by the page's own script.

**What it shows**, read-only: names, phases, nodes, reasons, restarts and QoS levels of pods; nodes' conditions,
allocatable and real usage; queues' weights, deserved and allocated resources; recent events; and the series of
:mod:`.series` — what the scheduler samples itself every :data:`SAMPLE_S` seconds (each node's offline CPU quota
and batch allocatable, CPU in use, evictions so far) and what workloads pushed (``POST /series`` on the control
API: the demo's online p99 and offline throughput).  Never a pod's environment, command, annotations or logs.

Bounded like the control API: at most :data:`MAX_CONNECTIONS` connections at once (more are answered 503), a
request head read within :data:`READ_TIMEOUT` seconds, no request bodies.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import secrets
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from proto.errors import InputError
from proto.localsock import private_file
from proto.ports import check_port
from proto.vocab.quantity import format_quantity
from scheduler.modes.embedded import printing
from scheduler.modes.embedded.slots import ConnectionSlots

if TYPE_CHECKING:
    from scheduler.modes.embedded.server import ControlServer

log = logging.getLogger(__name__)

ASSETS = Path(__file__).with_name("webui")
FILES = {"/": ("index.html", "text/html; charset=utf-8"), "/index.html": ("index.html", "text/html; charset=utf-8"),
         "/app.js": ("app.js", "text/javascript; charset=utf-8"), "/style.css": ("style.css", "text/css; charset=utf-8")}
SAMPLE_S = 2.0        # the scheduler's own series are sampled this often
MAX_CONNECTIONS = 16  # served at once; more are answered 503
READ_TIMEOUT = 10.0   # seconds a connection may take to send its request head
RECENT_EVENTS = 20
EVICTION_REASONS = ("Evicted", "Preempted", "TaintManagerEviction")
# the scheduler's own charts (the demo pushes "online p99 latency (ms)" and "offline throughput (iterations/s)")
QUOTA_CHART = "offline CPU (millicores)"
EVICTIONS_CHART = "evictions (total)"
CPU_CHART = "node CPU in use (cores)"
HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                               "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
}


def check_address(address: str) -> str:
    """``address`` when it is a loopback address (the view is this machine's alone); InputError otherwise."""
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        raise InputError(f"--web-address {address!r}: expected a loopback IP address such as 127.0.0.1 or ::1") \
            from None
    if not ip.is_loopback:
        raise InputError(f"--web-address {address}: the web view listens on loopback only (127.0.0.1 or ::1): "
                         "anyone who can reach the port could otherwise try its token")
    return str(ip)


class WebView:
    def __init__(self, control: ControlServer, *, address: str = "127.0.0.1", port: int = 0,
                 url_file: Path | None = None, token: str | None = None, sample_s: float = SAMPLE_S):
        self.control, self.embedded = control, control.embedded
        self.address = check_address(address)
        self.token = token or secrets.token_urlsafe(24)
        self.url_file, self.sample_s = url_file, sample_s
        check_port(self.address, port, flag="--web-port", also=" (0 picks a free one)")
        server_class = _V6Server if ":" in self.address else _Server
        try:
            self.httpd = server_class((self.address, port), _handler(self), MAX_CONNECTIONS)
        except OSError as exc:  # taken since the check
            raise InputError(f"--web-port {port}: cannot listen on {self.address}:{port} ({exc.strerror or exc})") \
                from None
        self.port = int(self.httpd.server_address[1])
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def base(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"http://{host}:{self.port}/"

    @property
    def url(self) -> str:
        """The address to open: the page, with the token it reads from its own query."""
        return f"{self.base}?token={self.token}"

    def start(self) -> None:
        if self.url_file is not None:
            self.url_file.unlink(missing_ok=True)
            self.url_file.touch(mode=0o600)
            private_file(self.url_file)
            self.url_file.write_text(self.url + "\n")
        for name, target in (("web", self.httpd.serve_forever), ("web-sampler", self._sample_loop)):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        log.info("web view on %s (its address with the token: %s)", self.base, self.url_file or "see --web-port")

    def stop(self) -> None:
        self._stop.set()
        if self._threads:
            self.httpd.shutdown()
        self.httpd.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        if self.url_file is not None:
            self.url_file.unlink(missing_ok=True)

    # -- the scheduler's own series -------------------------------------------------------------------------
    def _sample_loop(self) -> None:
        while True:
            try:
                self.sample()
            except Exception:  # a bug in one sample must not end the plots for good
                log.exception("web view: sampling failed")
            if self._stop.wait(self.sample_s):
                return

    def sample(self) -> None:
        """One point of each of the scheduler's own charts."""
        charts: dict[str, dict[str, float]] = {QUOTA_CHART: {}, CPU_CHART: {}}
        for n in self.control.nodes()[:6]:  # a chart has at most 12 lines: two a node
            if n.get("offlineQuotaMillis") is not None:
                charts[QUOTA_CHART][f"quota on {n['key']}"[:80]] = n["offlineQuotaMillis"]
            if "batchCpuMillis" in n:
                charts[QUOTA_CHART][f"batch allocatable on {n['key']}"[:80]] = n["batchCpuMillis"]
            if "cpuUsedCores" in n:
                charts[CPU_CHART][n["key"][:80]] = n["cpuUsedCores"]
        charts[EVICTIONS_CHART] = {"evictions": float(sum(
            int(e.get("count") or 1) for e in self.embedded.events.list() if e.get("reason") in EVICTION_REASONS))}
        self.control.series.add({k: v for k, v in charts.items() if v})

    # -- what the page shows --------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        now = time.time()
        _, pods = self.control.objects("Pod")
        _, queues = self.control.objects("Queue")
        nodes = self.control.nodes()
        by_node: dict[str, list[dict]] = {}
        for p in pods:
            by_node.setdefault(p["status"].get("nodeName") or "", []).append(_pod(p, now))
        events = self.embedded.events.list()[-RECENT_EVENTS:]
        return {
            "time": now,
            "nodes": [{"name": n["key"], "status": n.get("status"), "message": n.get("message") or "",
                       "allocatable": {"cpu": format_quantity("cpu", n["allocatable"].get("cpu", 0)),
                                       "memory": _bytes(n["allocatable"].get("memory", 0))},
                       "cpuCores": n["allocatable"].get("cpu", 0) / 1000, "cpuUsedCores": n.get("cpuUsedCores"),
                       "batchCpuMillis": n.get("batchCpuMillis"), "offlineQuotaMillis": n.get("offlineQuotaMillis"),
                       "taints": [printing.taint(t) for t in n.get("taints") or []],
                       "pods": by_node.pop(n["key"], [])} for n in nodes],
            "unplaced": [p for group in by_node.values() for p in group],
            "queues": [_queue(q) for q in queues],
            "charts": self.control.series.snapshot(),
            "events": [{"type": e.get("type"), "reason": e.get("reason"), "count": e.get("count", 1),
                        "object": _object(e),
                        "namespace": (e.get("metadata") or {}).get("namespace"), "message": e.get("message"),
                        "age": printing.age(e.get("lastTimestamp"), now)} for e in reversed(events)],
        }


def _object(event: dict) -> str:
    """``pod shop/web``, ``node n1``: what an event is about."""
    obj = event.get("involvedObject") or {}
    name = f"{obj['namespace']}/{obj.get('name', '')}" if obj.get("namespace") else obj.get("name", "")
    return f"{str(obj.get('kind', '')).lower()} {name}"


def _bytes(amount: float) -> str:
    for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if amount >= size:
            return f"{amount / size:.3g}{unit}"
    return f"{amount:g}"


def _pod(item: dict, now: float) -> dict:
    """A pod as the page shows it: nothing of its command, environment or annotations but its QoS level."""
    status, meta = item["status"], item["manifest"].get("metadata") or {}
    containers = (status.get("runtime") or {}).get("containers") or []
    return {"namespace": meta.get("namespace", "default"), "name": meta.get("name"), "status": printing.pod_status(item),
            "phase": status.get("phase") or "Pending", "reason": status.get("reason") or "",
            "restarts": sum(int(c.get("restarts") or 0) for c in containers),
            "qos": (meta.get("annotations") or {}).get(printing.QOS_ANNOTATION) or "",
            "node": status.get("nodeName") or "", "age": printing.age(meta.get("creationTimestamp"), now)}


def _queue(item: dict) -> dict:
    status, spec = item["status"], item["manifest"].get("spec") or {}
    deserved, allocated = status.get("deserved") or {}, status.get("allocated") or {}
    return {"name": item["key"], "weight": spec.get("weight", 1),
            "deserved": {k: format_quantity(k, v) for k, v in sorted(deserved.items())},
            "allocated": {k: format_quantity(k, v) for k, v in sorted(allocated.items())},
            "deservedCpu": deserved.get("cpu", 0) / 1000, "allocatedCpu": allocated.get("cpu", 0) / 1000,
            "hasDeserved": "deserved" in status}


class _Server(ConnectionSlots, HTTPServer):
    """The web view's server: a thread per connection, at most ``max_connections`` (more get 503 at once)."""

    busy_what = "the web view"

    def __init__(self, address: Any, handler: Any, max_connections: int):
        self.limit_connections(max_connections)
        super().__init__(address, handler)


class _V6Server(_Server):
    address_family = socket.AF_INET6


def _handler(view: WebView) -> type[BaseHTTPRequestHandler]:
    names = ("127.0.0.1", "localhost", "[::1]", f"[{view.address}]", view.address)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = READ_TIMEOUT
        server_version = "scoria"
        sys_version = ""

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: bytes, kind: str) -> None:
            self.send_response(status)
            for name, value in HEADERS.items():
                self.send_header(name, value)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            try:
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):  # the page was closed meanwhile
                self.close_connection = True

        def _json(self, status: int, doc: Any) -> None:
            self._send(status, json.dumps(doc).encode(), "application/json")

        def do_GET(self) -> None:  # noqa: N802 — http.server's name
            if (self.headers.get("Host") or "").lower() not in {f"{name}:{view.port}" for name in names}:
                return self._json(403, {"error": "not a loopback name of this port (Host header refused)"})
            path = urlsplit(self.path).path
            if path in FILES:
                name, kind = FILES[path]
                return self._send(200, (ASSETS / name).read_bytes(), kind)
            if path == "/api/state":
                if not self._authorized():
                    return self._json(403, {"error": "the view's token is missing or wrong: open the address in "
                                                     "the state folder's web.url"})
                try:
                    return self._json(200, view.state())
                except Exception as exc:
                    log.exception("web view: /api/state failed")
                    return self._json(500, {"error": f"{type(exc).__name__}: {exc}"})
            return self._json(404, {"error": "not found"})

        do_HEAD = do_GET

        def _authorized(self) -> bool:
            given = self.headers.get("Authorization") or ""
            scheme, _, token = given.partition(" ")
            return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), view.token.encode())

    return Handler
