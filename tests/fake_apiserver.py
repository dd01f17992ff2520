"""A small Kubernetes API server over real HTTP, for driving the real ``kubernetes`` client in tests.

It serves the few endpoints the agent uses, with the API server's shapes:

* ``GET /api/v1/pods?fieldSelector=spec.nodeName=N`` — a ``PodList`` with ``metadata.resourceVersion``;
  with ``watch=true&resourceVersion=RV`` a chunked stream of ``{"type", "object"}`` lines for the
  changes after RV, held open until ``timeoutSeconds`` (capped by ``watch_cap``), or an ``ERROR``
  event carrying a 410 ``Status`` when RV is older than the kept history;
* ``GET /api/v1/nodes/N`` — the Node; ``PATCH`` it with a strategic-merge patch of ``spec.taints``
  (replaced whole, as taints have no merge key), 409 when ``metadata.resourceVersion`` is stale;
* ``POST /api/v1/namespaces/NS/pods/NAME/eviction`` — 201 and the pod deleted; 429 when a
  disruption budget blocks it (``blocked``); 404 for an unknown pod.

Objects are plain dicts as the API server would send them.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


def pod(uid: str, name: str, node: str, *, namespace: str = "default", qos_class: str = "Burstable",
        annotations: dict | None = None, requests: dict | None = None, phase: str = "Running",
        priority: int = 0) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"uid": uid, "name": name, "namespace": namespace, "annotations": annotations or {}},
            "spec": {"nodeName": node, "priority": priority,
                     "containers": [{"name": "main", "image": "busybox",
                                     "resources": {"requests": requests or {}}}]},
            "status": {"phase": phase, "qosClass": qos_class}}


class FakeApiServer:
    def __init__(self, *, watch_cap: float = 1.0, history: int = 1000):
        self.pods: dict[tuple[str, str], dict] = {}
        self.nodes: dict[str, dict] = {}
        self.events: list[tuple[int, str, dict]] = []  # (resourceVersion, type, pod)
        self.rv = 1
        self.oldest_rv = 1  # watches from before this get 410 Gone
        self.blocked: set[tuple[str, str]] = set()  # (namespace, name) a PodDisruptionBudget protects
        self.requests: list[tuple[str, str]] = []
        self.watch_cap, self.history = watch_cap, history
        self._closing = False  # set on exit: open watches end
        self._cond = threading.Condition()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> "FakeApiServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._server.shutdown()
        self._server.server_close()

    def core_v1(self):
        """The real client's CoreV1Api, pointed at this server."""
        from kubernetes import client
        config = client.Configuration()
        config.host = self.url
        return client.CoreV1Api(client.ApiClient(config))

    # -- changing the world ---------------------------------------------------------------------
    def put_pod(self, obj: dict) -> None:
        with self._cond:
            key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
            kind = "MODIFIED" if key in self.pods else "ADDED"
            self._record(kind, obj)
            self.pods[key] = obj
            self._cond.notify_all()

    def delete_pod(self, namespace: str, name: str) -> None:
        with self._cond:
            obj = self.pods.pop((namespace, name))
            self._record("DELETED", obj)
            self._cond.notify_all()

    def put_node(self, name: str, labels: dict[str, str], taints: list[dict] | None = None) -> None:
        with self._cond:
            self.rv += 1
            self.nodes[name] = {"apiVersion": "v1", "kind": "Node",
                                "metadata": {"name": name, "labels": labels, "resourceVersion": str(self.rv)},
                                "spec": {"taints": list(taints or [])}}

    def compact(self) -> None:
        """Forget the event history (as etcd compaction does): older watches get 410."""
        with self._cond:
            self.oldest_rv = self.rv + 1
            self.events.clear()

    def _record(self, kind: str, obj: dict) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.events.append((self.rv, kind, json.loads(json.dumps(obj))))
        del self.events[:-self.history]

    # -- HTTP -----------------------------------------------------------------------------------
    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def _json(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _status(self, code: int, reason: str, message: str) -> None:
                self._json(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
                                  "reason": reason, "code": code})

            def do_GET(self) -> None:
                url = urlparse(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                server.requests.append(("GET", url.path))
                if url.path == "/api/v1/pods":
                    node = query.get("fieldSelector", "").removeprefix("spec.nodeName=")
                    if query.get("watch") in ("true", "True", "1"):
                        return self._watch(node, int(query.get("resourceVersion") or 0),
                                           float(query.get("timeoutSeconds") or 60))
                    with server._cond:
                        items = [p for p in server.pods.values() if not node or p["spec"]["nodeName"] == node]
                        return self._json(200, {"kind": "PodList", "apiVersion": "v1",
                                                "metadata": {"resourceVersion": str(server.rv)}, "items": items})
                if url.path.startswith("/api/v1/nodes/"):
                    name = url.path.rsplit("/", 1)[-1]
                    if name in server.nodes:
                        return self._json(200, server.nodes[name])
                    return self._status(404, "NotFound", f'nodes "{name}" not found')
                self._status(404, "NotFound", f"no route for {url.path}")

            def _watch(self, node: str, since: int, timeout: float) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()

                def send(line: dict) -> None:
                    data = (json.dumps(line) + "\n").encode()
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()

                deadline = threading.Event()
                threading.Timer(min(timeout, server.watch_cap), deadline.set).start()
                sent = since
                try:
                    if since and since < server.oldest_rv - 1:
                        send({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                                          "message": "too old resource version", "reason": "Expired",
                                                          "code": 410}})
                    else:
                        while not deadline.is_set() and not server._closing:
                            with server._cond:
                                fresh = [e for e in server.events if e[0] > sent]
                                if not fresh:
                                    server._cond.wait(0.05)
                                    continue
                            for rv, kind, obj in fresh:
                                sent = rv
                                if not node or obj["spec"]["nodeName"] == node:
                                    send({"type": kind, "object": obj})
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_PATCH(self) -> None:
                url = urlparse(self.path)
                server.requests.append(("PATCH", url.path))
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                name = url.path.rsplit("/", 1)[-1]
                if not url.path.startswith("/api/v1/nodes/") or name not in server.nodes:
                    return self._status(404, "NotFound", f'nodes "{name}" not found')
                if "strategic-merge-patch" not in (self.headers.get("Content-Type") or ""):
                    return self._status(415, "UnsupportedMediaType", "this fake takes strategic merge patches")
                with server._cond:
                    node = server.nodes[name]
                    wanted_rv = (body.get("metadata") or {}).get("resourceVersion")
                    if wanted_rv and wanted_rv != node["metadata"]["resourceVersion"]:
                        return self._status(409, "Conflict", "the object has been modified; please apply your "
                                                             "changes to the latest version and try again")
                    if "taints" in (body.get("spec") or {}):
                        node["spec"]["taints"] = body["spec"]["taints"]
                    server.rv += 1
                    node["metadata"]["resourceVersion"] = str(server.rv)
                    return self._json(200, node)

            def do_POST(self) -> None:
                url = urlparse(self.path)
                server.requests.append(("POST", url.path))
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                parts = url.path.strip("/").split("/")
                # api/v1/namespaces/NS/pods/NAME/eviction
                if len(parts) == 7 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods" \
                        and parts[6] == "eviction":
                    key = (parts[3], parts[5])
                    with server._cond:
                        obj = server.pods.get(key)
                    if obj is None:
                        return self._status(404, "NotFound", f'pods "{key[1]}" not found')
                    wanted_uid = ((body.get("deleteOptions") or {}).get("preconditions") or {}).get("uid")
                    if wanted_uid and wanted_uid != obj["metadata"]["uid"]:
                        return self._status(409, "Conflict", "precondition failed: UID mismatch")
                    if key in server.blocked:
                        return self._status(429, "TooManyRequests",
                                            "Cannot evict pod as it would violate the pod's disruption budget.")
                    server.delete_pod(*key)
                    return self._json(201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201})
                self._status(404, "NotFound", f"no route for {url.path}")

        return Handler
