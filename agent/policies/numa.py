"""NUMA pinning: a pod the scheduler placed in NUMA zones runs on those zones' CPUs and memory.

The scheduler writes the zones on the pod when it binds (``scoria.io/numa-nodes``,
``"0"`` or ``"0,1"``; see :mod:`proto.vocab.placement`).  For each such pod this
policy sets, on every one of the pod's *container* cgroups, ``cpuset.cpus`` to the
union of those zones' CPUs and ``cpuset.mems`` to the zone ids.  Containers, not
the pod cgroup: the kubelet's CPU manager pins at the same level, and on cgroup v1
a parent's cpuset can never shrink below a child's.

A pod whose annotation cannot be read, or names a zone this node does not have
(or zones without a CPU), is not pinned at all: the policy reports it as a
:class:`PinProblem`, and the agent warns and counts it.  Pods without the
annotation are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.hostpaths import format_cpulist
from agent.intents import CgroupWrite
from agent.pods import PodInfo
from agent.policies.nodestate import NodeState
from proto.vocab.placement import NUMA_NODES_ANNOTATION, decode_zones

BAD_ANNOTATION, UNKNOWN_ZONE, NO_CPUS = "bad-annotation", "unknown-zone", "no-cpus"
REASONS = (BAD_ANNOTATION, UNKNOWN_ZONE, NO_CPUS)


@dataclass(frozen=True, slots=True)
class PinProblem:
    """A pod whose NUMA placement cannot be applied here, and why."""

    uid: str
    pod: str      # namespace/name
    reason: str   # one of REASONS
    detail: str


@dataclass(frozen=True)
class NumaPlan:
    writes: list[CgroupWrite] = field(default_factory=list)
    problems: list[PinProblem] = field(default_factory=list)


def pinned(pod: PodInfo) -> bool:
    """Whether the scheduler placed ``pod`` in NUMA zones (the agent then lists its containers)."""
    return NUMA_NODES_ANNOTATION in pod.annotations


def numa_intents(state: NodeState) -> NumaPlan:
    zones = {zone.id: zone for zone in state.numa_zones}
    plan = NumaPlan()
    for sample in state.pods:
        pod = sample.pod
        if sample.path is None or not pinned(pod):
            continue
        cpus, mems, problem = _placement(pod, zones)
        if problem is not None:
            plan.problems.append(problem)
            continue
        why = f"{pod.key}: NUMA zones {mems}"
        for container in sample.container_paths:
            plan.writes.append(CgroupWrite(container, "cpuset.cpus", cpus, why))
            plan.writes.append(CgroupWrite(container, "cpuset.mems", mems, why))
    return plan


def _placement(pod: PodInfo, zones: dict) -> tuple[str, str, PinProblem | None]:
    """(cpuset.cpus, cpuset.mems, None), or ("", "", the problem)."""
    text = pod.annotations[NUMA_NODES_ANNOTATION]
    try:
        wanted = decode_zones(text)
    except ValueError as exc:
        return "", "", PinProblem(pod.uid, pod.key, BAD_ANNOTATION, str(exc))
    missing = [z for z in wanted if z not in zones]
    if missing:
        have = ",".join(str(z) for z in sorted(zones)) or "none"
        return "", "", PinProblem(pod.uid, pod.key, UNKNOWN_ZONE,
                                  f"{NUMA_NODES_ANNOTATION}: zone {','.join(map(str, missing))} is not on this node "
                                  f"(zones {have})")
    cpus = sorted({cpu for z in wanted for cpu in zones[z].cpus})
    if not cpus:
        return "", "", PinProblem(pod.uid, pod.key, NO_CPUS,
                                  f"{NUMA_NODES_ANNOTATION}: zones {text!r} have no online CPU")
    return format_cpulist(cpus), ",".join(str(z) for z in wanted), None
