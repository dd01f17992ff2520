"""Builders for manifests (dicts, as YAML would give them) used by tests and scenario files.

Scenario files may use the compact forms below instead of full manifests:

``node:``      ``{name, cpu, memory, pods, labels, taints: ["k=v:Effect"], unschedulable, extra: {res: n}}``
``queue:``     ``{name, weight, capability, guarantee, deserved, reclaimable, parent, state}``
``podgroup:``  ``{name, namespace, minMember, queue, priorityClassName, minResources, annotations}``
``pods:``      ``{prefix, count, namespace, group, queue, cpu, memory, extra, nodeName, phase,
               priorityClassName, priority, nodeSelector, tolerations, affinity, annotations}``
``priorityclass:`` ``{name, value, globalDefault}``
"""

from __future__ import annotations

from typing import Any

PG_API = "scheduling.volcano.sh/v1beta1"


def node(name: str, cpu: Any = 8, memory: str = "32Gi", pods: int = 110, *, labels: dict | None = None,
         taints: list[str] | None = None, unschedulable: bool = False, extra: dict | None = None) -> dict:
    alloc = {"cpu": str(cpu), "memory": memory, "pods": str(pods), **{k: str(v) for k, v in (extra or {}).items()}}
    doc: dict = {"apiVersion": "v1", "kind": "Node",
                 "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
                 "spec": {}, "status": {"allocatable": alloc}}
    if taints:
        doc["spec"]["taints"] = [_taint(t) for t in taints]
    if unschedulable:
        doc["spec"]["unschedulable"] = True
    return doc


def _taint(text: str) -> dict:
    keyval, _, effect = text.partition(":")
    key, _, value = keyval.partition("=")
    return {"key": key, "value": value, "effect": effect or "NoSchedule"}


def queue(name: str, weight: int = 1, *, capability: dict | None = None, guarantee: dict | None = None,
          deserved: dict | None = None, reclaimable: bool = True, parent: str | None = None,
          state: str | None = None) -> dict:
    spec: dict = {"weight": weight, "reclaimable": reclaimable}
    if capability:
        spec["capability"] = capability
    if guarantee:
        spec["guarantee"] = {"resource": guarantee}
    if deserved:
        spec["deserved"] = deserved
    if parent:
        spec["parent"] = parent
    doc = {"apiVersion": PG_API, "kind": "Queue", "metadata": {"name": name}, "spec": spec}
    if state:
        doc["status"] = {"state": state}
    return doc


def podgroup(name: str, *, namespace: str = "default", minMember: int = 1, queue: str | None = None,
             priorityClassName: str | None = None, minResources: dict | None = None,
             annotations: dict | None = None, creationTimestamp: str | None = None, phase: str | None = None) -> dict:
    spec: dict = {"minMember": minMember}
    if queue:
        spec["queue"] = queue
    if priorityClassName:
        spec["priorityClassName"] = priorityClassName
    if minResources:
        spec["minResources"] = minResources
    meta: dict = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = annotations
    if creationTimestamp:
        meta["creationTimestamp"] = creationTimestamp
    doc = {"apiVersion": PG_API, "kind": "PodGroup", "metadata": meta, "spec": spec}
    if phase:
        doc["status"] = {"phase": phase}
    return doc


def pod(name: str, *, namespace: str = "default", group: str | None = None, queue: str | None = None,
        cpu: Any = "1", memory: Any = "1Gi", extra: dict | None = None, nodeName: str | None = None,
        phase: str | None = None, priorityClassName: str | None = None, priority: int | None = None,
        nodeSelector: dict | None = None, tolerations: list | None = None, affinity: dict | None = None,
        annotations: dict | None = None, creationTimestamp: str | None = None) -> dict:
    requests = {}
    if cpu is not None:
        requests["cpu"] = str(cpu)
    if memory is not None:
        requests["memory"] = str(memory)
    requests.update({k: str(v) for k, v in (extra or {}).items()})
    container: dict = {"name": "main", "image": "busybox"}
    if requests:
        container["resources"] = {"requests": requests}
    ann = dict(annotations or {})
    if group:
        ann["scheduling.k8s.io/group-name"] = group
    if queue:
        ann["scheduling.volcano.sh/queue-name"] = queue
    meta: dict = {"name": name, "namespace": namespace}
    if ann:
        meta["annotations"] = ann
    if creationTimestamp:
        meta["creationTimestamp"] = creationTimestamp
    spec: dict = {"schedulerName": "scoria", "containers": [container]}
    for key, value in (("nodeName", nodeName), ("priorityClassName", priorityClassName), ("priority", priority),
                       ("nodeSelector", nodeSelector), ("tolerations", tolerations), ("affinity", affinity)):
        if value is not None:
            spec[key] = value
    doc = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if phase or nodeName:
        doc["status"] = {"phase": phase or "Running"}
    return doc


def pods(prefix: str, count: int, **kwargs) -> list[dict]:
    return [pod(f"{prefix}-{i}", **kwargs) for i in range(count)]


def priority_class(name: str, value: int, globalDefault: bool = False) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, "globalDefault": globalDefault}


def expand(item: dict) -> list[dict]:
    """One scenario entry (compact or full manifest) -> manifests."""
    if "apiVersion" in item or "kind" in item:
        return [item]
    if len(item) != 1:
        raise ValueError(f"scenario object must have exactly one of node/queue/podgroup/pods/priorityclass: {item}")
    (kind, args), = item.items()
    args = dict(args)
    if kind == "node":
        return [node(args.pop("name"), **args)]
    if kind == "queue":
        return [queue(args.pop("name"), **args)]
    if kind == "podgroup":
        return [podgroup(args.pop("name"), **args)]
    if kind == "pods":
        return pods(args.pop("prefix"), args.pop("count", 1), **args)
    if kind == "pod":
        return [pod(args.pop("name"), **args)]
    if kind == "priorityclass":
        return [priority_class(args.pop("name"), **args)]
    raise ValueError(f"unknown scenario object kind {kind!r}")
