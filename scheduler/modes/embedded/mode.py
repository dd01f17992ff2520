"""Embedded mode: one machine, the cluster kept in SQLite, pods run by the agent's local runtime.

:class:`Embedded` joins the pieces:

* the **store** (:mod:`scheduler.modes.embedded.store`) holds what was applied and what was
  decided; at start it fills the cache, so a restarted scheduler has every
  pod, group, queue and binding it had;
* **apply/delete** (the ``python -m scheduler apply|delete`` CLI through
  :mod:`scheduler.modes.embedded.server`) check manifests exactly as the simulator does and
  store a whole file or nothing;
* the **effects** persist binds at once (before any agent can hear of them)
  and statuses in one transaction per cycle;
* **pod actions** reconcile, on every report of a node, what should run there
  (pods bound to it) with what its runtime says runs: START what is missing,
  STOP what was deleted, EVICT what was evicted — level-triggered, so an agent
  or scheduler restart converges without duplicates; the runtime's phases
  (Running, Succeeded, Failed, restarts) are recorded on the pods.

A node's report speaks only of the pods bound to that node: a runtime entry for
a pod bound elsewhere, or to no node, is not recorded (whatever phase it
claims) and the node is told to STOP it, since nothing unbound runs there.
Where a pod's logs are is not taken from the report either: the scheduler
knows the agent's log folder (``serve --embedded --agent-state DIR``, default
``--state``/agent, as the README lays it out) and names each pod's folder the
way the agent's runtime does (``logs/<namespace>_<name>_<uid>``,
:meth:`Embedded.pod_log_dir`); the report's ``logDir`` is only compared with
it, and a difference is logged.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from proto.model import PodAction, PodActionKind
from proto.vocab.podcontext import CONTEXT, DEFAULT_POD_CIDR
from scheduler.api.fields import refuse_unknown_fields
from scheduler.api.loader import Workload, check_references
from scheduler.api.manifests import ManifestError, object_id, object_json, parse_object
from scheduler.api.nodereport import shown
from scheduler.api.objects import DEFAULT_QUEUE, Condition, Namespace, Node, Pod, PodGroup, PriorityClass, Queue
from scheduler.api.updates import SERVER_METADATA, update_problem
from scheduler.cluster.cache import ClusterCache
from scheduler.cluster.effects import CacheEffects
from scheduler.controllers.host import rfc3339
from scheduler.modes.base import Mode, PodActions
from scheduler.modes.embedded.changes import Changes
from scheduler.modes.embedded.controllers import EmbeddedControllers, is_controller_kind
from scheduler.modes.embedded.events import KUBELET, NORMAL, WARNING, Events, Ref, stamp
from scheduler.modes.embedded.jobhost import CONTROLLER_ONLY
from scheduler.modes.embedded.lifecycle import LifecycleConfig
from scheduler.modes.embedded.network import PodNetworking
from scheduler.modes.embedded.nodes import NodeLifecycle
from scheduler.modes.embedded.store import Store, Stored, StoreError

if TYPE_CHECKING:
    from scheduler.cluster.effects import Effects
    from scheduler.cycle import Scheduler
    from scheduler.metrics import SchedulerMetrics
    from scheduler.modes.embedded.server import ControlServer
    from scheduler.modes.embedded.web import WebView

log = logging.getLogger(__name__)

RESEND_START_S = 5.0  # a START not reflected in the node's runtime yet is sent again after this
# The manifests of the STARTs in one directive, at most: with one object at most MAX_OBJECT_BYTES, a
# directive stays well under gRPC's 4 MiB message limit however many pods a node is given at once (the
# rest go with the answers to its next reports: pod actions are level-triggered).  A quarter MiB more than three
# objects at the limit: room for each START's context (address, names, the ConfigMaps and Secrets it reads).
START_BUDGET_BYTES = 3 * 2**20 + 2**18
FINISHED = ("Succeeded", "Failed")
AGENT_STATE = "agent"  # the agent's --state under the scheduler's, unless serve --agent-state says otherwise
MAX_RUNTIME_TEXT = 1024  # a runtime reason or message is kept up to this many characters
CREATED, CONFIGURED, UNCHANGED = "created", "configured", "unchanged"  # what apply did, in kubectl's words
_KIND_OF = {Pod: "Pod", PodGroup: "PodGroup", Queue: "Queue", PriorityClass: "PriorityClass", Node: "Node",
            Namespace: "Namespace"}


class Conflict(Exception):
    """A request that cannot be done as things stand (the control API answers 409 with the message)."""


class Applied(NamedTuple):
    """One object of an apply: ``pod/default/web`` and what became of it (created, configured, unchanged)."""

    name: str
    result: str


class Embedded:
    def __init__(self, cache: ClusterCache, store: Store, *, clock: Callable[[], float] = time.time,
                 agent_state: Path | None = None, lifecycle: LifecycleConfig | None = None,
                 pod_cidr: str = DEFAULT_POD_CIDR):
        self.cache, self.store, self.clock = cache, store, clock
        #: pods' addresses and names (a START's context); the Volcano Job controllers
        self.network = PodNetworking(pod_cidr, self._stored_manifest)
        self.controllers = EmbeddedControllers(self)
        self._runtime: dict[str, dict] = {}  # pod uid -> what its node's runtime last said (containers, phase)
        cache.register_ready = False  # a node takes pods once node lifecycle finds its agent reporting and running them
        #: the agent's pod log folder (its --state DIR/logs): logs are read here, never where a report says
        self.log_root = (Path(agent_state) if agent_state is not None else store.path.parent / AGENT_STATE).absolute() / "logs"
        self._lock = threading.Lock()
        self._started: dict[str, float] = {}  # pod uid -> when START was last sent
        self._warned: set[tuple[str, str]] = set()  # (node, what) said once
        self._killing: set[str] = set()  # pods told to stop: their Killing event is recorded once
        #: moves on every change the CLI's watches and the web view wait for
        self.changes = Changes()
        store.on_change = self.changes.bump
        self.events = Events(store, clock)
        self.effects = EmbeddedEffects(self)
        self.nodes = NodeLifecycle(self, lifecycle)

    # -- the store into the cache ----------------------------------------------------------------
    def load(self) -> int:
        """Fill the cache from the store (and the events it kept); how many objects."""
        self.events.load()
        n = 0
        everything = self.store.load()
        self.controllers.host.load(everything)
        for stored in everything:
            if stored.kind in CONTROLLER_ONLY:  # the controllers' alone (their host read them above)
                self._restore_controller_object(stored)
                n += 1
                continue
            try:
                obj = self._object(stored)
                if isinstance(obj, Node):  # registered by reports: not Ready until its agent is heard again
                    obj.ready = False
                    self.cache.registered[obj.name] = ()  # its next report sets its allocatable
                self.cache.upsert(obj)
                n += 1
            except ManifestError as exc:  # stored by an older version, say: keep it stored, say so
                log.error("stored %s %s cannot be used: %s", stored.kind, stored.key, exc)
                continue
            if isinstance(obj, Pod):
                self._restore_pod(obj, stored)
        return n

    def _restore_controller_object(self, stored: Stored) -> None:
        if stored.kind == "Service":
            namespace, _, name = stored.key.partition("/")
            self.network.service(namespace, name, stored.manifest)

    def _restore_pod(self, pod: Pod, stored: Stored) -> None:
        """What a pod had beyond its manifest: its address (if it may still run), its runtime's last word."""
        if isinstance(stored.status.get("runtime"), dict):
            self._runtime[pod.uid] = stored.status["runtime"]
        ip = stored.status.get("podIP")
        if isinstance(ip, str) and pod.node_name and pod.phase not in FINISHED and not pod.evicted:
            self.network.restore(pod.uid, pod.namespace, stored.manifest, ip)

    def _object(self, stored: Stored) -> Node | Pod | PodGroup | Queue | PriorityClass | Namespace:
        doc = copy.deepcopy(stored.manifest)
        status = stored.status
        if stored.kind == "Pod":
            meta, spec = doc.setdefault("metadata", {}), doc.setdefault("spec", {})
            meta.setdefault("annotations", {}).update(status.get("annotations") or {})
            if status.get("nodeName"):
                spec["nodeName"] = status["nodeName"]
            doc["status"] = {"phase": status.get("phase", "Pending")}
            if status.get("deleting") or status.get("evicting"):
                meta["deletionTimestamp"] = status.get("deleting") or status.get("evicting")
        elif stored.kind == "PodGroup" and status.get("phase"):
            doc["status"] = {"phase": status["phase"]}
        elif stored.kind == "Queue" and status.get("state"):  # opened or closed (vcctl queue operate)
            doc["status"] = {"state": status["state"]}
        obj = parse_object(doc, f"store {stored.kind} {stored.key}")
        if isinstance(obj, Pod):
            obj.reason = status.get("reason")
            obj.evicted = bool(status.get("evicted"))
            if obj.evicted:
                obj.node_name = ""
        return obj

    # -- apply and delete --------------------------------------------------------------------------
    def apply(self, docs: list[tuple[Any, str]]) -> list[Applied]:
        """Check every document and store what changed, all at once or nothing; what became of each object.

        ``docs`` are ``(document, source)`` pairs as the loader reads them,
        from one file or several: one apply is one transaction.  As ``kubectl
        apply``: an object that does not exist is *created*, one that does is
        *configured* (replaced by the manifest) or left *unchanged* when the
        manifest is what is stored (Namespaces too).  A pod may change only what kube-apiserver
        lets a pod change (:mod:`scheduler.api.updates`); any other change is
        refused naming the field.  Every field must be one its kind has
        (:mod:`scheduler.api.fields`), every object fit in
        :data:`~scheduler.api.manifests.MAX_OBJECT_BYTES` as JSON.  A refused
        document raises ManifestError, a store that cannot be written
        StoreFault; either way nothing of the request is kept.
        """
        work = Workload()
        parsed: list[tuple[Any, dict]] = []
        others: list[tuple[dict, str]] = []  # Volcano Jobs, Commands, ConfigMaps, Secrets: the controllers'
        for doc, source in docs:
            if not isinstance(doc, dict):
                raise ManifestError(source, "", "expected a Kubernetes object (a mapping)")
            if doc.get("kind") == "Node":
                raise ManifestError(source, object_id(doc), "nodes join by running an agent, not by apply")
            refuse_unknown_fields(doc, source)
            if is_controller_kind(doc):
                object_json(doc, source, object_id(doc))
                doc = copy.deepcopy(doc)
                doc.pop("status", None)
                others.append((doc, source))
                continue
            obj = parse_object(doc, source)
            object_json(doc, source, object_id(doc))  # too large or not JSON: refused before any lock is taken
            doc = copy.deepcopy(doc)
            doc.pop("status", None)  # what the scheduler and the agents decide is theirs to write
            for name in ("labels", "annotations"):  # null is absent (as Kubernetes reads it); stored as absent
                if name in doc["metadata"] and doc["metadata"][name] is None:
                    del doc["metadata"][name]
            work.add(obj, source)
            parsed.append((obj, doc))
        with self._lock, self.cache.lock:
            self._check(work)
            stored: list[Stored] = []
            out: list[tuple[Any, Applied]] = []  # (the object to cache, or None: unchanged; what apply did)
            for obj, doc in parsed:
                kind = _KIND_OF[type(obj)]
                key = getattr(obj, "key", None) or obj.name
                source = work.sources[(kind, key)]
                old = self.store.get(kind, key)
                if isinstance(obj, Pod):
                    doc, obj = self._new_pod(obj, doc, source) if old is None else self._pod_update(obj, doc, old,
                                                                                                    source)
                    object_json(doc, source, f"{kind} {key}")  # with its uid and creation time it must still fit
                name = f"{kind.lower()}/{key}"
                if old is not None and old.manifest == doc:
                    out.append((None, Applied(name, UNCHANGED)))
                    continue
                if isinstance(obj, Queue) and old is not None and old.status.get("state"):
                    obj.state = old.status["state"]  # opened or closed apart from its manifest (queue operate)
                if old is not None and (problem := update_problem(kind, old.manifest, doc)):
                    raise ManifestError(source, f"{kind} {key}", problem)
                stored.append(Stored(kind, key, doc, old.status if old else {}))
                out.append((obj, Applied(name, CREATED if old is None else CONFIGURED)))
            jobs = {f"{(d.get('metadata') or {}).get('namespace') or 'default'}/{(d.get('metadata') or {}).get('name')}"
                    for d, _ in others if d.get("kind") == "Job"}
            for doc, source in others:
                admitted = self.controllers.admit(doc, source, queues=work.queues,
                                                  priority_classes=work.priority_classes, jobs=jobs)
                old = self.store.get(admitted.kind, admitted.key)
                name = f"{admitted.kind.lower()}/{admitted.key}"
                if old is not None and old.manifest == admitted.manifest:
                    out.append((None, Applied(name, UNCHANGED)))
                    continue
                stored.append(admitted)
                out.append((None, Applied(name, CREATED if old is None else CONFIGURED)))
            self.store.put(stored)  # one transaction: every file of the request, or nothing
            for changed, _ in out:
                if changed is not None:
                    self.cache.upsert(changed)
        for s in stored:  # the controllers' view follows (reconciled on their thread)
            self.controllers.host.note(s.kind, s.key, s)
        return [applied for _, applied in out]

    def create(self, doc: dict, source: str) -> dict:
        """Create one object (``job run``, ``queue create``): Conflict when it exists; the object as stored."""
        kind, key = _kind_key(doc)
        if self.store.get(kind, key) is not None or (kind, key) == ("Queue", DEFAULT_QUEUE):
            raise Conflict(f"{kind.lower()} {key} already exists")
        state = (doc.get("status") or {}).get("state") if kind == "Queue" and isinstance(doc.get("status"), dict) \
            else None
        self.apply([(doc, source)])
        if state in ("Open", "Closed") and state != "Open":
            self.set_queue_state(key, state)
        stored = self.store.get(kind, key)
        return {**stored.manifest, "status": stored.status} if stored is not None else doc

    def set_queue_state(self, name: str, state: str) -> None:
        """Open or close a Queue (Volcano keeps it in ``status.state``); KeyError when there is none."""
        with self._lock, self.cache.lock:
            stored = self.store.get("Queue", name)
            if stored is None and name == DEFAULT_QUEUE:
                stored = Stored("Queue", name, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                                                "metadata": {"name": name}, "spec": {"weight": 1,
                                                                                     "reclaimable": True}}, {})
            if stored is None:
                raise KeyError(f"queue {name} not found")
            self.store.put([Stored("Queue", name, stored.manifest, {**stored.status, "state": state})])
            queue = self.cache.queues.get(name)
            if queue is not None:
                self.cache.upsert(dataclasses.replace(queue, state=state, implicit=False))

    def _new_pod(self, pod: Pod, doc: dict, source: str) -> tuple[dict, Pod]:
        """A pod as it is stored: namespace, uid and creation time filled in; one of an existing uid refused."""
        if (doc.get("spec") or {}).get("nodeName"):
            raise ManifestError(source, f"Pod {pod.key}", "spec.nodeName: leave placement to the scheduler")
        meta = doc.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        meta["uid"] = meta.get("uid") or str(uuid.uuid4())
        if (other := self.cache.pods.get(meta["uid"])) is not None:  # the cache and the agents know pods by uid
            raise ManifestError(source, f"Pod {pod.key}",
                                f"metadata.uid: {meta['uid']!r} is already the uid of Pod {other.key}")
        meta.setdefault("creationTimestamp", rfc3339(datetime.now(UTC)))
        obj = parse_object(doc, source)
        assert isinstance(obj, Pod)
        return doc, obj

    def _pod_update(self, pod: Pod, doc: dict, old: Stored, source: str) -> tuple[dict, Pod]:
        """A pod that exists, as the manifest would leave it: what the server set (uid, creation time) kept, its
        binding and phase kept; a manifest naming another uid or another node refused."""
        meta, old_meta = doc.setdefault("metadata", {}), old.manifest.get("metadata") or {}
        meta.setdefault("namespace", "default")
        if meta.get("uid") and meta["uid"] != old_meta.get("uid"):
            raise ManifestError(source, f"Pod {pod.key}", f"metadata.uid: {meta['uid']!r} is not the uid of the pod "
                                f"that exists ({old_meta.get('uid')!r}); delete it first to make another")
        for name in SERVER_METADATA:
            if name in old_meta and name not in meta:
                meta[name] = old_meta[name]
        spec = doc.get("spec") or {}
        if spec.get("nodeName"):
            if spec["nodeName"] != old.status.get("nodeName"):
                raise ManifestError(source, f"Pod {pod.key}", "spec.nodeName: leave placement to the scheduler")
            del spec["nodeName"]  # the binding is kept in the status, as it was
        current = self.cache.pods.get(str(old_meta.get("uid")))
        obj = self._object(Stored("Pod", pod.key, doc, old.status))
        assert isinstance(obj, Pod)
        if current is not None:  # what the cache knows beyond the store
            obj.bound_at, obj.nominated_node = current.bound_at, current.nominated_node
            obj.terminating = obj.terminating or current.terminating
        return doc, obj

    def _check(self, work: Workload) -> None:
        """References may point at what the cluster already has as well as at this file."""
        full = Workload(nodes=list(self.cache.nodes.values()), queues=[q for q in self.cache.queues.values()
                                                                       if not q.implicit],
                        podgroups=list(self.cache.podgroups.values()),
                        priority_classes=list(self.cache.priority_classes.values()))
        full.pods, full.sources = [], dict(work.sources)
        for obj in work.pods + work.podgroups + work.queues + work.priority_classes:
            tables: dict[type, list[Any]] = {Pod: full.pods, PodGroup: full.podgroups, Queue: full.queues,
                                             PriorityClass: full.priority_classes}
            table = tables[type(obj)]
            table[:] = [o for o in table if getattr(o, "key", o.name) != getattr(obj, "key", obj.name)] + [obj]
        for group in full.podgroups + full.queues + full.priority_classes:
            kind = _KIND_OF[type(group)]
            full.sources.setdefault((kind, getattr(group, "key", group.name)), "(stored)")
        check_references(full)

    def delete(self, kind: str, key: str) -> str:
        """Delete an object; a pod that runs is stopped first (its record goes once the agent has), unless its
        node is gone (nothing there could confirm it: the record goes at once).  A node goes with what is
        stored of it; its pods go with it when it is not Ready (its agent is gone), else its agent's next
        report registers it again, as a kubelet does."""
        with self._lock, self.cache.lock:
            if kind == "Node":
                return self._delete_node(key)
            if kind == "Queue" and key == DEFAULT_QUEUE:
                raise Conflict(f"queue {DEFAULT_QUEUE} always exists (as in Volcano): it cannot be deleted")
            stored = self.store.get(kind, key)
            if stored is None:
                raise KeyError(f"{kind.lower()} {key} not found")
            if kind == "Pod":
                pod = self._pod(key)
                if pod is not None and pod.node_name and pod.phase not in FINISHED and not self.nodes.gone(
                        pod.node_name):
                    stamp = rfc3339(datetime.now(UTC))
                    self.store.update_status([("Pod", key, {"deleting": stamp})])
                    pod.terminating = True
                    self.cache.generation += 1
                    return "deleting"
                self.store.delete(kind, key)
                if pod is not None:
                    self.pod_gone(pod.uid)
                self.controllers.host.note(kind, key, None)
                return "deleted"
            self.store.delete(kind, key)
            if kind not in CONTROLLER_ONLY:
                self.cache.remove(kind, key)
            self.controllers.host.note(kind, key, None)  # what it owned goes too (the controllers collect it)
            return "deleted"

    def _delete_node(self, name: str) -> str:
        node = self.cache.nodes.get(name)
        if node is None and self.store.get("Node", name) is None:
            raise KeyError(f"node {name} not found")
        pods = [p for p in self.cache.pods.values() if p.node_name == name] if self.nodes.gone(name) else []
        self.store.delete("Node", name)
        self.cache.remove("Node", name)
        self.cache.registered.pop(name, None)
        self.nodes.forget(name)
        for pod in pods:
            self.forget_pod(pod)
        return f"deleted (and its {len(pods)} pod(s))" if pods else "deleted"

    def forget_pod(self, pod: Pod) -> None:
        """The pod's record is gone, from the store and the cache (a node that still runs it is told to stop it)."""
        self.store.delete("Pod", pod.key)
        self.pod_gone(pod.uid)
        self.controllers.host.note("Pod", pod.key, None)

    # -- what the controllers' host asks of the cluster ------------------------------------------------------
    def pod_gone(self, uid: str) -> None:
        """A pod's record is gone (the caller deleted it from the store): out of the cache, its address freed."""
        pod = self.cache.pods.get(uid)
        self.cache.remove_pod(uid)
        self._started.pop(uid, None)
        self._killing.discard(uid)
        self._runtime.pop(uid, None)
        if pod is not None:
            self.network.released(uid, pod.namespace)

    def pod_may_run(self, uid: str) -> bool:
        """Whether a pod may be running on a node that can still confirm it stopped (a deletion waits for it)."""
        pod = self.cache.pods.get(uid)
        return pod is not None and bool(pod.node_name) and pod.phase not in FINISHED and not pod.evicted \
            and not self.nodes.gone(pod.node_name)

    def pod_deleting(self, uid: str) -> None:
        """A controller deleted a running pod: it is stopped by its node, then its record goes."""
        pod = self.cache.pods.get(uid)
        if pod is not None:
            pod.terminating = True
            self.cache.generation += 1

    def controller_wrote(self, kind: str, key: str, manifest: dict | None) -> None:
        """The controllers stored (or deleted: None) an object; a Service changes what names resolve."""
        if kind == "Service":
            namespace, _, name = key.partition("/")
            self.network.service(namespace, name, manifest)

    def record_event(self, regarding: dict, type: str, reason: str, message: str) -> None:
        """An event of the controllers about ``regarding`` (an object reference)."""
        self.events.emit(regarding, type, reason, message)

    def runtime_of(self, uid: str) -> dict | None:
        """What the pod's node last said of it (phase, containers), None before it said anything."""
        return self._runtime.get(uid)

    def _stored_manifest(self, kind: str, key: str) -> dict | None:
        stored = self.store.get(kind, key)
        return stored.manifest if stored is not None else None

    def evicted(self, pod: Pod, reason: str) -> None:
        self._evicted(pod, reason)

    def _pod(self, key: str) -> Pod | None:
        return next((p for p in self.cache.pods.values() if p.key == key), None)

    # -- reconciling with a node's runtime ---------------------------------------------------------------
    def pod_log_dir(self, namespace: str, name: str, uid: str) -> Path | None:
        """Where the agent's runtime writes a pod's logs (``agent.embedded.records.StateDir.log_dir``), or
        None for a name that cannot be a folder of the log root."""
        folder = f"{namespace}_{name}_{uid}"
        return None if "/" in folder or "\0" in folder else self.log_root / folder

    def pod_actions(self, node: str, view: Any) -> list[PodAction]:
        """What ``node``'s agent should do, given the pods its runtime reports (``view.runtime``)."""
        runtime = {p.uid: p for p in getattr(view, "runtime", ())}
        actions: list[PodAction] = []
        changes: list[tuple[str, str, dict]] = []
        gone: list[Pod] = []
        now = self.clock()
        budget = START_BUDGET_BYTES
        with self._lock, self.cache.lock:
            by_uid = {p.uid: p for p in self.cache.pods.values()}
            for uid, r in runtime.items():
                pod = by_uid.get(uid)
                if pod is None:  # deleted here (or never ours): it must not run
                    actions.append(PodAction(PodActionKind.STOP, uid, r.namespace, r.name, "deleted"))
                    continue
                if pod.node_name != node:  # not this node's to speak of, nor to run
                    self._warn_once(node, "foreign", "node %s reports pod %s, which is %s; not recorded, told to "
                                    "stop it (said once per node)", node, pod.key,
                                    f"bound to {pod.node_name}" if pod.node_name else "not bound")
                    actions.append(PodAction(PodActionKind.STOP, uid, pod.namespace, pod.name, "not bound to this node"))
                    continue
                stored = self.store.get("Pod", pod.key)
                status = stored.status if stored else {}
                changes.extend(self._observe(node, pod, r, status))
                if status.get("deleting"):
                    actions.append(self._stop(pod, PodActionKind.STOP, "deleted"))
                elif status.get("evicting") and r.phase not in FINISHED:
                    actions.append(self._stop(pod, PodActionKind.EVICT, status.get("reason") or "evicted"))
                elif r.phase in FINISHED and pod.phase in FINISHED and not status.get("evicting"):
                    # its end is recorded: the runtime may let it go (it keeps finished pods until told)
                    actions.append(PodAction(PodActionKind.STOP, pod.uid, pod.namespace, pod.name, "finished"))
                elif r.phase not in FINISHED and self.network.names_changed(pod.uid, pod.namespace) and budget > 0:
                    # the names its namespace resolves changed: START again carries them (nothing else changes)
                    start = self._start(pod)
                    budget -= len(start.pod_json)
                    actions.append(start)
            for pod in by_uid.values():
                if pod.node_name != node or pod.uid in runtime:
                    continue
                stored = self.store.get("Pod", pod.key)
                status = stored.status if stored else {}
                if status.get("deleting") or (status.get("evicting") and _owned(stored)):
                    gone.append(pod)  # stopped on the node: the record goes (an owned pod's eviction deletes it,
                    # as Kubernetes' eviction does: its controller makes another)
                elif status.get("evicting"):
                    changes.append(("Pod", pod.key, {"evicting": None, "evicted": True, "phase": "Failed"}))
                    self._evicted(pod, status.get("reason") or "Evicted")
                elif pod.phase not in FINISHED and now - self._started.get(pod.uid, 0.0) >= RESEND_START_S:
                    start = self._start(pod)
                    size = len(start.pod_json.encode())
                    if size > budget and budget < START_BUDGET_BYTES:
                        continue  # this directive is full: with the answer to the node's next report
                    budget -= size
                    self._started[pod.uid] = now
                    actions.append(start)
            self.store.update_status(changes)
            for pod in gone:
                self.store.delete("Pod", pod.key)
                self.pod_gone(pod.uid)
                self.controllers.host.note("Pod", pod.key, None)
        return actions

    def _start(self, pod: Pod) -> PodAction:
        """START with the pod's manifest and its context: address, names, the ConfigMaps and Secrets it reads."""
        manifest = self._manifest(pod)
        manifest[CONTEXT] = self.network.context(pod.uid, pod.namespace, manifest)
        return PodAction(PodActionKind.START, pod.uid, pod.namespace, pod.name, pod_json=json.dumps(manifest))

    def _observe(self, node: str, pod: Pod, r: Any, status: dict) -> list[tuple[str, str, dict]]:
        """Record what ``node``'s runtime says of a pod bound to it: phase, reason, restarts, containers (each
        with its state's reason and times, and how its previous run ended); what changed since the last report
        (``status``, as stored) becomes events.

        The log folder recorded is the scheduler's own (:meth:`pod_log_dir`); the report's is only compared.
        """
        log_dir = self.pod_log_dir(pod.namespace, pod.name, pod.uid)
        if r.log_dir and r.log_dir != str(log_dir):
            self._warn_once(node, "log-dir", "node %s's agent writes pod logs to %s, not under %s: `logs` reads only "
                            "the latter (serve --agent-state DIR names the agent's --state; said once per node)",
                            node, shown(r.log_dir), self.log_root)
        containers = [_container(c) for c in r.containers]
        self._container_events(node, pod, containers, (status.get("runtime") or {}).get("containers") or [])
        reason, message = r.reason[:MAX_RUNTIME_TEXT], r.message[:MAX_RUNTIME_TEXT]
        fields: dict[str, Any] = {"runtime": {"phase": r.phase, "reason": reason, "message": message,
                                              "restarts": r.restarts, "logDir": str(log_dir) if log_dir else None,
                                              "containers": containers}}
        if r.phase in FINISHED and pod.phase not in FINISHED:
            if r.reason == "Evicted" and not status.get("evicting"):  # the agent's own (node pressure)
                self.events.record(_ref(pod), WARNING, "Evicted", message or "evicted by the node's agent",
                                   source=KUBELET, host=node)
            reason = f"{reason}: {message}" if message else reason
            fields.update(phase=r.phase, reason=reason or None)
            pod.phase, pod.reason = r.phase, reason or None
            self.cache.generation += 1
            self.network.released(pod.uid, pod.namespace)
        summary = {"phase": r.phase, "containers": containers}
        if self._runtime.get(pod.uid) != summary:  # a container started, ended or restarted: the controllers look
            self._runtime[pod.uid] = summary
            self.controllers.kick()
        return [("Pod", pod.key, fields)]

    def _container_events(self, node: str, pod: Pod, now: list[dict], before: list[dict]) -> None:
        """Started, BackOff and Failed, as the kubelet records them, for what changed since the last report.

        A run is Started when the report shows it running anew (another pid) — or shows it ended already, a run
        that began since the last report (its start time moved) and came and went between two reports."""
        was = {c.get("name"): c for c in before if isinstance(c, dict)}
        for c in now:
            b, name, running = was.get(c["name"]) or {}, c["name"], c["state"] == "running"
            ended = c if c["state"] == "terminated" else (c.get("lastState") or {})
            unseen = bool(c.get("startedAt")) and c.get("startedAt") != b.get("startedAt") and \
                ended.get("reason") != "StartError"
            if (running and (b.get("state") != "running" or b.get("pid") != c["pid"])) or (not running and unseen):
                self.events.record(_ref(pod), NORMAL, "Started", f"Started container {name}", source=KUBELET, host=node)
            if c["state"] == "waiting" and c.get("reason") in BACKING_OFF and (
                    b.get("state"), b.get("reason"), b.get("restarts")) != (c["state"], c.get("reason"), c["restarts"]):
                if ended.get("reason") == "StartError" or c.get("reason") == "StartError":
                    self.events.record(_ref(pod), WARNING, "Failed", ended.get("message") or c.get("message") or
                                       f"container {name} could not start", source=KUBELET, host=node)
                self.events.record(_ref(pod), WARNING, "BackOff", f"Back-off restarting failed container {name} in "
                                   f"pod {pod.key}", source=KUBELET, host=node)
            elif c["state"] == "terminated" and c.get("reason") == "StartError" and b.get("state") != "terminated":
                self.events.record(_ref(pod), WARNING, "Failed", c.get("message") or f"container {name} could not "
                                   "start", source=KUBELET, host=node)

    def _warn_once(self, node: str, what: str, message: str, *args: object) -> None:
        if (node, what) in self._warned:
            log.debug(message, *args)
            return
        self._warned.add((node, what))
        log.warning(message, *args)

    def _stop(self, pod: Pod, kind: PodActionKind, reason: str) -> PodAction:
        manifest = self._manifest(pod)
        grace = int(((manifest.get("spec") or {}).get("terminationGracePeriodSeconds")) or 30)
        if pod.uid not in self._killing:  # told on every report until it has stopped: recorded once
            self._killing.add(pod.uid)
            for c in (manifest.get("spec") or {}).get("containers") or []:
                self.events.record(_ref(pod), NORMAL, "Killing", f"Stopping container {c.get('name')}",
                                   source=KUBELET, host=pod.node_name)
        return PodAction(kind, pod.uid, pod.namespace, pod.name, reason, grace_period_seconds=grace)

    def _evicted(self, pod: Pod, reason: str) -> None:
        pod.evicted, pod.phase, pod.node_name, pod.terminating = True, "Failed", "", False
        pod.reason = reason
        self.cache.generation += 1
        self.network.released(pod.uid, pod.namespace)

    def _manifest(self, pod: Pod) -> dict:
        stored = self.store.get("Pod", pod.key)
        doc = copy.deepcopy(stored.manifest) if stored else {}
        doc.setdefault("metadata", {}).setdefault("annotations", {}).update(
            (stored.status.get("annotations") or {}) if stored else {})
        doc.setdefault("spec", {})["nodeName"] = pod.node_name
        return doc


