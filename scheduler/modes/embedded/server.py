"""The embedded scheduler's control API: what ``python -m scheduler apply|get|describe|logs|delete|top`` talk to.

Pods run as root in embedded mode, so whoever may apply a pod may run
commands as root: the API is a Unix socket in the state folder
(``STATE/control.sock``), ``0600`` for the scheduler's user (root), or ``0660``
for a group granted with ``serve --api-group`` — never a TCP port.  JSON over
HTTP/1.1:

* ``POST /apply`` — a YAML (or JSON) body of at most :data:`MAX_BODY` bytes, the
  file's name in ``X-Source``, or several files at once (``Content-Type``
  :data:`FILES_TYPE`, ``{"files": [{"name", "text"}]}``: what ``apply -f FOLDER``
  sends); every document is checked (the simulator's checks, strict fields,
  references against what is stored, what an update may change) and what changed
  is stored all at once, or nothing is: 200 ``{"applied": [names], "results":
  [{"name", "result": created|configured|unchanged}]}`` or 400 ``{"error":
  "file:line: Pod ns/name: field: problem"}``;
* ``GET /objects/KIND`` and ``GET /objects/KIND/NAMESPACE/NAME`` (``-`` for
  cluster-scoped): what is stored and what was decided, as
  ``{"kind", "key", "manifest", "status"}``; nodes come from the agents' reports;
* ``DELETE /objects/KIND/NAMESPACE/NAME``;
* ``GET /top/nodes`` — real usage, batch allocatable and the offline quota
  from each node's last report; ``GET /top/pods`` — each pod's real usage;
* ``GET /events`` and ``GET /events/KIND/NAMESPACE/NAME`` — the events kept
  (:mod:`.events`), all of them or those about one object;
* ``GET /watch/VERSION`` — answered ``{"version": N}`` as soon as something
  changed since ``VERSION`` (:mod:`.changes`), else after
  :data:`WATCH_SECONDS` with the same version: ``get -w`` lists again each time
  it is answered.  At most :data:`MAX_WATCHES` wait at once (more are
  answered 503), so watchers never take every connection;
* ``POST /series`` — ``{"chart": {"line": number}}``, a point for each line of
  the web view's plots (:mod:`.series`), for figures only a workload knows;
* for ``python -m scheduler job|queue`` (vcctl's words): ``POST /objects/KIND`` creates one object from a
  JSON manifest (201; 409 when it exists; 400 when refused), ``PUT /objects/queues/-/NAME/status`` with
  ``{"state": "Open"|"Closed"}`` opens or closes a Queue.

KIND is pods, podgroups, queues, priorityclasses, nodes, namespaces, or what Volcano Jobs bring: jobs,
commands (the ``batch.volcano.sh`` and ``bus.volcano.sh`` ones), configmaps, secrets, and — made by the Jobs'
plugins — services, networkpolicies, persistentvolumeclaims.

Names in paths are percent-encoded path segments and must be Kubernetes names
(DNS-1123), else 400; a query string is refused, so ``DELETE
/objects/pods/default/web?canary`` cannot delete ``web``.

Every request is served on its own thread, never on the scheduling loop or the
report stream: a body is read and parsed before any lock is taken, one apply is
parsed at a time, and what is refused is refused cheaply — a body over the
limit is answered 413 from its headers without being read, a sender that
stalls is cut off, and beyond :data:`MAX_CONNECTIONS` connections are answered
503 at once.
"""

from __future__ import annotations

import json
import logging
import re
import socketserver
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from proto.errors import InputError
from proto.localsock import claim_socket_path, restrict_socket
from scheduler.api.loader import iter_text
from scheduler.api.objects import DEFAULT_QUEUE
from scheduler.modes.embedded.events import Ref
from scheduler.modes.embedded.mode import Conflict, Embedded
from scheduler.modes.embedded.series import Series
from scheduler.modes.embedded.slots import ConnectionSlots
from scheduler.modes.embedded.store import Stored

log = logging.getLogger(__name__)

PLURALS = {"pods": "Pod", "podgroups": "PodGroup", "queues": "Queue", "priorityclasses": "PriorityClass",
           "nodes": "Node", "namespaces": "Namespace", "jobs": "Job", "commands": "Command", "configmaps": "ConfigMap",
           "secrets": "Secret", "services": "Service", "networkpolicies": "NetworkPolicy",
           "persistentvolumeclaims": "PersistentVolumeClaim"}
