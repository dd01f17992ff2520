"""Builders for manifests (dicts, as YAML would give them) used by tests and scenario files.

Scenario files may use the compact forms below instead of full manifests:

``node:``      ``{name, cpu, memory, pods, labels, taints: ["k=v:Effect"], unschedulable, extra: {res: n}}``
``queue:``     ``{name, weight, capability, guarantee, deserved, reclaimable, parent, state}``
``podgroup:``  ``{name, namespace, minMember, queue, priorityClassName, minResources, annotations}``
``pods:``      ``{prefix, count, namespace, group, queue, cpu, memory, extra, nodeName, phase,
               priorityClassName, priority, nodeSelector, tolerations, affinity, annotations}``
``priorityclass:`` ``{name, value, globalDefault}``
``report:``    a NodeReport (JSON form) ``{name, zones: [cpus, ...], zoneMemory: "16Gi", policy, gpus: [{memory,
               zone, healthy, links: {peer: nvlinks}}], npus: [{model, zone, healthy}], cpuUsed, memoryUsed,
               batchCpu, batchMemory, evicting, age}`` (``age``: seconds before the clock it was sampled,
               needs ``at``)
"""

from __future__ import annotations

from datetime import datetime
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
    if kind == "report":
        return [report(args.pop("name"), **args)]
    raise ValueError(f"unknown scenario object kind {kind!r}")


def report(name: str, *, zones: list[int] | None = None, zoneMemory: str = "16Gi", policy: str = "",
           gpus: list[dict] | None = None, npus: list[dict] | None = None, cpuUsed: float = 0.0,
           memoryUsed: str = "0", batchCpu: int = 0, batchMemory: str = "0", evicting: bool = False,
           sampleTime: str | None = None, pods: list[dict] | None = None) -> dict:
    """A NodeReport document: ``zones`` lists the CPUs of each NUMA zone (default one zone of 8)."""
    from proto.codec import report_to_json
    from proto.model import (
        Capacity,
        Colocation,
        Devices,
        Gpu,
        GpuLink,
        GpuTopologyLevel,
        Identity,
        Load,
        NodeReport,
        Npu,
        NumaZone,
        PodUsage,
        QosLevel,
    )
    from proto.vocab.quantity import to_canonical

    zones = zones or [8]
    zone_memory = to_canonical("memory", zoneMemory)
    numa, first = [], 0
    for zid, count in enumerate(zones):
        numa.append(NumaZone(zid, list(range(first, first + count)), zone_memory,
                             [10 if j == zid else 21 for j in range(len(zones))]))
        first += count
    gpu_list = []
    for i, g in enumerate(gpus or []):
        links = [GpuLink(int(peer), int(n), GpuTopologyLevel.SYSTEM) for peer, n in (g.get("links") or {}).items()]
        gpu_list.append(Gpu(i, g.get("uuid", f"GPU-{name}-{i}"), "NVIDIA H100",
                            to_canonical("memory", g.get("memory", "80Gi")), 0, 0.0, 0.0, g.get("zone", -1),
                            g.get("healthy", True), "" if g.get("healthy", True) else "XID 79", links=links))
    npu_list = [Npu(i, 0, n.get("model", "Ascend910B3"), 64 * 2**30, 0, 0.0, n.get("healthy", True), "",
                    n.get("zone", -1)) for i, n in enumerate(npus or [])]
    sample_ns = int(datetime.fromisoformat(sampleTime).timestamp() * 1e9) if sampleTime else 0
    usage = [PodUsage(p["uid"], qos=QosLevel[p.get("qos", "LS")], cpu_used_cores=p.get("cpu", 0.0),
                      memory_used_bytes=to_canonical("memory", p.get("memory", "0"))) for p in pods or []]
    r = NodeReport(
        identity=Identity(name, "test", "boot", 1, sample_ns, 1000),
        capacity=Capacity(sum(zones) * 1000, zone_memory * len(zones), numa, topology_policy=policy),
        devices=Devices(gpu_list, npu_list),
        load=Load(cpuUsed, to_canonical("memory", memoryUsed), pods=usage),
        colocation=Colocation(batchCpu, to_canonical("memory", batchMemory), evicting=evicting))
    return report_to_json(r)