def _kind_key(doc: dict) -> tuple[str, str]:
    """The store's kind and key of a manifest."""
    meta = doc["metadata"] if isinstance(doc.get("metadata"), dict) else {}
    kind, name = str(doc.get("kind") or ""), str(meta.get("name") or "")
    if kind in ("Queue", "PriorityClass", "Node", "Namespace"):
        return kind, name
    return kind, f"{meta.get('namespace') or 'default'}/{name}"


def _owned(stored: Stored | None) -> bool:
    """Whether a stored pod has a controller (a Volcano Job, say) that makes it again when it is gone."""
    refs = ((stored.manifest.get("metadata") or {}).get("ownerReferences") or ()) if stored is not None else ()
    return any(isinstance(r, dict) and r.get("controller") is True for r in refs)


BACKING_OFF = ("CrashLoopBackOff", "BackOff", "StartError")  # a container waiting to start again (the runtime's words)


def _ref(pod: Pod) -> Ref:
    return Ref("Pod", pod.namespace, pod.name, pod.uid)


def _container(c: Any) -> dict:
    """A container as the runtime reports it, as stored (kubectl's names: state, reason, exit code, times, and the
    previous run's end as ``lastState``)."""
    out: dict[str, Any] = {"name": c.name, "state": c.state, "exitCode": c.exit_code, "restarts": c.restarts,
                           "pid": c.pid}
    if getattr(c, "reason", ""):
        out["reason"] = c.reason[:MAX_RUNTIME_TEXT]
    if getattr(c, "message", ""):
        out["message"] = c.message[:MAX_RUNTIME_TEXT]
    for name in ("started_ns", "finished_ns"):
        if getattr(c, name, 0) > 0:
            out["startedAt" if name == "started_ns" else "finishedAt"] = _iso(getattr(c, name))
    last = getattr(c, "last_termination", None) if _has(c, "last_termination") else None
    if last is not None:
        out["lastState"] = {"exitCode": last.exit_code, "reason": last.reason[:MAX_RUNTIME_TEXT],
                            "message": last.message[:MAX_RUNTIME_TEXT],
                            **({"startedAt": _iso(last.started_ns)} if last.started_ns > 0 else {}),
                            **({"finishedAt": _iso(last.finished_ns)} if last.finished_ns > 0 else {})}
    return out