NAMESPACED = {"Pod", "PodGroup", "Job", "Command", "ConfigMap", "Secret", "Service", "NetworkPolicy",
              "PersistentVolumeClaim"}
MAX_BODY = 4 * 2**20          # bytes of one apply (a manifest file)
MAX_CONNECTIONS = 32          # served at once; more are answered 503
MAX_WATCHES = 8               # GET /watch waiting at once; more are answered 503
WATCH_SECONDS = 20.0          # how long GET /watch waits for a change before answering with the same version
MAX_SERIES_BODY = 64 * 1024   # bytes of one POST /series
READ_TIMEOUT = 30.0           # seconds a connection may stay silent
BODY_DEADLINE = 60.0          # seconds to send a whole body
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL = re.compile(_LABEL)
DNS1123_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")


class Refused(Exception):
    """A request answered with an error status and a one-line message."""

    def __init__(self, status: int, message: str, *, close: bool = False):
        super().__init__(message)
        self.status, self.message, self.close = status, message, close


def check_name(kind: str, name: str, *, namespace: bool = False) -> None:
    """Refused (400) unless ``name`` is a Kubernetes name: a DNS-1123 label for a namespace (63
    characters), a DNS-1123 subdomain for an object (253)."""
    if namespace:
        what, pattern, limit, rule = "namespace", DNS1123_LABEL, 63, "label (lower-case letters, digits and '-'"
    else:
        what, pattern, limit = f"{kind.lower()} name", DNS1123_SUBDOMAIN, 253
        rule = "subdomain (lower-case letters, digits, '-' and '.'"
    if len(name) > limit or not pattern.fullmatch(name):
        shown = name if len(name) <= 80 else name[:80] + "…"
        raise Refused(400, f"invalid {what} {shown!r}: must be a DNS-1123 {rule}; at most {limit} characters)")


