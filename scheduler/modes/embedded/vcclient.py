"""``python -m scheduler job|queue`` against the embedded scheduler: :class:`EmbeddedBackend`, the
:class:`scheduler.controllers.vcctl.Backend` over the control socket (:mod:`.server`).

Jobs and Queues come back Kubernetes-shaped (the stored manifest with its ``status``: a Job's as its
controller wrote it, a Queue's state and allocation); a Job is created with ``POST /objects/jobs`` (409:
AlreadyExists; 400: refused by admission, an InputError naming the field), a Command with ``POST
/objects/commands``; a Queue is opened or closed through ``PUT /objects/queues/-/NAME/status`` and its
weight changed by applying it again.  A server that cannot be reached is a VcctlError with the reason.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from proto.errors import InputError
from scheduler.controllers.vcctl import AlreadyExists, NotFound, VcctlError
from scheduler.modes.embedded.client import CtlError, request

JSON = {"Content-Type": "application/json"}


class EmbeddedBackend:
    def __init__(self, server: str) -> None:
        self.server = server

    # -- Jobs --------------------------------------------------------------------------------------
    def list_jobs(self, namespace: str | None) -> list[dict]:
        items = self._call("GET", "/objects/jobs")
        return [_object(i) for i in items if namespace is None or i["key"].partition("/")[0] == namespace]

    def get_job(self, namespace: str, name: str) -> dict:
        return _object(self._call("GET", _path("jobs", namespace, name), what=f"job {namespace}/{name}"))

    def create_job(self, doc: dict) -> dict:
        return self._create("jobs", doc)

    def delete_job(self, namespace: str, name: str) -> None:
        self._call("DELETE", _path("jobs", namespace, name), what=f"job {namespace}/{name}")

    def create_command(self, doc: dict) -> dict:
        return self._create("commands", doc)

    def job_events(self, namespace: str, name: str) -> list[dict]:
        events = self._call("GET", "/events/jobs/" + "/".join(quote(p, safe="") for p in (namespace, name)))
        return [{"type": e.get("type", ""), "reason": e.get("reason", ""), "message": e.get("message", ""),
                 "time": e.get("lastTimestamp") or e.get("firstTimestamp") or ""} for e in events]

    # -- Queues ------------------------------------------------------------------------------------
    def list_queues(self) -> list[dict]:
        return [_object(i) for i in self._call("GET", "/objects/queues")]

    def get_queue(self, name: str) -> dict:
        return _object(self._call("GET", _path("queues", "-", name), what=f"queue {name}"))

    def create_queue(self, doc: dict) -> dict:
        return self._create("queues", doc)

    def set_queue_state(self, name: str, state: str) -> None:
        self._call("PUT", _path("queues", "-", name) + "/status", json.dumps({"state": state}).encode(),
                   what=f"queue {name}")

    def set_queue_weight(self, name: str, weight: int) -> None:
        queue = self.get_queue(name)
        manifest = {k: v for k, v in queue.items() if k != "status"}
        manifest.setdefault("spec", {})["weight"] = weight
        self._call("POST", "/apply", json.dumps(manifest).encode(), headers={"X-Source": f"queue-{name}.json"})

    def delete_queue(self, name: str) -> None:
        self._call("DELETE", _path("queues", "-", name), what=f"queue {name}")

    # -- inside ------------------------------------------------------------------------------------
    def _create(self, plural: str, doc: dict) -> dict:
        return _object_or_doc(self._call("POST", f"/objects/{plural}", json.dumps(doc).encode(),
                                         headers={"X-Source": f"{plural[:-1]} {doc.get('metadata', {}).get('name')}"}))

    def _call(self, method: str, path: str, body: bytes | None = None, *, what: str = "",
              headers: dict[str, str] | None = None) -> Any:
        try:
            return request(self.server, method, path, body, {**(JSON if body is not None else {}), **(headers or {})})
        except CtlError as exc:
            if exc.http_status == 404:
                raise NotFound(f"{what} not found" if what else str(exc)) from None
            if exc.http_status == 409:
                raise AlreadyExists(str(exc)) from None
            if exc.http_status == 400:
                raise InputError(str(exc)) from None
            raise VcctlError(str(exc), exc.status) from None


def _path(plural: str, namespace: str, name: str) -> str:
    return f"/objects/{plural}/{quote(namespace, safe='')}/{quote(name, safe='')}"


def _object(item: dict) -> dict:
    """A control API item as the API server would give it: the manifest, its status beside it."""
    out = dict(item.get("manifest") or {})
    status = {k: v for k, v in (item.get("status") or {}).items() if k not in ("runtime", "annotations")}
    if status:
        out["status"] = status
    return out


def _object_or_doc(answer: Any) -> dict:
    return answer if isinstance(answer, dict) else {}
