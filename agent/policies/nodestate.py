"""The node as the policies see it: capacity, usage, and each pod with its cgroup and usage."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from agent.pods import PodInfo
from proto.model import ContainerUsage, NumaZone, Pressure


def request(pod: PodInfo) -> int:
    """The CPU an offline pod asked for: its ``kubernetes.io/batch-cpu``, else its cpu request (millicores)."""
    return pod.batch_cpu or pod.cpu_request


def inside(path: str, parent: str) -> bool:
    """Whether cgroup ``path`` is below ``parent`` (both relative to the hierarchy root)."""
    parent = parent.strip("/")
    return bool(parent) and path.strip("/").startswith(parent + "/")


@dataclass(frozen=True)
class PodSample:
    pod: PodInfo
    path: str | None          # its cgroup (None: not found on this host)
    cpu_used: float = 0.0     # millicores, averaged since the last sample
    memory_used: int = 0      # bytes (working set)
    containers: tuple[ContainerUsage, ...] = ()   # from the container cgroups below the pod's (for the report)
    cpu_pressure: Pressure | None = None           # the pod cgroup's PSI, where the kernel keeps it
    memory_pressure: Pressure | None = None
    container_paths: tuple[str, ...] = ()         # its container cgroups, listed for pods that policies pin


@dataclass(frozen=True)
class NodeState:
    """Frozen, so the derived figures below are computed once per state (the policies read them often)."""

    cpu_capacity: int                 # millicores
    memory_capacity: int              # bytes
    cpu_used: float                   # millicores in use on the node (everything)
    memory_used: int                  # bytes in use on the node (everything, without reclaimable cache)
    pods: tuple[PodSample, ...] = ()
    offline_parent: str = ""          # the cgroup holding offline pods (its CPU quota is the offline quota)
    cgroup_version: int = 1
    has_cpu_idle: bool = False
    has_cpu_burst: bool = False
    owns_offline_parent: bool = False  # the layout's parents are ours (embedded), not the kubelet's
    numa_zones: tuple[NumaZone, ...] = ()   # the node's NUMA zones (online CPUs only)
    offline_quota: float | None = None  # millicores the offline quota allowed over the sample (None: no limit)
    memory_pressure: Pressure | None = None  # the node's memory PSI
    extras: dict = field(default_factory=dict, compare=False)

    @cached_property
    def online(self) -> tuple[PodSample, ...]:
        return tuple(p for p in self.pods if not p.pod.offline)

    @cached_property
    def offline(self) -> tuple[PodSample, ...]:
        return tuple(p for p in self.pods if p.pod.offline)

    @cached_property
    def online_in_offline_parent(self) -> tuple[PodSample, ...]:
        """Online pods (or pods of unknown level) whose cgroup is below the offline parent: in the kubelet's
        layout an online pod without requests is BestEffort and lives in the offline pods' cgroup."""
        return tuple(p for p in self.online if p.path is not None and inside(p.path, self.offline_parent))

    @cached_property
    def online_cpu(self) -> float:
        return sum(p.cpu_used for p in self.pods if not p.pod.offline)

    @cached_property
    def offline_cpu(self) -> float:
        return sum(p.cpu_used for p in self.pods if p.pod.offline)

    @cached_property
    def system_cpu(self) -> float:
        """CPU used outside pods (system daemons, the kubelet, the agent itself)."""
        return max(0.0, self.cpu_used - self.online_cpu - self.offline_cpu)

    @cached_property
    def demand_cpu(self) -> float:
        """CPU online pods and the system use: the node's own demand, never offline work filling idle CPU."""
        return self.online_cpu + self.system_cpu

    @cached_property
    def offline_requested(self) -> float:
        """Millicores the offline pods on this host request (their batch-cpu, else their cpu request)."""
        return float(sum(request(p.pod) for p in self.offline if p.path is not None))

    @cached_property
    def offline_allowed(self) -> float:
        """Millicores offline pods could have had: what online and system work left, within the quota."""
        room = max(0.0, self.cpu_capacity - self.demand_cpu)
        return room if self.offline_quota is None else min(room, self.offline_quota)

    @cached_property
    def online_memory(self) -> int:
        return sum(p.memory_used for p in self.pods if not p.pod.offline)

    @cached_property
    def offline_memory(self) -> int:
        return sum(p.memory_used for p in self.pods if p.pod.offline)

    @cached_property
    def system_memory(self) -> int:
        return max(0, self.memory_used - self.online_memory - self.offline_memory)
