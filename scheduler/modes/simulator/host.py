"""The simulator's controller host: the controllers' objects in memory, with pods and PodGroups mirrored into
the scheduler's cache, so that the real controllers and the real scheduler work on one cluster.

Pods and PodGroups a controller creates become cache objects (read by the same manifest reader as the
files' objects); the status the controllers read back is the cache's: a bound pod is Running on its node
(the simulator's kubelet stand-in), an evicted pod is gone, a PodGroup has the phase the scheduler gave it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from datetime import datetime

from scheduler.api.manifests import ManifestError, parse_object
from scheduler.api.objects import Pod, PodGroup
from scheduler.cluster.cache import ClusterCache
from scheduler.controllers.host import HostError, MemoryHost, merge_annotations, rfc3339
from scheduler.controllers.kinds import POD, PODGROUP, Kind, kind_of

SOURCE = "controller"


class SimulatorHost(MemoryHost):
    def __init__(self, cache: ClusterCache, clock: Callable[[], datetime]) -> None:
        super().__init__(clock=clock, uid_seed="scoria-simulator", copy_on_list=False)
        self.cache = cache
        self.created_pods: list[str] = []  # uids, in creation order
        self.created_groups: list[str] = []  # namespace/name, in creation order

    # -- reading: the cache's state ---------------------------------------------------------------------
    def _refresh_pods(self) -> None:
        table = self.objects.get(POD, {})
        for key, doc in list(table.items()):
            pod = self.cache.pods.get(doc["metadata"]["uid"])
            if pod is None or pod.evicted:
                del table[key]  # an evicted pod is deleted (its record stays in the cache for the report)
                continue
            status, spec = doc.setdefault("status", {}), doc.setdefault("spec", {})
            if status.get("phase") != pod.phase or (pod.node_name and spec.get("nodeName") != pod.node_name):
                status["phase"] = pod.phase
                if pod.node_name:
                    spec["nodeName"] = pod.node_name
                doc["metadata"]["resourceVersion"] = self._bump()  # a change the controllers must see

    def _refresh_groups(self) -> None:
        table = self.objects.get(PODGROUP, {})
        for key, doc in list(table.items()):
            group = self.cache.podgroups.get(key)
            if group is None:
                del table[key]
                continue
            fresh = {"phase": group.phase,
                     "conditions": [{"type": c.type, "status": c.status, "reason": c.reason, "message": c.message,
                                     **({"lastTransitionTime": rfc3339(c.transition)} if c.transition else {})}
                                    for c in group.conditions]}
            if doc.get("status") != fresh:
                doc["status"] = fresh
                doc["metadata"]["resourceVersion"] = self._bump()

    # -- writing: mirrored into the cache ---------------------------------------------------------------
    def create(self, obj: dict) -> dict:
        stored = super().create(obj)
        kind = kind_of(stored)
        if kind == POD:
            pod = self._parse(stored, Pod)
            assert isinstance(pod, Pod)
            self.cache.upsert(pod)
            self.created_pods.append(pod.uid)
        elif kind == PODGROUP:
            group = self._parse(stored, PodGroup)
            assert isinstance(group, PodGroup)
            self.cache.upsert(group)
            self.created_groups.append(group.key)
        return stored

    def update(self, obj: dict) -> dict:
        stored = super().update(obj)
        if kind_of(stored) == PODGROUP:
            group = self._parse(stored, PodGroup)
            assert isinstance(group, PodGroup)
            old = self.cache.podgroups.get(group.key)
            if old is not None:
                group.phase, group.conditions = old.phase, old.conditions
            self.cache.upsert(group)
        return stored

    def annotate(self, kind: Kind, namespace: str, name: str, annotations: Mapping[str, str | None]) -> None:
        super().annotate(kind, namespace, name, annotations)
        if kind != POD:
            return
        doc = self.objects[POD][f"{namespace}/{name}"]
        pod = self.cache.pods.get(doc["metadata"]["uid"])
        if pod is not None:
            self.cache.upsert(dataclasses.replace(pod, annotations=merge_annotations(dict(pod.annotations), annotations)))

    def _remove(self, kind: Kind, key: str) -> None:
        doc = self.objects.get(kind, {}).get(key)
        super()._remove(kind, key)
        if doc is None:
            return
        if kind == POD:
            self.cache.remove_pod(doc["metadata"]["uid"])
        elif kind == PODGROUP:
            self.cache.remove("PodGroup", key)

    @staticmethod
    def _parse(doc: dict, expected: type[Pod] | type[PodGroup]) -> Pod | PodGroup:
        try:
            obj = parse_object(doc, SOURCE)
        except ManifestError as exc:  # a controller made something the scheduler cannot read
            raise HostError(str(exc)) from None
        if not isinstance(obj, expected):
            raise HostError(f"{SOURCE}: expected a {expected.__name__}, read a {type(obj).__name__}")
        return obj
