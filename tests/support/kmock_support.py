"""kmock's Kubernetes emulator (PyPI ``kmock``, by kopf's author) served over real HTTP from a background thread,
for tests that run the scheduler against an API server emulator this project did not write.

Nothing here changes how kmock answers: ``kmock.KubernetesEmulator`` is used as it ships, with no reaction of
ours added.  This helper only runs it (an asyncio loop in a thread, ``kmock.Server`` on 127.0.0.1 and a free
port), declares the resources it serves (kmock answers 404 for a resource it has not been told of and holds
no object of), stores objects the way a fixture does (:meth:`KmockApiServer.seed`: no watch sees them), posts
them the way a client does (:meth:`KmockApiServer.create`: the open watches see them), and reads back what
it stored (every version of each object) and every request it received.
"""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import kmock

# what the scheduler's own informers and writers touch: resource -> namespaced.  Namespaces are declared, and
# kmock 0.8 fails their list anyway (500: tests/e2e/test_kmock.py, namespaces).  The Job and PodGroup
# controllers' kinds (Volcano Jobs and Commands, Services, ConfigMaps, ..., ReplicaSets, batch Jobs) are not:
# kmock answers 404, as a cluster without them would, and the controllers have nothing to do.
RESOURCES = {
    "v1/pods": True, "v1/nodes": False, "v1/events": True, "v1/namespaces": False,
    "scheduling.volcano.sh/v1beta1/queues": False, "scheduling.volcano.sh/v1beta1/podgroups": True,
    "scheduling.k8s.io/v1/priorityclasses": False, "policy/v1/poddisruptionbudgets": True,
    "coordination.k8s.io/v1/leases": True,
}


@dataclass(frozen=True)
class Seen:
    """One request as kmock recorded it (copied out of its loop)."""

    id: int
    method: str
    path: str
    params: dict[str, str]
    data: Any
    action: str | None  # kmock's reading of it: LIST, WATCH, FETCH, CREATE, UPDATE, DELETE, or None
    name: str | None
    subresource: str | None


class KmockApiServer:
    """kmock's emulator on 127.0.0.1:<free port>; ``url`` goes into a kubeconfig."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="kmock", daemon=True)
        self._stopping: asyncio.Event | None = None
        self._done: Future[None] = Future()
        self._emulator: kmock.KubernetesEmulator | None = None
        self.url = ""

    def __enter__(self) -> KmockApiServer:
        self._thread.start()
        started: Future[None] = Future()
        asyncio.run_coroutine_threadsafe(self._serve(started), self.loop)
        started.result(timeout=30)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._stopping is not None:
                self.loop.call_soon_threadsafe(self._stopping.set)
                self._done.result(timeout=10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=10)

    async def _serve(self, started: Future[None]) -> None:
        self._stopping = asyncio.Event()
        try:
            async with kmock.KubernetesEmulator() as emulator, kmock.Server(emulator) as server:
                for resource, namespaced in RESOURCES.items():
                    emulator.resources[resource] = kmock.ResourceInfo(namespaced=namespaced)
                self._emulator = emulator
                self.url = str(server.url).rstrip("/")
                started.set_result(None)
                await self._stopping.wait()
            self._done.set_result(None)
        except BaseException as exc:  # report it to whoever waits, in this thread or the test's
            if not started.done():
                started.set_exception(exc)
            self._done.set_exception(exc)

    @property
    def emulator(self) -> kmock.KubernetesEmulator:
        assert self._emulator is not None, "not started"
        return self._emulator

    def _in_loop(self, fn: Any) -> Any:
        """``fn()`` run in kmock's loop (its objects are not meant for other threads)."""
        async def run() -> Any:
            return fn()
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout=10)

    # -- objects ------------------------------------------------------------------------------------------
    def seed(self, resource: str, obj: dict) -> None:
        """Store ``obj`` directly, as a test fixture does (before the scheduler lists; no watch sees it)."""
        meta = obj["metadata"]
        key = (resource, meta.get("namespace"), meta["name"])
        self._in_loop(lambda: self.emulator.objects.__setitem__(key, obj))

    def create(self, path: str, obj: dict) -> tuple[int, dict]:
        """POST ``obj`` to ``path`` over HTTP as any client would (the open watches see it): status, body."""
        async def post() -> tuple[int, dict]:
            async with self.emulator.post(path, json=obj) as resp:
                return resp.status, await resp.json(content_type=None)
        return asyncio.run_coroutine_threadsafe(post(), self.loop).result(timeout=10)

    def history(self, resource: str, name: str, namespace: str | None = None) -> list[dict | None]:
        """Every version kmock stored of the object, oldest first (None: deleted); [] if never seen."""
        def read() -> list[dict | None]:
            key = (kmock.resource(resource), namespace, name)  # kmock's `in` does not parse a string key
            if key not in self.emulator.objects:
                return []
            return [None if v is None else _plain(v) for v in self.emulator.objects[key].history]
        return self._in_loop(read)

    def get(self, resource: str, name: str, namespace: str | None = None) -> dict | None:
        """The object as stored now; None if absent or deleted."""
        versions = self.history(resource, name, namespace)
        return versions[-1] if versions else None

    # -- requests -----------------------------------------------------------------------------------------
    def requests(self) -> list[Seen]:
        """Every request kmock received so far, in order."""
        def read() -> list[Seen]:
            return [Seen(id=r.id, method=str(r.method.value), path=r.url.path, params=dict(r.params),
                         data=_plain(r.data), action=r.action.value if r.action is not None else None,
                         name=r.name, subresource=r.subresource) for r in self.emulator]
        return self._in_loop(read)


def _plain(value: Any) -> Any:
    """A deep copy as plain JSON values (kmock's views are not plain dicts), safe in another thread."""
    return json.loads(json.dumps(value, default=lambda v: v.raw if isinstance(v, kmock.ObjectVersion) else dict(v)))
