"""The controllers' host in embedded mode: their view of the store, their writes made in it.

:class:`StoreHost` is a :class:`~scheduler.controllers.host.MemoryHost` kept as an informer's cache of the
embedded cluster (the Volcano Jobs and Commands, pods, PodGroups, priority classes, and the Services,
ConfigMaps, Secrets, NetworkPolicies and claims the Jobs' plugins make):

* **filled** from the store at start, and kept up to date by changes the control API and the pod actions
  report (:meth:`StoreHost.note`; drained by :meth:`StoreHost.sync` before each reconcile, on the
  controllers' thread, so the API never waits for a reconcile);
* **status read live**: a pod's phase, node, address, deletion and container statuses (exit codes,
  restarts, readiness) come from the scheduler's cache and the agents' runtime reports; a PodGroup's
  phase and conditions from the cache.  Each change bumps the object's resourceVersion;
* **writes buffered**: a reconcile's creates, updates, annotations, deletions and Job statuses go to the
  store in **one transaction** (:meth:`StoreHost.commit`), then into the scheduler's cache (new pods and
  PodGroups, annotations, deletions) — so the cache never holds what the store lacks.  A commit that
  fails changes nothing and the view is read again from the store;
* **garbage collection** as Kubernetes': an object whose owners (of a kind the store keeps) are all gone
  is deleted, with what it owns in turn; a running pod's deletion is graceful — it is stopped by its
  agent first and shows ``deletionTimestamp`` meanwhile.

Events go to the embedded event log (:meth:`Embedded.record_event`).  Used from one thread (the
controllers'); :meth:`note` from any.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from scheduler.api.manifests import ManifestError, parse_object
from scheduler.api.objects import Pod, PodGroup
from scheduler.controllers.host import AlreadyExists, HostError, MemoryHost, NotFound, merge_annotations, rfc3339
from scheduler.controllers.kinds import (
    COMMAND,
    CONFIGMAP,
    JOB,
    NETWORK_POLICY,
    POD,
    PODGROUP,
    PRIORITY_CLASS,
    PVC,
    SECRET,
    SERVICE,
    Kind,
    copy_tree,
    kind_of,
    meta,
    uid_of,
)
from scheduler.modes.embedded.store import Stored

if TYPE_CHECKING:
    from scheduler.modes.embedded.mode import Embedded

log = logging.getLogger(__name__)

#: the kinds the controllers see, and their names in the store
STORE_KINDS: dict[Kind, str] = {JOB: "Job", COMMAND: "Command", POD: "Pod", PODGROUP: "PodGroup",
                                PRIORITY_CLASS: "PriorityClass", SERVICE: "Service", CONFIGMAP: "ConfigMap",
                                SECRET: "Secret", NETWORK_POLICY: "NetworkPolicy", PVC: "PersistentVolumeClaim"}
BY_STORE_NAME = {name: kind for kind, name in STORE_KINDS.items()}
#: kinds only the controllers read (the scheduler's cache has no use for them)
CONTROLLER_ONLY = frozenset(STORE_KINDS.values()) - {"Pod", "PodGroup", "PriorityClass"}
FINISHED = ("Succeeded", "Failed")


def store_key(kind: Kind, namespace: str, name: str) -> str:
    return f"{namespace or 'default'}/{name}" if kind.namespaced else name


class StoreHost(MemoryHost):
    def __init__(self, embedded: Embedded) -> None:
        super().__init__(uid_seed="scoria-embedded", copy_on_list=False)
        self.embedded = embedded
        self._changes: deque[tuple[str, str, Stored | None]] = deque()
        self._writes: list[Stored | tuple[str, str] | tuple[str, str, dict]] = []
        self._after: list[Callable[[], None]] = []
        self._status_seen: dict[str, tuple] = {}  # pod uid or group key -> what its status was made from
        self._changed = threading.Event()  # set by note(): the controllers' thread wakes for it
        self._garbage = True  # something went away: look for what it owned

    # -- filling and following ---------------------------------------------------------------------
    def load(self, stored: Iterable[Stored]) -> int:
        """The view, from what the store holds (at start, and after a failed commit)."""
        self.objects = {k: {} for k in self.objects}
        self._status_seen.clear()
        n = 0
        for s in stored:
            if s.kind in BY_STORE_NAME:
                self._put(s)
                n += 1
        self._garbage = True
        return n

    def note(self, kind: str, key: str, stored: Stored | None) -> None:
        """Something of ``kind`` at ``key`` changed in the store (None: it was deleted); any thread."""
        if kind in BY_STORE_NAME:
            self._changes.append((kind, key, None if stored is None else
                                  Stored(stored.kind, stored.key, copy_tree(stored.manifest), copy_tree(stored.status))))
            self._changed.set()

    def sync(self) -> int:
        """Fold the noted changes into the view (before a reconcile); how many."""
        n = 0
        while self._changes:
            kind, key, stored = self._changes.popleft()
            n += 1
            if stored is None:
                self.objects.setdefault(BY_STORE_NAME[kind], {}).pop(key, None)
                self._garbage = True
            else:
                self._put(stored)
        return n

    def _put(self, s: Stored) -> None:
        kind = BY_STORE_NAME[s.kind]
        doc = copy_tree(s.manifest)
        doc.setdefault("apiVersion", kind.api_version)
        doc.setdefault("kind", kind.kind)
        m = doc.setdefault("metadata", {})
        if kind == POD:
            m.setdefault("annotations", {}).update(s.status.get("annotations") or {})
            if not m["annotations"]:
                del m["annotations"]
        elif kind == JOB and s.status:
            doc["status"] = copy_tree(s.status)
        old = self.objects.setdefault(kind, {}).get(s.key)
        if old is not None and kind in (POD, PODGROUP):
            doc["status"], doc.setdefault("spec", {})["nodeName"] = old.get("status"), (old.get("spec") or {}).get(
                "nodeName")
            if doc["spec"]["nodeName"] is None:
                del doc["spec"]["nodeName"]
            if "deletionTimestamp" in old["metadata"]:
                m["deletionTimestamp"] = old["metadata"]["deletionTimestamp"]
        m["resourceVersion"] = self._bump()
        self.objects[kind][s.key] = doc

    # -- reading -----------------------------------------------------------------------------------
    def _refresh_pods(self) -> None:
        cache, embedded = self.embedded.cache, self.embedded
        for doc in list(self.objects.get(POD, {}).values()):
            uid = uid_of(doc)
            pod = cache.pods.get(uid)
            if pod is None:
                continue  # its deletion is on its way (noted); until then as it was
            runtime = embedded.runtime_of(uid)
            mark = (pod.phase, pod.node_name, pod.terminating, pod.evicted, pod.reason, runtime)
            if self._status_seen.get(uid) == mark:
                continue
            self._status_seen[uid] = mark
            doc["status"] = _pod_status(pod, runtime, embedded.network.addresses.of(uid))
            if pod.node_name:
                doc.setdefault("spec", {})["nodeName"] = pod.node_name
            if pod.terminating and "deletionTimestamp" not in doc["metadata"]:
                doc["metadata"]["deletionTimestamp"] = rfc3339(datetime.now(UTC))
            doc["metadata"]["resourceVersion"] = self._bump()

    def _refresh_groups(self) -> None:
        cache = self.embedded.cache
        for key, doc in self.objects.get(PODGROUP, {}).items():
            group = cache.podgroups.get(key)
            if group is None:
                continue
            mark = (group.phase, tuple((c.type, c.status, c.reason, c.message) for c in group.conditions))
            if self._status_seen.get(key) == mark:
                continue
            self._status_seen[key] = mark
            doc["status"] = {"phase": group.phase, "conditions": [
                {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message,
                 **({"lastTransitionTime": rfc3339(c.transition)} if c.transition else {})} for c in group.conditions]}
            doc["metadata"]["resourceVersion"] = self._bump()

    # -- writing: buffered, committed once per reconcile ---------------------------------------------------
    def create(self, obj: dict) -> dict:
        """As an API server creates (uid, resourceVersion, creationTimestamp, a pod Pending); the view holds the
        object itself afterwards (no copy is handed back: the controllers never change what they get)."""
        kind = kind_of(obj)
        if kind not in STORE_KINDS:
            raise HostError(f"embedded mode keeps no {kind}")
        table = self.objects.setdefault(kind, {})
        key = store_key(kind, meta(obj).get("namespace", "") if kind.namespaced else "", meta(obj).get("name", ""))
        if key in table:
            raise AlreadyExists(f"{kind} {key} already exists")
        stored = copy_tree(obj)  # a copy of our own
        m = stored.setdefault("metadata", {})
        if kind.namespaced:
            m.setdefault("namespace", "default")
        m["uid"] = m.get("uid") or str(uuid.uuid4())
        m.setdefault("creationTimestamp", rfc3339(datetime.now(UTC)))
        if kind == POD:
            stored.setdefault("status", {}).setdefault("phase", "Pending")
        cached = self._cached(stored, kind) if kind in (POD, PODGROUP) else None
        m["resourceVersion"] = self._bump()
        table[key] = stored
        self.writes += 1
        self._writes.append(Stored(STORE_KINDS[kind], key, _manifest(stored), {}))
        if cached is not None:
            self._after.append(lambda: self.embedded.cache.upsert(cached))
        self._after.append(lambda: self.embedded.controller_wrote(STORE_KINDS[kind], key, stored))
        return stored

    def update(self, obj: dict) -> dict:
        stored = super().update(obj)
        kind = kind_of(stored)
        key = store_key(kind, stored["metadata"].get("namespace", ""), stored["metadata"]["name"])
        self._writes.append(self._to_store(kind, key, stored))
        if kind == PODGROUP:
            group = self._cached(stored, kind)
            assert isinstance(group, PodGroup)

            def regroup() -> None:
                old = self.embedded.cache.podgroups.get(key)
                if old is not None:
                    group.phase, group.conditions = old.phase, old.conditions
                self.embedded.cache.upsert(group)
            self._after.append(regroup)
        self._after.append(lambda: self.embedded.controller_wrote(STORE_KINDS[kind], key, stored))
        return stored

    def annotate(self, kind: Kind, namespace: str, name: str, annotations: Mapping[str, str | None]) -> None:
        super().annotate(kind, namespace, name, annotations)
        key = store_key(kind, namespace, name)
        doc = self.objects[kind][key]
        self._writes.append(self._to_store(kind, key, doc))
        if kind == POD:
            uid = uid_of(doc)

            def reannotate() -> None:
                pod = self.embedded.cache.pods.get(uid)
                if pod is not None:
                    notes = merge_annotations(dict(pod.annotations), annotations)
                    self.embedded.cache.upsert(dataclasses.replace(pod, annotations=notes))
            self._after.append(reannotate)

    def write_status(self, kind: Kind, namespace: str, name: str, status: dict) -> None:
        super().write_status(kind, namespace, name, status)
        key = store_key(kind, namespace, name)
        if kind == JOB:
            self._writes.append(self._to_store(kind, key, self.objects[kind][key]))
        else:  # a status the scheduler keeps elsewhere (a PodGroup's): merged into the stored one
            self._writes.append((STORE_KINDS[kind], key, copy_tree(status)))

    def delete(self, kind: Kind, namespace: str, name: str, *, uid: str = "") -> None:
        key = store_key(kind, namespace, name)
        doc = self.objects.get(kind, {}).get(key)
        if doc is None:
            raise NotFound(f"{kind} {key} not found")
        if uid and uid_of(doc) != uid:
            raise NotFound(f"{kind} {key} with uid {uid} is gone (another has its name)")
        self.writes += 1
        if kind == POD:
            self._delete_pod(key, doc)
            return
        del self.objects[kind][key]
        self._garbage = True
        self._writes.append((STORE_KINDS[kind], key))
        if kind == PODGROUP:
            self._after.append(lambda: self.embedded.cache.remove("PodGroup", key))
        self._after.append(lambda: self.embedded.controller_wrote(STORE_KINDS[kind], key, None))

    def _delete_pod(self, key: str, doc: dict) -> None:
        """A pod that may run is stopped first (graceful); one that cannot run goes at once."""
        uid = uid_of(doc)
        if "deletionTimestamp" in doc["metadata"]:
            return  # going already
        if self.embedded.pod_may_run(uid):
            stamp = rfc3339(datetime.now(UTC))
            doc["metadata"]["deletionTimestamp"] = stamp
            doc["metadata"]["resourceVersion"] = self._bump()
            self._writes.append(("Pod", key, {"deleting": stamp}))
            self._after.append(lambda: self.embedded.pod_deleting(uid))
            return
        del self.objects[POD][key]
        self._garbage = True
        self._writes.append(("Pod", key))
        self._after.append(lambda: self.embedded.pod_gone(uid))

    def emit_event(self, regarding: dict, type: str, reason: str, message: str) -> None:
        self.writes += 1
        self.embedded.record_event(regarding, type, reason, message)

    # -- garbage collection and the commit -----------------------------------------------------------------
    def collect_garbage(self) -> int:
        """Delete what only gone owners owned (owners of a kind the store keeps); how many deletions."""
        if not self._garbage:
            return 0
        deleted = 0
        while self._garbage:
            self._garbage = False
            alive = {uid_of(d) for table in self.objects.values() for d in table.values()}
            for kind, table in list(self.objects.items()):
                for doc in list(table.values()):
                    refs = [r for r in meta(doc).get("ownerReferences") or () if isinstance(r, dict)
                            and (str(r.get("apiVersion")), str(r.get("kind"))) in _OWNER_KINDS]
                    if refs and not any(str(r.get("uid")) in alive for r in refs):
                        namespace = meta(doc).get("namespace", "")
                        try:
                            self.delete(kind, namespace, meta(doc).get("name", ""))
                            deleted += 1
                        except NotFound:
                            pass
        return deleted

    def commit(self) -> int:
        """The buffered writes in one transaction, then into the cache; how many.  StoreFault (nothing kept,
        the view read again) when the store cannot take them."""
        writes, after = self._writes, self._after
        self._writes, self._after = [], []
        if not writes and not after:
            return 0
        try:
            self.embedded.store.commit(writes)
        except Exception:
            self.load(self.embedded.store.load())
            raise
        with self.embedded.cache.lock:
            for step in after:
                step()
        return len(writes)

    def discard(self) -> None:
        """Forget buffered writes (a reconcile that failed): the view is read again from the store."""
        self._writes, self._after = [], []
        self.load(self.embedded.store.load())

    # -- inside --------------------------------------------------------------------------------------------
    def _to_store(self, kind: Kind, key: str, doc: dict) -> Stored:
        if kind == POD:  # a pod's manifest changes; its status is the scheduler's and the agent's, kept
            return Stored("Pod", key, _manifest(doc), self._old_status(kind, key))
        status = copy_tree(doc.get("status") or {}) if kind == JOB else self._old_status(kind, key)
        return Stored(STORE_KINDS[kind], key, _manifest(doc), status)

    def _old_status(self, kind: Kind, key: str) -> dict:
        old = self.embedded.store.get(STORE_KINDS[kind], key)
        return old.status if old is not None else {}

    @staticmethod
    def _cached(doc: dict, kind: Kind) -> Pod | PodGroup:
        try:
            obj = parse_object(_manifest(doc, keep_phase=True), "controller")
        except ManifestError as exc:  # a controller made something the scheduler cannot read
            raise HostError(str(exc)) from None
        if not isinstance(obj, (Pod, PodGroup)):
            raise HostError(f"controller: expected a {kind.kind}, read a {type(obj).__name__}")
        return obj


_OWNER_KINDS = {(k.api_version, k.kind) for k in STORE_KINDS}


def _manifest(doc: dict, *, keep_phase: bool = False) -> dict:
    """What the store keeps of a view object: no status, no resourceVersion, no binding.  Shallow: it shares the
    rest with the view (written out as JSON at the commit, read by the manifest reader)."""
    out = {k: v for k, v in doc.items() if k != "status"}
    out["metadata"] = {k: v for k, v in (doc.get("metadata") or {}).items()
                       if k not in ("resourceVersion", "deletionTimestamp")}
    if kind_of(out) == POD and isinstance(out.get("spec"), dict) and "nodeName" in out["spec"]:
        out["spec"] = {k: v for k, v in out["spec"].items() if k != "nodeName"}  # the binding: the scheduler's
    if keep_phase:
        out["status"] = {"phase": (doc.get("status") or {}).get("phase", "Pending")} if kind_of(out) == POD else {}
    return out


def _pod_status(pod: Pod, runtime: dict | None, ip: str | None) -> dict[str, Any]:
    """A pod's status as a kubelet would report it: phase, address, container statuses from its runtime."""
    if pod.phase in FINISHED or pod.evicted:
        phase = pod.phase if pod.phase in FINISHED else "Failed"
    elif pod.node_name and runtime is not None and runtime.get("phase") in ("Running", *FINISHED):
        phase = "Running"  # the scheduler records Succeeded/Failed from the same report
    else:
        phase = "Pending"  # bound or not, until its agent says its containers run
    status: dict[str, Any] = {"phase": phase}
    if pod.reason:
        status["reason"] = "Evicted" if pod.evicted else pod.reason
    if ip and pod.node_name:
        status["podIP"] = ip
        status["podIPs"] = [{"ip": ip}]
    containers = (runtime or {}).get("containers") or []
    if containers:
        status["containerStatuses"] = [_container_status(c) for c in containers]
    return status


def _container_status(c: dict) -> dict:
    state = c.get("state")
    if state == "running":
        shown: dict[str, Any] = {"running": {}}
    elif state == "terminated":
        shown = {"terminated": {"exitCode": int(c.get("exitCode") or 0)}}
    else:
        shown = {"waiting": {}}
    return {"name": c.get("name", ""), "ready": state == "running", "restartCount": int(c.get("restarts") or 0),
            "state": shown}