class ControlServer:
    def __init__(self, embedded: Embedded, *, socket_path: Path, group: int | None = None,
                 max_body: int = MAX_BODY, max_connections: int = MAX_CONNECTIONS,
                 read_timeout: float = READ_TIMEOUT, body_deadline: float = BODY_DEADLINE,
                 max_watches: int = MAX_WATCHES, watch_seconds: float = WATCH_SECONDS):
        self.embedded = embedded
        self.series = Series()  # the web view's plots (POST /series and the web view's own samples)
        self.max_watches, self.watch_seconds = max_watches, watch_seconds
        self._watches = threading.BoundedSemaphore(max_watches)
        self.socket_path = socket_path
        self.max_body, self.read_timeout, self.body_deadline = max_body, read_timeout, body_deadline
        self._parsing = threading.Lock()  # one apply parsed at a time: they cannot together starve the rest
        self._serving: threading.Thread | None = None
        claim_socket_path(socket_path, "the control socket")
        self.httpd = _UnixHTTPServer(str(socket_path), _handler(self), max_connections)
        try:
            restrict_socket(socket_path, group=group)
        except BaseException:
            self.httpd.server_close()
            socket_path.unlink(missing_ok=True)
            raise

    def start(self) -> None:
        self._serving = threading.Thread(target=self.httpd.serve_forever, name="control", daemon=True)
        self._serving.start()

    def stop(self) -> None:
        if self._serving is not None:  # shutdown() waits for serve_forever, which never ran otherwise
            self.httpd.shutdown()
        self.httpd.server_close()
        self.socket_path.unlink(missing_ok=True)

    # -- answers -----------------------------------------------------------------------------------
    def apply(self, files: list[tuple[str, str]]) -> tuple[int, dict]:
        """Apply ``(source, text)`` files as one transaction; each object's name and what became of it."""
        with self._parsing:
            try:
                docs = []
                for source, text in files:  # parsed here, before apply takes any lock
                    found = list(iter_text(text, source))
                    if not found:
                        return 400, {"error": f"{source}: no objects in it"}
                    docs += found
                applied = self.embedded.apply(docs)
            except InputError as exc:
                return 400, {"error": str(exc)}
        return 200, {"applied": [a.name for a in applied],
                     "results": [{"name": a.name, "result": a.result} for a in applied]}

    def objects(self, kind: str, key: str | None = None) -> tuple[int, Any]:
        if kind == "Node":
            nodes = self.nodes()
            if key is None:
                return 200, nodes
            found = [n for n in nodes if n["key"] == key]
            return (200, found[0]) if found else (404, {"error": f"node {key} not found"})
        store = self.embedded.store
        if key is not None:
            stored = store.get(kind, key)
            if stored is None and (kind, key) == ("Queue", DEFAULT_QUEUE):
                return 200, self._default_queue()
            if stored is None:
                return 404, {"error": f"{kind.lower()} {key} not found"}
            return 200, self._view(stored, self._seen(kind))
        seen = self._seen(kind)
        items = [self._view(s, seen) for s in store.of_kind(kind)]
        if kind == "Queue" and not any(i["key"] == DEFAULT_QUEUE for i in items):
            items.insert(0, self._default_queue())
        return 200, items

    def _default_queue(self) -> dict:
        """Queue ``default`` as it is when nobody applied one: it always exists (Volcano makes it at start)."""
        cache = self.embedded.cache
        with cache.lock:
            queue = cache.queues.get(DEFAULT_QUEUE)
            allocated = dict(queue.allocated) if queue is not None else {}
        manifest = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": DEFAULT_QUEUE},
                    "spec": {"weight": 1, "reclaimable": True}}
        status: dict[str, Any] = {"allocated": allocated}
        if (deserved := cache.queue_deserved.get(DEFAULT_QUEUE)) is not None:
            status["deserved"] = dict(deserved)
        return {"kind": "Queue", "key": DEFAULT_QUEUE, "manifest": manifest, "status": status, "implicit": True}

    def _seen(self, kind: str) -> dict[str, Any]:
        """What the cache adds to the stored objects of ``kind``, by key, read in one pass: a Pod's cached pod;
        a PodGroup's member counts (how many of its pods run, succeeded, failed: Volcano's status counts)."""
        cache = self.embedded.cache
        with cache.lock:
            pods = list(cache.pods.values())
        if kind == "Pod":
            return {p.key: p for p in pods}
        if kind != "PodGroup":
            return {}
        members: dict[str, dict[str, int]] = {}
        for p in pods:
            if p.group_name and p.phase in ("Running", "Succeeded", "Failed"):
                counts = members.setdefault(f"{p.namespace}/{p.group_name}", {})
                counts[p.phase.lower()] = counts.get(p.phase.lower(), 0) + 1
        return members

    def _view(self, stored: Stored, seen: dict[str, Any]) -> dict:
        out: dict[str, Any] = {"kind": stored.kind, "key": stored.key, "manifest": stored.manifest,
                               "status": dict(stored.status)}
        cache = self.embedded.cache
        if stored.kind == "Pod":
            pod = seen.get(stored.key)
            if pod is not None:
                out["status"].setdefault("phase", pod.phase)
                out["status"]["reason"] = pod.reason
                out["status"]["nodeName"] = pod.node_name or out["status"].get("nodeName")
            if out["status"].get("runtime"):  # `logs` reads here: the agent's log root, never a report's path
                meta = stored.manifest.get("metadata") or {}
                log_dir = self.embedded.pod_log_dir(str(meta.get("namespace")), str(meta.get("name")), str(meta.get("uid")))
                out["status"]["runtime"] = {**out["status"]["runtime"], "logDir": str(log_dir) if log_dir else None}
        elif stored.kind == "PodGroup":
            group = cache.podgroups.get(stored.key)
            if group is not None:
                out["status"]["phase"] = group.phase
            out["status"].update(seen.get(stored.key, {}))
        elif stored.kind == "Queue":
            queue = cache.queues.get(stored.key)
            if queue is not None:
                out["status"]["allocated"] = dict(queue.allocated)
                out["status"]["state"] = queue.state
            deserved = cache.queue_deserved.get(stored.key)
            if deserved is not None:
                out["status"]["deserved"] = dict(deserved)
        return out

    def nodes(self) -> list[dict]:
        cache = self.embedded.cache
        now = time.time()
        with cache.lock:  # a consistent copy; the rows are built without it
            nodes = sorted(cache.nodes.items())
            telemetry = dict(cache.telemetry)
            pods = list(cache.pods.values())
        out = []
        for name, node in nodes:
            t = telemetry.get(name)
            cond = self.embedded.nodes.condition(name)
            row: dict[str, Any] = {"kind": "Node", "key": name, "allocatable": dict(node.allocatable),
                                   "labels": dict(node.labels),
                                   "ready": node.ready, "status": cond.status if cond else "Unknown",
                                   "reason": cond.reason if cond else "", "message": cond.message if cond else "",
                                   "since": cond.since if cond else None,
                                   "taints": [{"key": x.key, "value": x.value, "effect": x.effect} for x in node.taints],
                                   "stale": t is None or t.stale(now, cache.stale_intervals)}
            if t is not None:
                row.update(cpuUsedCores=round(t.cpu_used_cores, 3), memoryUsedBytes=t.memory_used_bytes,
                           batchCpuMillis=t.batch_cpu_millis, batchMemoryBytes=t.batch_memory_bytes,
                           evicting=t.evicting, offlineQuotaMillis=t.report.colocation.offline_cpu_quota_millis,
                           reportAge=round(now - t.received, 1))
            row["pods"] = sum(1 for p in pods if p.node_name == name and p.active)
            out.append(row)
        return out

    def create(self, kind: str, body: bytes, source: str) -> tuple[int, Any]:
        """Create one object (a JSON manifest of ``kind``): 409 when it exists, 400 when refused."""
        try:
            doc = json.loads(body)
        except (UnicodeDecodeError, ValueError) as exc:
            return 400, {"error": f"{source}: not JSON ({exc})"}
        if not isinstance(doc, dict) or doc.get("kind") != kind:
            return 400, {"error": f"{source}: expected a {kind} manifest"}
        with self._parsing:
            try:
                return 201, self.embedded.create(doc, source)
            except InputError as exc:
                return 400, {"error": str(exc)}
            except Conflict as exc:
                return 409, {"error": str(exc)}

    def queue_state(self, name: str, body: bytes) -> tuple[int, Any]:
        try:
            state = json.loads(body).get("state")
        except (UnicodeDecodeError, ValueError, AttributeError):
            state = None
        if state not in ("Open", "Closed"):
            return 400, {"error": 'expected {"state": "Open"} or {"state": "Closed"}'}
        try:
            self.embedded.set_queue_state(name, state)
        except KeyError as exc:
            return 404, {"error": str(exc.args[0])}
        return 200, {"result": state}

    def top_pods(self) -> list[dict]:
        """Each pod's real usage as its node's last report measured it (pods no report speaks of are left out)."""
        cache = self.embedded.cache
        with cache.lock:
            reports = [(name, t.report) for name, t in sorted(cache.telemetry.items())]
            known = {p.uid: (p.namespace, p.name) for p in cache.pods.values()}
        out = []
        for node, report in reports:
            for p in report.load.pods:
                ns, name = known.get(p.uid) or (p.namespace, p.name)  # the store's names first: a report's are its own
                if name:
                    out.append({"namespace": ns or "default", "name": name, "node": node, "qos": p.qos.name,
                                "cpuUsedCores": round(p.cpu_used_cores, 3), "memoryUsedBytes": p.memory_used_bytes})
        return out

    def events(self, kind: str | None = None, key: str | None = None) -> tuple[int, list[dict]]:
        """The events kept, or those about one object (a pod's of its current uid, and of none)."""
        if kind is None or key is None:
            return 200, self.embedded.events.list()
        ns, _, name = key.rpartition("/")
        uid = ""
        if kind == "Pod":
            stored = self.embedded.store.get(kind, key)
            uid = str(((stored.manifest.get("metadata") or {}).get("uid")) or "") if stored else ""
        return 200, self.embedded.events.list(Ref(kind, ns, name, uid))

    def watch(self, seen: int) -> tuple[int, dict]:
        """``{"version"}`` once it differs from ``seen``, or after :attr:`watch_seconds`."""
        if not self._watches.acquire(blocking=False):
            raise Refused(503, f"{self.max_watches} watches are waiting already; try again")
        try:
            return 200, {"version": self.embedded.changes.wait(seen, self.watch_seconds)}
        finally:
            self._watches.release()

    def push_series(self, body: bytes) -> tuple[int, dict]:
        try:
            doc = json.loads(body)
        except (UnicodeDecodeError, ValueError) as exc:
            raise Refused(400, f"the body is not JSON ({exc})") from None
        try:
            return 200, {"points": self.series.add(doc)}
        except InputError as exc:
            raise Refused(400, str(exc)) from None

    def delete(self, kind: str, key: str) -> tuple[int, dict]:
        try:
            return 200, {"result": self.embedded.delete(kind, key)}
        except KeyError as exc:
            return 404, {"error": str(exc.args[0])}
        except Conflict as exc:
            return 409, {"error": str(exc)}