def _has(message: Any, name: str) -> bool:
    """Whether ``name`` is set: a report's entry is the wire message itself (whose unset message fields read as
    empty ones, so only HasField tells), or a dataclass of :mod:`proto.model` (None when unset)."""
    try:
        return bool(message.HasField(name))
    except AttributeError:
        return getattr(message, name, None) is not None
    except ValueError:  # a wire message without such a field (an older agent's)
        return False


def _iso(ns: int) -> str:
    try:
        return stamp(ns / 1e9)
    except (OverflowError, OSError, ValueError):  # a time no calendar holds: not shown
        return ""


class EmbeddedEffects(CacheEffects):
    """The cache's effects, persisted: binds at once, statuses once per cycle, evictions handed to the agent."""

    def __init__(self, embedded: Embedded):
        super().__init__(embedded.cache, embedded.clock)
        self.embedded = embedded
        self._changes: dict[tuple[str, str], dict] = {}
        self._lock = threading.Lock()
        self._binds: list[tuple[Pod, str, dict[str, str]]] = []
        self._seen_generation = -1

    def bind(self, pod: Pod, node: str, annotations: dict[str, str]) -> bool:
        """Kept until the cycle's end (:meth:`flush`): stored with the cycle's statuses in one transaction, and
        only then in the cache — once bound in the cache an agent may start it, and a crash must not forget it."""
        with self._lock:
            self._binds.append((pod, node, dict(annotations)))
        return True

    def evict(self, pod: Pod, reason: str) -> None:
        """The agent stops it (EVICT); until it has, it counts as leaving."""
        evicting = {"evicting": rfc3339(datetime.now(UTC)), "reason": f"Evicted: {reason}"}
        self.embedded.store.update_status([("Pod", pod.key, evicting)])
        self.embedded.events.record(_ref(pod), NORMAL, "Preempted", reason)
        with self.cache.lock:
            current = self.cache.pods.get(pod.uid)
            if current is not None:
                current.terminating = True
                self.cache.generation += 1

    def pod_reason(self, pod: Pod, reason: str | None) -> None:
        if pod.reason != reason:
            self._note(("Pod", pod.key), {"reason": reason})
            if reason and not pod.node_name:  # as kube-scheduler: once per new reason (repeats fold into it)
                self.embedded.events.record(_ref(pod), WARNING, "FailedScheduling", reason)
        super().pod_reason(pod, reason)

    def group_status(self, group: PodGroup, phase: str, conditions: list[Condition]) -> bool:
        changed = super().group_status(group, phase, conditions)
        if changed and not group.implicit:
            for c in conditions:  # Volcano records why a gang cannot be scheduled on its PodGroup
                if c.type == "Unschedulable" and c.status == "True" and c.message:
                    self.embedded.events.record(Ref("PodGroup", group.namespace, group.name), WARNING,
                                                "Unschedulable", c.message)
        if not group.implicit:
            self._note(("PodGroup", group.key), {"phase": phase, "conditions": [
                {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message} for c in conditions]})
        return changed

    def queue_allocated(self, name: str, allocated: dict[str, int]) -> None:
        super().queue_allocated(name, allocated)
        self._note(("Queue", name), {"allocated": dict(allocated)})

    def _note(self, key: tuple[str, str], fields: dict) -> None:
        with self._lock:
            self._changes.setdefault(key, {}).update(fields)

    def flush(self) -> int:
        """Write the cycle's binds and statuses, all in one transaction (a store that fails them fails the cycle:
        nothing of it is kept, its pods are placed again), then bind in the cache; a cycle that bound, evicted or
        changed a phase has the controllers look at once."""
        with self._lock:
            changes, self._changes = self._changes, {}
            binds, self._binds = self._binds, []
        writes: list[Any] = [(kind, key, fields) for (kind, key), fields in changes.items()]
        placed = []
        network = self.embedded.network
        for pod, node, notes in binds:
            stored = self.embedded.store.get("Pod", pod.key)
            if stored is None:  # deleted while the cycle ran
                continue
            ip = network.bound(pod.uid, pod.namespace, stored.manifest)
            writes.append(("Pod", pod.key, {"nodeName": node, "phase": "Running", "reason": None,
                                            "annotations": notes, "podIP": ip}))
            placed.append((pod, node, notes))
        try:
            self.embedded.store.commit(writes)
        except Exception:
            for pod, _, _ in placed:
                network.released(pod.uid, pod.namespace)
            raise
        for pod, node, notes in placed:
            super().bind(pod, node, notes)
            self.embedded.events.record(_ref(pod), NORMAL, "Scheduled", f"Successfully assigned {pod.key} to {node}")
        self.embedded.events.flush()
        if self.cache.generation != self._seen_generation:
            self._seen_generation = self.cache.generation
            self.embedded.controllers.kick()
        return len(writes)


