"""The embedded scheduler's control endpoint: what ``python -m scheduler apply|get|describe|logs|delete|top`` talk to.

A small JSON-over-HTTP API on loopback (``serve --embedded --api-port``):

* ``POST /apply`` — a YAML (or JSON) body, the file's name in ``X-Source``;
  every document is checked (the simulator's checks and references against
  what is stored) and stored all at once, or nothing is: 200 ``{"applied":
  [...]}`` or 400 ``{"error": "file:line: Pod ns/name: field: problem"}``;
* ``GET /objects/KIND`` and ``GET /objects/KIND/NAMESPACE/NAME`` (``-`` for
  cluster-scoped): what is stored and what was decided, as
  ``{"kind", "key", "manifest", "status"}``; nodes come from the agents' reports;
* ``DELETE /objects/KIND/NAMESPACE/NAME``;
* ``GET /top/nodes`` — real usage, batch allocatable and the offline quota
  from each node's last report.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from scheduler.api.loader import iter_text
from scheduler.api.manifests import ManifestError
from scheduler.modes.embedded.mode import Embedded
from scheduler.modes.embedded.store import Stored

log = logging.getLogger(__name__)

PLURALS = {"pods": "Pod", "podgroups": "PodGroup", "queues": "Queue", "priorityclasses": "PriorityClass",
           "nodes": "Node"}


class ControlServer:
    def __init__(self, embedded: Embedded, *, port: int = 50052, host: str = "127.0.0.1"):
        self.embedded = embedded
        self.httpd = ThreadingHTTPServer((host, port), _handler(self))
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]

    def start(self) -> None:
        threading.Thread(target=self.httpd.serve_forever, name="control", daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- answers -----------------------------------------------------------------------------------
    def apply(self, text: str, source: str) -> tuple[int, dict]:
        try:
            docs = list(iter_text(text, source))
            if not docs:
                return 400, {"error": f"{source}: no objects in it"}
            return 200, {"applied": self.embedded.apply(docs)}
        except ManifestError as exc:
            return 400, {"error": str(exc)}

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
            if stored is None:
                return 404, {"error": f"{kind.lower()} {key} not found"}
            return 200, self._view(stored)
        return 200, [self._view(s) for s in store.load() if s.kind == kind]

    def _view(self, stored: Stored) -> dict:
        out: dict[str, Any] = {"kind": stored.kind, "key": stored.key, "manifest": stored.manifest,
                               "status": dict(stored.status)}
        cache = self.embedded.cache
        if stored.kind == "Pod":
            pod = next((p for p in list(cache.pods.values()) if p.key == stored.key), None)
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
        elif stored.kind == "Queue":
            queue = cache.queues.get(stored.key)
            if queue is not None:
                out["status"]["allocated"] = dict(queue.allocated)
        return out

    def nodes(self) -> list[dict]:
        cache = self.embedded.cache
        now = time.time()
        out = []
        for name, node in sorted(cache.nodes.items()):
            t = cache.telemetry.get(name)
            row: dict[str, Any] = {"kind": "Node", "key": name, "allocatable": dict(node.allocatable),
                                   "ready": t is not None and not t.stale(now, cache.stale_intervals)}
            if t is not None:
                row.update(cpuUsedCores=round(t.cpu_used_cores, 3), memoryUsedBytes=t.memory_used_bytes,
                           batchCpuMillis=t.batch_cpu_millis, batchMemoryBytes=t.batch_memory_bytes,
                           evicting=t.evicting, offlineQuotaMillis=t.report.colocation.offline_cpu_quota_millis,
                           reportAge=round(now - t.received, 1))
            row["pods"] = sum(1 for p in list(cache.pods.values()) if p.node_name == name and p.active)
            out.append(row)
        return out

    def delete(self, kind: str, key: str) -> tuple[int, dict]:
        try:
            return 200, {"result": self.embedded.delete(kind, key)}
        except KeyError as exc:
            return 404, {"error": str(exc.args[0])}


def _handler(server: ControlServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # no access log on stderr
            pass

        def _send(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _route(self) -> tuple[str, str | None] | None:
            parts = [p for p in self.path.split("?")[0].strip("/").split("/") if p]
            if len(parts) >= 2 and parts[0] == "objects" and parts[1] in PLURALS:
                kind = PLURALS[parts[1]]
                if len(parts) == 2:
                    return kind, None
                if len(parts) == 4:
                    ns, name = parts[2], parts[3]
                    return kind, name if ns == "-" else f"{ns}/{name}"
            return None

        def do_GET(self) -> None:  # noqa: N802
            if self.path.startswith("/top/nodes"):
                return self._send(200, server.nodes())
            route = self._route()
            if route is None:
                return self._send(404, {"error": f"no such path {self.path}"})
            self._send(*server.objects(*route))

        def do_POST(self) -> None:  # noqa: N802
            if not self.path.startswith("/apply"):
                return self._send(404, {"error": f"no such path {self.path}"})
            length = int(self.headers.get("Content-Length") or 0)
            text = self.rfile.read(length).decode("utf-8", "replace")
            self._send(*server.apply(text, self.headers.get("X-Source") or "(request)"))

        def do_DELETE(self) -> None:  # noqa: N802
            route = self._route()
            key = route[1] if route is not None else None
            if route is None or key is None:
                return self._send(404, {"error": f"no such path {self.path}"})
            self._send(*server.delete(route[0], key))

    return Handler