class _UnixHTTPServer(ConnectionSlots, socketserver.UnixStreamServer):
    """The control API's server: a thread per connection, at most ``max_connections`` (more get 503 at once)."""

    busy_what = "the control API"

    def __init__(self, path: str, handler: type[BaseHTTPRequestHandler], max_connections: int):
        self.limit_connections(max_connections)
        super().__init__(path, handler)


FILES_TYPE = "application/vnd.scoria.files+json"  # several files in one apply: {"files": [{"name", "text"}]}


def _files(body: bytes) -> list[tuple[str, str]]:
    """The ``(source, text)`` files of a :data:`FILES_TYPE` body (400 when it is not one)."""
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise Refused(400, f"the body is not JSON ({exc})") from None
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, list) or not files or not all(
            isinstance(f, dict) and isinstance(f.get("name"), str) and isinstance(f.get("text"), str) for f in files):
        raise Refused(400, 'expected {"files": [{"name": ..., "text": ...}, ...]} with at least one file')
    return [(f["name"][:1024], f["text"]) for f in files]


def _route(path: str) -> tuple[str, str | None] | None:
    """``(kind, key)`` of an ``/objects/...`` path (names unquoted and checked), None for another path."""
    parts = [unquote(p) for p in path.strip("/").split("/")] if path.strip("/") else []
    if len(parts) < 2 or parts[0] != "objects" or parts[1] not in PLURALS:
        return None
    kind = PLURALS[parts[1]]
    if len(parts) == 2:
        return kind, None
    if len(parts) != 4:
        return None
    ns, name = parts[2], parts[3]
    if kind in NAMESPACED:
        check_name(kind, ns, namespace=True)
    elif ns != "-":
        raise Refused(400, f"{kind} is not namespaced: use /objects/{parts[1]}/-/NAME")
    check_name(kind, name)
    return kind, name if kind not in NAMESPACED else f"{ns}/{name}"