class EmbeddedMode(Mode):
    """``serve --embedded``: the cluster in SQLite under ``--state``, the control API for the kubectl-like
    CLI on a Unix socket there, and pod actions telling each node's local runtime what to run.

    Whoever reaches the control API can run commands as root, so the state folder is ``0700`` (``0710``
    for ``api_group``), the store ``0600`` and the socket ``0600`` (``0660`` owned by ``api_group``)."""

    name = "embedded"
    CONTROL_SOCKET = "control.sock"  # the control API, in the state folder
    AGENT_SOCKET = "agent.sock"      # the agents' report stream, in the state folder (unless --listen says otherwise)

    WEB_URL = "web.url"              # the web view's address with its token, in the state folder (0600)

    def __init__(self, state_dir: Path, *, api_socket: Path | None = None, api_group: int | None = None,
                 agent_state: Path | None = None, lifecycle: LifecycleConfig | None = None,
                 web_port: int | None = None, web_address: str = "127.0.0.1", pod_cidr: str = DEFAULT_POD_CIDR) -> None:
        super().__init__(register_nodes=True)  # an agent that reports is a node
        self.pod_cidr = pod_cidr
        self.state_dir, self.api_group = state_dir, api_group
        self.lifecycle = lifecycle or LifecycleConfig()
        self._stop: threading.Event | None = None
        self.api_socket = api_socket or state_dir / self.CONTROL_SOCKET
        self.agent_state = agent_state  # where the agent keeps its pods' logs (None: state_dir/agent)
        self.embedded: Embedded | None = None
        self.control: ControlServer | None = None
        self.web_port, self.web_address = web_port, web_address  # None: no web view
        self.web: WebView | None = None

    def start(self, cache: ClusterCache, stop: threading.Event, metrics: SchedulerMetrics) -> Effects | None:
        from proto.localsock import private_dir, private_file

        private_dir(self.state_dir, group=self.api_group)
        files = [self.state_dir / f"store.sqlite{end}" for end in ("", "-wal", "-shm")]
        for path in files:  # an earlier version's may be readable: tightened before use
            private_file(path)
        try:
            store = Store(self.state_dir / "store.sqlite")
        except OSError as exc:
            raise StoreError(str(exc)) from None
        for path in files:  # and new ones too (serve's umask already makes them so)
            private_file(path)
        self.embedded = Embedded(cache, store, agent_state=self.agent_state, lifecycle=self.lifecycle,
                                 pod_cidr=self.pod_cidr)
        log.info("embedded store %s: %d object(s) loaded", store.path, self.embedded.load())
        self._stop = stop
        return self.embedded.effects

    def attach(self, scheduler: Scheduler) -> None:
        from scheduler.modes.embedded.server import ControlServer

        assert self.embedded is not None, "start() first"
        self.control = ControlServer(self.embedded, socket_path=self.api_socket, group=self.api_group)
        self.control.start()
        log.info("control API on %s", self.api_socket)
        if self.web_port is not None:
            from scheduler.modes.embedded.web import WebView

            self.web = WebView(self.control, address=self.web_address, port=self.web_port,
                               url_file=self.state_dir / self.WEB_URL)
            self.web.start()
        self.embedded.nodes.start(self._stop or threading.Event())
        # Volcano Jobs: a Job naming no scheduler is this one's; pods wait for enqueue when it is configured
        self.embedded.controllers.configure(scheduler_names=scheduler.scheduler_names,
                                            wait_for_admission="enqueue" in scheduler.config.actions)
        self.embedded.controllers.start(self._stop or threading.Event())

    def pod_actions(self) -> PodActions | None:
        return self.embedded.pod_actions if self.embedded is not None else None

    def close(self, scheduler: Scheduler) -> None:
        if self.web is not None:
            self.web.stop()
        if self.control is not None:
            self.control.stop()
        if self.embedded is not None:
            self.embedded.nodes.join()  # the loop ends with serve's stop event
            self.embedded.controllers.join()
            scheduler.effects.flush()
            self.embedded.store.close()
