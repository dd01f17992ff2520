"""The cluster cache fed from the API server: informers for every kind the scheduler reads.

Pods (all of them: pending ones this scheduler owns, and every bound pod,
whichever scheduler placed it, for accounting), Nodes, Volcano PodGroups and
Queues, PriorityClasses, Namespaces (their labels, for pod affinity terms'
namespaceSelectors) and PodDisruptionBudgets.

Scheduling starts once the kinds it cannot place pods correctly without are
listed (:meth:`KubeSource.wait_ready`, :attr:`KubeSource.needed`): every kind
but Namespaces.  Only pods whose affinity terms select namespaces by label need
those, so the cache says whether they are known
(:meth:`ClusterCache.set_namespaces_known`: not until the Namespace informer's
first list has been handed on), and until then such pods wait with a reason
saying so (:mod:`scheduler.plugins.shared.podaffinity`) while every other pod
schedules — an API server that will not list namespaces (RBAC without them, an
emulator that fails the list) holds back only those pods.

Each object goes through the same parsing and checks as a manifest
(:func:`scheduler.api.manifests.parse_object`); one that cannot be used is
logged once, counted, and the last good version of it stays in force.  Pods
keep what the scheduler itself knows of them (its pending reason, when it
bound them) across updates from the watch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from scheduler.api.manifests import ManifestError, parse_object
from scheduler.api.objects import Namespace, Node, Pod, PodGroup, PriorityClass, Queue
from scheduler.cluster.cache import ClusterCache
from scheduler.modes.kubernetes.informer import Handler, Informer, key_of

log = logging.getLogger(__name__)

VOLCANO = ("scheduling.volcano.sh", "v1beta1")


class KubeSource:
    """Informers from the API server into ``cache``; ``start`` runs them in threads."""

    def __init__(self, cache: ClusterCache, api_client: Any, *, resync: float = 600.0, watch_timeout: int = 300,
                 on_refused: Callable[[str], None] | None = None,
                 on_deleted: Callable[[str, str], None] | None = None,
                 on_list: Callable[[str], None] | None = None):
        from kubernetes import client

        self.cache = cache
        cache.set_namespaces_known(False)  # until the first list of them has been handed on (see listed below)
        self.on_refused = on_refused or (lambda kind: None)
        self.on_deleted = on_deleted or (lambda kind, key: None)  # (kind, cache key) gone: forget what was written
        self.pdbs: dict[str, dict] = {}
        core = client.CoreV1Api(api_client)
        custom = client.CustomObjectsApi(api_client)
        scheduling = client.SchedulingV1Api(api_client)
        policy = client.PolicyV1Api(api_client)

        def volcano(plural: str) -> Callable[..., Any]:
            def list_fn(**kwargs: Any) -> Any:
                return custom.list_cluster_custom_object(*VOLCANO, plural, **kwargs)
            return list_fn

        counted = on_list or (lambda kind: None)

        def listed(kind: str) -> None:
            counted(kind)
            if kind == "namespaces":  # every Namespace handed on to the cache: selectors can be matched now
                cache.set_namespaces_known(True)

        def informer(kind: str, list_fn: Callable[..., Any], on_upsert: Handler, on_delete: Handler) -> Informer:
            return Informer(kind, list_fn, on_upsert=on_upsert, on_delete=on_delete, resync=resync,
                            watch_timeout=watch_timeout, on_list=listed, type_meta=_TYPE_META[kind])

        # order matters for the first sync: classes and queues before groups, groups and nodes before pods
        self.informers = [
            informer("namespaces", core.list_namespace, self._upsert("Namespace"), self._delete("Namespace")),
            informer("priorityclasses", scheduling.list_priority_class, self._upsert("PriorityClass"),
                     self._delete("PriorityClass")),
            informer("queues", volcano("queues"), self._upsert("Queue"), self._delete("Queue")),
            informer("podgroups", volcano("podgroups"), self._upsert("PodGroup"), self._delete("PodGroup")),
            informer("nodes", core.list_node, self._upsert("Node"), self._delete("Node")),
            informer("pods", core.list_pod_for_all_namespaces, self._upsert_pod, self._delete_pod),
            informer("poddisruptionbudgets", policy.list_pod_disruption_budget_for_all_namespaces,
                     self._upsert_pdb, self._delete_pdb),
        ]
        # the kinds scheduling waits for (see the module's docstring)
        self.needed = [inf for inf in self.informers if inf.kind not in OPTIONAL]
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._warned: set[tuple[str, str, str]] = set()

    def informer(self, kind: str) -> Informer:
        """The informer of ``kind`` (its plural: "pods", "podgroups", ...)."""
        return next(inf for inf in self.informers if inf.kind == kind)

    def start(self) -> None:
        for inf in self.informers:
            t = threading.Thread(target=inf.run, args=(self._stop,), name=f"informer-{inf.kind}", daemon=True)
            t.start()
            self._threads.append(t)

    def wait_synced(self, timeout: float) -> bool:
        """Has every kind been listed once, Namespaces too (waiting at most ``timeout`` seconds for each)?"""
        return all(inf.synced.wait(timeout) for inf in self.informers)

    def wait_ready(self, timeout: float) -> bool:
        """Has every kind scheduling needs (:attr:`needed`) been listed once, so that a first cycle sees the
        whole cluster?  Waits at most ``timeout`` seconds in all."""
        deadline = time.monotonic() + timeout
        return all(inf.synced.wait(max(0.0, deadline - time.monotonic())) for inf in self.needed)

    def ready(self) -> bool:
        """Every kind scheduling needs listed (:meth:`wait_ready` without waiting)."""
        return all(inf.synced.is_set() for inf in self.needed)

    def stop(self, wait: float = 0.5) -> None:
        """Stop every informer, waiting at most ``wait`` seconds in all for their threads.

        A quiet watch ends at once (:meth:`Informer.stop`).  A thread inside a request the server has not
        answered yet (``Informer.asking``: a watch being opened, a list) cannot be woken: it is a daemon,
        hands nothing on once stopped, and ends when the answer or its timeout comes; shutdown does not
        wait for it (it waited 2 s for each such informer, 12 s in all when the API server stalled).
        """
        self._stop.set()
        for inf in self.informers:
            inf.stop()
        deadline = time.monotonic() + wait
        for inf, t in zip(self.informers, self._threads, strict=False):
            if not inf.asking:
                t.join(timeout=max(0.0, deadline - time.monotonic()))

    # -- handlers -----------------------------------------------------------------------------------
    def _parse(self, kind: str, obj: dict) -> Node | Pod | PodGroup | Queue | PriorityClass | Namespace | None:
        try:  # the informer gave it its kind and apiVersion (type_meta), as a list's items lack them
            return parse_object(obj, f"{kind} {key_of(obj)}")
        except ManifestError as exc:
            rv = (obj.get("metadata") or {}).get("resourceVersion") or ""
            if (kind, key_of(obj), rv) not in self._warned:
                self._warned.add((kind, key_of(obj), rv))
                log.warning("ignoring %s (the last good version stays): %s", kind, exc)
            self.on_refused(kind)
            return None

    def _upsert(self, kind: str) -> Handler:
        def handler(obj: dict) -> None:
            parsed = self._parse(kind, obj)
            if parsed is not None:
                self.cache.upsert(parsed)
        return handler

    def _delete(self, kind: str) -> Handler:
        def handler(obj: dict) -> None:
            self.cache.remove(kind, key_of(obj))
            self.on_deleted(kind, key_of(obj))
        return handler

    def _upsert_pod(self, obj: dict) -> None:
        pod = self._parse("Pod", obj)
        if not isinstance(pod, Pod):  # None: refused (the last good version stays)
            return
        with self.cache.lock:
            old = self.cache.pods.get(pod.uid)
            if old is not None:  # what only the scheduler knows of the pod
                if pod.node_name and pod.node_name == old.node_name:
                    pod.bound_at = old.bound_at
                elif old.node_name and not pod.node_name and not pod.terminating:
                    return  # our bind is in flight and the watch has not seen it yet: keep the assumed binding
                if not pod.node_name:
                    pod.reason = old.reason
            if pod.uid in self.cache.evicting and not pod.terminating:
                pod.terminating = True  # our eviction is under way: keep counting it as leaving
            self.cache.upsert(pod)

    def _delete_pod(self, obj: dict) -> None:
        uid = (obj.get("metadata") or {}).get("uid")
        if uid:
            self.cache.remove_pod(uid)
            self.cache.evicting.pop(uid, None)
            self.on_deleted("Pod", uid)

    def _upsert_pdb(self, obj: dict) -> None:
        self.pdbs[key_of(obj)] = obj

    def _delete_pdb(self, obj: dict) -> None:
        self.pdbs.pop(key_of(obj), None)


#: kinds scheduling does not wait for: Namespaces matter only to pods whose affinity terms select namespaces by
#: label, and those wait for them on their own (ClusterCache.namespaces_known)
OPTIONAL = frozenset({"namespaces"})
_TYPE_META = {"namespaces": ("v1", "Namespace"), "priorityclasses": ("scheduling.k8s.io/v1", "PriorityClass"),
              "queues": ("scheduling.volcano.sh/v1beta1", "Queue"),
              "podgroups": ("scheduling.volcano.sh/v1beta1", "PodGroup"), "nodes": ("v1", "Node"),
              "pods": ("v1", "Pod"), "poddisruptionbudgets": ("policy/v1", "PodDisruptionBudget")}
