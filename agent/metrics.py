"""The agent's Prometheus metrics, in one place, recorded through small methods; a registry per agent."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LOOP = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
_REACTION = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1)


class AgentMetrics:
    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = r = registry or CollectorRegistry()
        self.cpu_used = Gauge("scoria_agent_node_cpu_used_millicores", "CPU in use on the node", registry=r)
        self.memory_used = Gauge("scoria_agent_node_memory_used_bytes", "Memory in use on the node", registry=r)
        self.online_cpu = Gauge("scoria_agent_online_cpu_millicores", "CPU used by online pods", registry=r)
        self.batch = Gauge("scoria_agent_batch_allocatable", "Batch allocatable offered to offline work",
                           ["resource"], registry=r)
        self.quota = Gauge("scoria_agent_offline_cpu_quota_millicores",
                           "CFS quota of the offline parent (the node's capacity while open)",
                           registry=r)
        self.quota_clamped = Gauge("scoria_agent_offline_cpu_quota_clamped",
                                   "1 while the offline quota clamps, 0 while it is open (no limit)", registry=r)
        self.psi_wakeups = Counter("scoria_agent_psi_wakeups_total",
                                   "Fast-loop wake-ups by the PSI trigger (before its pace was due)", registry=r)
        self.evictions = Counter("scoria_agent_evictions_total", "Offline pods evicted", ["resource"], registry=r)
        self.cgroup_writes = Counter("scoria_agent_cgroup_writes_total", "cgroup values changed", registry=r)
        self.cgroup_errors = Counter("scoria_agent_cgroup_write_errors_total", "cgroup writes that failed",
                                     ["kind"], registry=r)
        self.loop_seconds = Histogram("scoria_agent_loop_seconds", "Duration of one loop iteration", ["loop"],
                                      buckets=_LOOP, registry=r)
        self.reaction = Histogram("scoria_agent_reaction_seconds",
                                  "From the fast sample that saw online CPU rise to the offline quota being cut",
                                  buckets=_REACTION, registry=r)
        self.loops_cpu = Counter("scoria_agent_loops_cpu_seconds_total",
                                 "CPU time of the thread running the fast and slow loops (the agent's own cost)",
                                 registry=r)
        self.profile = Gauge("scoria_agent_qos_profile_info", "The QoS profile in force (value 1)",
                             ["name", "digest"], registry=r)
        self.settings = Gauge("scoria_agent_qos_setting",
                              "The QoS profile's settings in force on this node now (node overrides and open windows "
                              "applied; switches 1 or 0)", ["setting"], registry=r)
        self.profile_reloads = Counter("scoria_agent_qos_profile_reloads_total", "QoS profile reloads by result",
                                       ["result"], registry=r)
        self.numa_unpinned = Gauge("scoria_agent_numa_unpinned_pods",
                                   "Pods placed in NUMA zones (scoria.io/numa-nodes) that the agent cannot pin, "
                                   "by reason", ["reason"], registry=r)
        self.runtime_pods = Gauge("scoria_agent_runtime_pods",
                                  "Embedded mode: pods the local runtime holds, by phase", ["phase"], registry=r)
        self.runtime_restarts = Counter("scoria_agent_runtime_container_restarts_total",
                                        "Embedded mode: containers the local runtime started again", registry=r)

    def runtime_phases(self, counts: dict[str, int]) -> None:
        for phase in ("Pending", "Running", "Succeeded", "Failed"):
            self.runtime_pods.labels(phase).set(counts.get(phase, 0))

    def observed(self, *, cpu_used: float, memory_used: int, online_cpu: float) -> None:
        self.cpu_used.set(cpu_used)
        self.memory_used.set(memory_used)
        self.online_cpu.set(online_cpu)

    def quota_in_force(self, millicores: int | None, capacity: int) -> None:
        """The offline quota (None: open, shown as the node's capacity) and whether it clamps."""
        self.quota.set(capacity if millicores is None else millicores)
        self.quota_clamped.set(0 if millicores is None else 1)

    def offered(self, cpu_millis: int, memory_bytes: int) -> None:
        self.batch.labels("cpu").set(cpu_millis)
        self.batch.labels("memory").set(memory_bytes)

    def profile_in_force(self, name: str, digest: str) -> None:
        self.profile.clear()
        self.profile.labels(name, digest).set(1)

    def settings_in_force(self, settings: dict[str, float]) -> None:
        for name, value in settings.items():
            self.settings.labels(name).set(value)

    def unpinned(self, counts: dict[str, int], reasons: tuple[str, ...]) -> None:
        for reason in reasons:
            self.numa_unpinned.labels(reason).set(counts.get(reason, 0))

    def write_error(self, kind: str) -> None:
        self.cgroup_errors.labels(kind).inc()