def _handler(server: ControlServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = server.read_timeout  # per read: a silent connection is dropped

        def log_message(self, *args: Any) -> None:  # no access log on stderr
            pass

        def address_string(self) -> str:  # a Unix socket's peer has no address
            return "local"

        def _send(self, status: int, body: Any, *, close: bool = False) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            try:
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client left (a watch ended by Ctrl-C): nobody to tell
                self.close_connection = True

        def _answer(self, work: Any) -> None:
            """Run ``work() -> (status, body)``; a refusal is its status and message, a bug a logged 500."""
            try:
                status, body = work()
            except Refused as r:
                return self._send(r.status, {"error": r.message}, close=r.close)
            except Exception as exc:
                status = getattr(exc, "http_status", None)  # the store failing (a full disk: 507) says how
                if isinstance(status, int):
                    log.error("control API: %s %s: %s", self.command, self.path[:200], exc)
                    return self._send(status, {"error": str(exc)})
                # a bug: keep its traceback in the log; the client gets one line
                log.exception("control API: %s %s failed", self.command, self.path[:200])
                return self._send(500, {"error": f"the scheduler failed on this request ({type(exc).__name__}: "
                                                 f"{exc}); see its log"}, close=True)
            self._send(status, body)

        def _target(self) -> str:
            url = urlsplit(self.path)
            if url.query or url.fragment or "?" in self.path:
                raise Refused(400, f"unexpected query string in {self.path[:200]!r}: names in paths must be "
                                   "percent-encoded", close=self.command != "GET")
            return url.path

        def do_GET(self) -> None:  # noqa: N802
            def work() -> tuple[int, Any]:
                path = self._target()
                if path.rstrip("/") == "/top/nodes":
                    return 200, server.nodes()
                if path.rstrip("/") == "/top/pods":
                    return 200, server.top_pods()
                if path.rstrip("/") == "/events":
                    return server.events()
                if path.startswith("/events/"):
                    route = _route("/objects/" + path[len("/events/"):])
                    if route is None or route[1] is None:
                        return 404, {"error": f"no such path {path[:200]}"}
                    return server.events(*route)
                if path.startswith("/watch/"):
                    seen = path[len("/watch/"):].strip("/")
                    if not seen.isdigit() or len(seen) > 20:
                        return 400, {"error": f"expected /watch/VERSION (a number), got {path[:200]!r}"}
                    return server.watch(int(seen))
                route = _route(path)
                if route is None:
                    return 404, {"error": f"no such path {path[:200]}"}
                return server.objects(*route)
            self._answer(work)

        def do_PUT(self) -> None:  # noqa: N802
            def work() -> tuple[int, Any]:
                path = self._target().rstrip("/")
                if not path.startswith("/objects/queues/-/") or not path.endswith("/status"):
                    raise Refused(404, f"no such path {self.path[:200]}", close=True)
                route = _route(path[: -len("/status")])
                if route is None or route[1] is None:
                    raise Refused(404, f"no such path {self.path[:200]}", close=True)
                return server.queue_state(route[1], self._body())
            self._answer(work)

        def do_POST(self) -> None:  # noqa: N802
            def work() -> tuple[int, Any]:
                target = self._target().rstrip("/")
                if target == "/series":
                    return server.push_series(self._body(limit=MAX_SERIES_BODY))
                if target.startswith("/objects/"):
                    route = _route(target)
                    if route is None or route[1] is not None or route[0] == "Node":
                        raise Refused(404, f"no such path {self.path[:200]}", close=True)
                    return server.create(route[0], self._body(),
                                         unquote(self.headers.get("X-Source") or "(request)")[:1024])
                if target != "/apply":
                    raise Refused(404, f"no such path {self.path[:200]}", close=True)
                source = unquote(self.headers.get("X-Source") or "(request)")[:1024]  # the CLI quotes it
                body = self._body()
                if (self.headers.get("Content-Type") or "").split(";")[0].strip() == FILES_TYPE:
                    return server.apply(_files(body))
                try:
                    text = body.decode("utf-8")
                except UnicodeDecodeError as exc:
                    return 400, {"error": f"{source}: not UTF-8 text (byte {exc.start})"}
                return server.apply([(source, text)])
            self._answer(work)

        def do_DELETE(self) -> None:  # noqa: N802
            def work() -> tuple[int, Any]:
                route = _route(self._target())
                if route is None or route[1] is None:
                    return 404, {"error": f"no such path {self.path[:200]}"}
                return server.delete(route[0], route[1])
            self._answer(work)

        def _body(self, limit: int | None = None) -> bytes:
            """The request body, read before anything else is done with it; refused unread when too big."""
            limit = server.max_body if limit is None else limit
            if self.headers.get("Transfer-Encoding"):
                raise Refused(411, "send the body with a Content-Length (chunked bodies are not accepted)", close=True)
            raw = self.headers.get("Content-Length")
            if raw is None:
                raise Refused(411, "a Content-Length is required", close=True)
            if not raw.strip().isdigit():
                raise Refused(400, f"invalid Content-Length {raw[:40]!r}", close=True)
            length = int(raw)
            if length > limit:
                raise Refused(413, f"request body of {length} bytes is over the limit of {limit} bytes "
                                   f"({limit / 2**20:g} MiB): split it into several files", close=True)
            deadline = time.monotonic() + server.body_deadline
            chunks, got = [], 0
            while got < length:
                if time.monotonic() > deadline:
                    raise Refused(408, f"the body was not sent within {server.body_deadline:g} s", close=True)
                try:
                    chunk = self.rfile.read1(min(65536, length - got))
                except TimeoutError:
                    raise Refused(408, f"the body stalled after {got} of {length} bytes", close=True) from None
                if not chunk:
                    raise Refused(400, f"the body ended after {got} of {length} bytes", close=True)
                chunks.append(chunk)
                got += len(chunk)
            return b"".join(chunks)

    return Handler
