"""The local runtime's cgroups: a pod cgroup from the agent's layout, a container cgroup below it.

The pod cgroup is under the online or the offline parent by the pod's QoS
level (:func:`pod_cgroup`).  Made in every controller the backend manages
(cpu, cpuacct, memory, cpuset on v1; the unified hierarchy on v2) with
:func:`agent.cgroups.tree.make_group`.
Container cgroups are named by a hex id derived from the pod uid and the
container name (``layout.containers`` lists such names, as it lists a
container runtime's ids, so per-container usage and NUMA pinning see them),
the same across restarts of the container and of the agent.

Limits are the kubelet's, written through the agent's executor
(:func:`limit_writes`, pure):

=====================  ===================================================  ===============================
knob                   container                                            pod
=====================  ===================================================  ===============================
cpu.shares (weight)    its CPU request (2 for a BestEffort pod)             the sum (2 for BestEffort)
cpu.quota              its CPU limit, else its kubernetes.io/batch-cpu      the sum, if every container has one
memory.limit           its memory limit, else its kubernetes.io/batch-memory the sum, if every container has one
=====================  ===================================================  ===============================

The QoS policies own the rest (``cpu.idle`` or minimal shares of offline
pods, CPU burst, the offline parent's quota, memory protection, NUMA
cpusets) and write them on the next slow tick; nothing here overrides them.
One exception to the table: on cgroup v1 the kernel refuses a child CFS quota
above its parent's, and refuses to cut a parent's below a child's — so pods
under the offline parent get no quota on v1 (the offline parent's quota,
which the agent moves, is what bounds them; on v2 ``cpu.max`` has no such rule).
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from agent.cgroups.backend import Backend
from agent.cgroups.layout import Layout
from agent.cgroups.tree import V1_CONTROLLERS, make_group, pids, remove_group
from agent.embedded.spec import ContainerSpec, PodSpec
from agent.intents import CgroupWrite

log = logging.getLogger(__name__)

SHARES_PER_CPU = 1024
MIN_SHARES = 2


def pod_cgroup(layout: Layout, spec: PodSpec) -> str:
    """Where the pod's cgroup goes: under the online or the offline parent by its QoS level
    (``volcano.sh/qos-level``), never by its Kubernetes QoS class — an online pod without requests is
    BestEffort by class and still runs beside online work, not under the offline parent's quota."""
    return layout.pod_path(spec.uid, spec.info.qos_class, offline=spec.info.offline)


def container_cgroup(pod_path: str, uid: str, container: str) -> str:
    return f"{pod_path}/{hashlib.sha256(f'{uid}/{container}'.encode()).hexdigest()[:16]}"


def shares(millicores: int) -> int:
    """The kubelet's MilliCPUToShares."""
    return max(MIN_SHARES, millicores * SHARES_PER_CPU // 1000)


def _dirs(backend: Backend, rel: str) -> list[Path]:
    if backend.version == 2:
        return [backend.directory(rel, "")]
    return [backend.directory(rel, c) for c in V1_CONTROLLERS if backend.directory("", c).is_dir()]


def procs_files(backend: Backend, rel: str) -> list[str]:
    """Each managed hierarchy's ``cgroup.procs`` of ``rel`` (what the wrapper writes its PID into)."""
    return [str(d / "cgroup.procs") for d in _dirs(backend, rel)]


def members(backend: Backend, rel: str) -> set[int]:
    """Processes in ``rel`` in any managed hierarchy (none if it is gone)."""
    return pids(backend, rel)


def make(backend: Backend, rel: str) -> None:
    make_group(backend, rel)


def remove(backend: Backend, rel: str, *, timeout: float = 0.5) -> bool:
    """Remove ``rel`` (and what is below it); False while the kernel still counts tasks in it."""
    try:
        remove_group(backend, rel, timeout=timeout)
    except OSError as exc:
        log.debug("cgroup %s not removed yet: %s", rel, exc)
        return False
    return True


def remove_if_empty(backend: Backend, rel: str) -> None:
    """Remove a parent we made if nothing is left in it (no child cgroups, no processes)."""
    for d in _dirs(backend, rel):
        try:
            if any(p.is_dir() for p in d.iterdir()) or (d / "cgroup.procs").read_text().strip():
                return
        except OSError:
            continue
    remove(backend, rel)


def oom_kills(backend: Backend, rel: str) -> int:
    """How many processes the kernel's OOM killer took in ``rel`` (0 where the kernel does not say)."""
    if backend.version == 2:
        path, key = backend.directory(rel, "") / "memory.events", "oom_kill"
    else:
        path, key = backend.directory(rel, "memory") / "memory.oom_control", "oom_kill"
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _quota(c: ContainerSpec, quota_allowed: bool) -> int | None:
    if not quota_allowed:
        return None
    return c.cpu_limit if c.cpu_limit is not None else c.batch_cpu


def _memory(c: ContainerSpec) -> int | None:
    return c.memory_limit if c.memory_limit is not None else c.batch_memory


def limit_writes(spec: PodSpec, pod_path: str, *, version: int, offline_parent: str) -> list[CgroupWrite]:
    """The cgroup settings of a pod and its containers (see the module's table)."""
    under_offline = bool(offline_parent) and pod_path.startswith(offline_parent.rstrip("/") + "/")
    quota_allowed = not (version == 1 and under_offline)
    best_effort = spec.info.qos_class == "BestEffort"
    why = f"pod {spec.key}"
    out = []
    quotas, memories = [], []
    for c in spec.containers:
        path = container_cgroup(pod_path, spec.uid, c.name)
        cwhy = f"{why} container {c.name}"
        out.append(CgroupWrite(path, "cpu.shares", MIN_SHARES if best_effort else shares(c.cpu_request), cwhy))
        quota, memory = _quota(c, quota_allowed), _memory(c)
        quotas.append(quota)
        memories.append(memory)
        if quota is not None:
            out.append(CgroupWrite(path, "cpu.quota", quota, cwhy))
        if memory is not None:
            out.append(CgroupWrite(path, "memory.limit", memory, cwhy))
    total_request = sum(c.cpu_request for c in spec.containers)
    out.append(CgroupWrite(pod_path, "cpu.shares", MIN_SHARES if best_effort else shares(total_request), why))
    if quota_allowed and all(q is not None for q in quotas):
        out.append(CgroupWrite(pod_path, "cpu.quota", sum(q for q in quotas if q is not None), why))
    if all(m is not None for m in memories):
        out.append(CgroupWrite(pod_path, "memory.limit", sum(m for m in memories if m is not None), why))
    return out
