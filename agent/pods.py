"""The pods on this node, and which of them are online and which offline.

QoS level: see :mod:`proto.vocab.qos` (shared with the scheduler); it, not the Kubernetes QoS
class, decides whether a pod is offline.  A :class:`PodSource` gives the
inventory: the pod cgroups found on the host (when no API is reachable), a fixed list (tests,
benchmarks), or — elsewhere — a Kubernetes watch of the node's pods
(:class:`agent.kubernetes.pods.KubernetesPodSource`) and embedded mode's local runtime
(:class:`agent.embedded.LocalRuntime`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from agent.cgroups.layout import Layout
from proto.errors import InputError
from proto.model import QosLevel
from proto.vocab.qos import BATCH_CPU, BATCH_MEMORY, qos_level
from proto.vocab.qos import qos_class as _qos_class
from proto.vocab.quantity import QuantityError, to_canonical

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PodInfo:
    uid: str
    namespace: str = ""
    name: str = ""
    qos_class: str = "BestEffort"
    qos_level: QosLevel = QosLevel.BE
    priority: int = 0
    cpu_request: int = 0           # millicores
    cpu_limit: int | None = None   # millicores; None: no limit
    memory_request: int = 0        # bytes
    memory_limit: int | None = None
    batch_cpu: int = 0             # kubernetes.io/batch-cpu request, millicores
    batch_memory: int = 0          # kubernetes.io/batch-memory request, bytes
    annotations: dict[str, str] = field(default_factory=dict, hash=False, compare=False)

    @property
    def offline(self) -> bool:
        return self.qos_level == QosLevel.BE

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.name else self.uid


def _sum(containers: list[dict], part: str, resource: str) -> tuple[int, bool]:
    """Sum of ``resources.<part>.<resource>`` over containers; also whether every container set it.

    A missing request defaults to the container's limit, as Kubernetes does."""
    total, every = 0, True
    for c in containers:
        res = c.get("resources") or {}
        value = (res.get(part) or {}).get(resource)
        if value is None and part == "requests":
            value = (res.get("limits") or {}).get(resource)
        if value is None:
            every = False
            continue
        total += to_canonical(resource, value)
    return total, every


def pod_info(doc: dict) -> PodInfo:
    """A PodInfo from a pod manifest (a dict as the API or YAML gives it); ValueError names the problem."""
    meta = doc.get("metadata") or {}
    spec = doc.get("spec") or {}
    containers = spec.get("containers") or []
    try:
        cpu_req, _ = _sum(containers, "requests", "cpu")
        mem_req, _ = _sum(containers, "requests", "memory")
        cpu_lim, all_cpu_lim = _sum(containers, "limits", "cpu")
        mem_lim, all_mem_lim = _sum(containers, "limits", "memory")
        batch_cpu = _sum(containers, "requests", BATCH_CPU)[0]
        batch_mem = _sum(containers, "requests", BATCH_MEMORY)[0]
    except QuantityError as exc:
        raise InputError(f"pod {meta.get('namespace')}/{meta.get('name')}: {exc}") from None
    qos_class = (doc.get("status") or {}).get("qosClass") or _qos_class(containers)
    annotations = dict(meta.get("annotations") or {})
    return PodInfo(
        uid=str(meta.get("uid") or ""), namespace=meta.get("namespace") or "default", name=meta.get("name") or "",
        qos_class=qos_class, qos_level=qos_level(annotations, qos_class, bool(batch_cpu or batch_mem)),
        priority=int(spec.get("priority") or 0), cpu_request=cpu_req,
        cpu_limit=cpu_lim if all_cpu_lim and containers else None, memory_request=mem_req,
        memory_limit=mem_lim if all_mem_lim and containers else None,
        batch_cpu=batch_cpu, batch_memory=batch_mem, annotations=annotations)


class PodSource(Protocol):
    def pods(self) -> list[PodInfo]: ...


class StaticPodSource:
    def __init__(self, pods: Iterable[PodInfo] = ()):
        self._pods = list(pods)

    def set(self, pods: Iterable[PodInfo]) -> None:
        self._pods = list(pods)

    def pods(self) -> list[PodInfo]:
        return list(self._pods)


class CgroupPodSource:
    """Pods as the host's cgroups show them: uid and QoS class only (used without API access).

    Their QoS level is what their place says: in a layout of our own (``--cgroup-parent``) pods were
    placed by level, offline under the offline parent.  In the kubelet's layout the place says only the
    Kubernetes QoS class, and an online pod without requests is as BestEffort as an offline one; without
    its ``volcano.sh/qos-level`` annotation the level is unknown (UNSPECIFIED), and a pod of unknown
    level is never treated as offline — never idled, throttled or evicted as offline work.
    """

    def __init__(self, layout: Layout):
        self.layout = layout
        self._known: dict[tuple[str, str, bool | None], PodInfo] = {}  # the same pods every second: made once

    def pods(self) -> list[PodInfo]:
        known, found, keys = self._known, [], set()
        for p in self.layout.discover():
            key = (p.uid, p.qos_class, p.offline)
            info = known.get(key)
            if info is None:
                info = known[key] = PodInfo(uid=p.uid, qos_class=p.qos_class,
                                            qos_level=_placed_level(p.qos_class, p.offline))
            found.append(info)
            keys.add(key)
        if len(known) > 2 * len(found) + 64:  # pods that left
            self._known = {k: i for k, i in known.items() if k in keys}
        return found


def _placed_level(qos_class: str, offline: bool | None) -> QosLevel:
    if offline is None:
        return QosLevel.UNSPECIFIED
    return QosLevel.BE if offline else qos_level({}, qos_class if qos_class != "BestEffort" else "Burstable", False)
