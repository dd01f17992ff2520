"""The node agent: collect -> decide -> act, on two clocks.

The *fast* loop (every ``fast_interval``, 25 ms by default, while offline pods
use CPU; 200 ms while they do not) reads two cheap counters — the CPU time of
all pods and of the offline parent — and, with the CPU used outside pods as
the slow loop last measured it, cuts the offline CFS quota as soon as online
work needs the room: suppression within a fast tick or two.  It only ever
cuts; the *slow* loop (every second) recomputes everything from a full
sample, lets the quota rise again, applies per-pod cgroup settings, evicts
when the node stays over its watermark, updates the batch allocatable, and
publishes the node report.  Topology and
devices are refreshed on their own, longer intervals.

Decisions are the pure functions of :mod:`agent.policies`; effects go through
the executor, the evictor and the report publisher.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol

from agent import __version__
from agent.cgroups.backend import Backend
from agent.cgroups.executor import Executor
from agent.cgroups.layout import Layout, container_id
from agent.collectors.load import CpuMeter, boot_id, memory_used, node_cpu_ns, node_pressure, parse_pressure
from agent.evictor import Evictor
from agent.hostpaths import HostPaths
from agent.intents import BatchAllocatable, CgroupWrite
from agent.metrics import AgentMetrics
from agent.pods import PodInfo, PodSource
from agent.policies.batch import OvercommitState, batch_allocatable
from agent.policies.cpu import burst_writes, offline_pod_writes, offline_quota, quota_plan
from agent.policies.eviction import EvictionState, decide_evictions
from agent.policies.memory import memory_intents
from agent.policies.nodestate import NodeState, PodSample
from agent.policies.numa import REASONS as UNPINNED_REASONS
from agent.policies.numa import PinProblem, numa_intents, pinned
from agent.profile import ProfileError, ProfileSpec, ProfileWatcher
from proto.model import (
    Capacity,
    Colocation,
    ContainerUsage,
    Devices,
    Eviction,
    Identity,
    Load,
    NodeReport,
    PodRuntime,
    PodUsage,
    Pressure,
)

log = logging.getLogger(__name__)


@dataclass
class AgentConfig:
    node_name: str
    fast_interval: float = 0.025
    fast_idle_interval: float = 0.2  # the fast loop's pace while offline pods use (almost) no CPU
    slow_interval: float = 1.0
    device_interval: float = 10.0
    detail_interval: float = 10.0  # per-container usage and pod PSI (report detail; policies read pods only)
    topology_interval: float = 60.0
    fast_cut_percent: float = 2.0  # the fast loop cuts the quota when it should shrink by more than this (of capacity)
    fast_reopen: float = 0.2       # after a fast cut, the quota rises again once online use has left room this long
    offline_busy_percent: float = 1.0  # offline work above this (of capacity) keeps the fast loop at full pace
    enforce: bool = True           # False: observe and report only


class LocalPods(Protocol):
    """Embedded mode's local runtime as the agent drives it (see agent.embedded.LocalRuntime)."""

    def tick(self) -> None: ...

    def runtime(self) -> list[PodRuntime]: ...


class Agent:
    def __init__(self, config: AgentConfig, *, paths: HostPaths, backend: Backend, layout: Layout,
                 pods: PodSource, profiles: ProfileWatcher, evictor: Evictor, metrics: AgentMetrics | None = None,
                 read_capacity: Callable[[HostPaths], Capacity] | None = None, devices: Callable[[], Devices] | None = None,
                 publish: Callable[[NodeReport], None] | None = None, clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic,
                 node_labels: Callable[[], dict[str, str]] | None = None,
                 taint: Callable[[bool], bool] | None = None, topology_policy: Callable[[], str] | None = None,
                 node_resources: Callable[[int, int], bool] | None = None, runtime: LocalPods | None = None,
                 executor: Executor | None = None):
        self.config = config
        self.paths, self.backend, self.layout = paths, backend, layout
        self.pods, self.profiles, self.evictor = pods, profiles, evictor
        self.metrics = metrics or AgentMetrics()
        # the one seam for cgroup writes; a mode that writes cgroups itself (embedded) shares its executor
        self.executor = executor or Executor(backend, on_error=self.metrics.write_error)
        self.read_capacity = read_capacity or _default_capacity
        self.topology_policy = topology_policy or str  # the kubelet's topology manager policy ("" unknown)
        self.devices = devices or (lambda: Devices())
        self.publish = publish or (lambda report: None)
        self.node_labels = node_labels or dict  # labels selecting the profile's node overrides
        self.taint = taint                 # marks the node while evicting (Kubernetes mode)
        self.node_resources = node_resources  # batch allocatable into the Node's status (Kubernetes mode)
        self._tainted: bool | None = None  # what the node is known to carry; None: not known yet
        self.runtime = runtime             # embedded mode: runs the pods; ticked by the slow loop, in the report
        self.clock, self.monotonic = clock, monotonic
        self.boot_id = boot_id(paths)
        self.capacity = self._read_capacity()
        self._capacity_at = monotonic()
        self._devices = self.devices()
        self._devices_at = monotonic()
        self._spec_error: str | None = None  # why the profile's spec for this node and time is not in force
        self.spec: ProfileSpec = profiles.current.spec
        self.spec = self._effective_spec()
        self.quota: int | None = None  # the offline quota in force (millicores)
        self.batch: BatchAllocatable | None = None
        self.eviction_state = EvictionState()
        self.overcommit_state = OvercommitState()
        self.unreported: list[Eviction] = []
        self._node_meter = CpuMeter(node_cpu_ns(paths), monotonic)
        self._pod_meters: dict[str, CpuMeter] = {}
        self._container_meters: dict[str, CpuMeter] = {}
        self._fast_pods = CpuMeter(lambda: backend.cpu_usage_ns(layout.root), monotonic)
        self._fast_offline = CpuMeter(lambda: backend.cpu_usage_ns(layout.offline_parent), monotonic)
        self._detail: dict[str, tuple] = {}   # pod cgroup -> (containers, cpu PSI, memory PSI)
        self._detail_at: float | None = None
        self._fast_online: float | None = None
        self._fast_recent: deque[tuple[float, float]] = deque()  # (time, online millicores) of recent fast windows
        self._fast_cut_at: float | None = None  # when the fast loop last cut the quota, until it is fully reopened
        self._slow_quota: int | None = None     # the quota the slow loop decided last (the fast loop's ceiling)
        # Online pods in the offline parent (the kubelet's BestEffort tier): the quota is then split over the
        # offline pods in it (these cgroups) and the fast loop, which moves the parent's quota, waits.
        self._capped: frozenset[str] = frozenset()
        self._quota_on_parent = True
        self._offline_busy = True  # until the fast loop has measured otherwise
        self._system_cpu = 0.0     # CPU used outside pods, from the last slow sample
        self._offline_cpu = 0.0    # CPU used by offline pods, from the last slow sample
        self._unpinned: set[tuple[str, str]] = set()  # (pod uid, problem) warned about and still so
        self._fast_last = monotonic()
        self.metrics.profile_in_force(profiles.current.name, profiles.current.digest)
        self._fast_seconds = self.metrics.loop_seconds.labels("fast")
        self.has_cpu_idle = bool(layout.offline_parent) and backend.supports("cpu.idle", layout.offline_parent)
        self.has_cpu_burst = bool(layout.root) and backend.supports("cpu.burst", layout.root)

    # -- observe ------------------------------------------------------------------------------------
    def observe(self) -> NodeState:
        # /proc/stat counts whole ticks: over a second the rate can read a little above the machine
        # (101%), which is tick jitter, not load; a watermark of 100% must never fire on it
        node_cpu = self._node_meter.sample() or 0.0
        if self.capacity.cpu_millis:
            node_cpu = min(node_cpu, float(self.capacity.cpu_millis))
        mem_total, mem_used = memory_used(self.paths)
        now = self.monotonic()
        detail = self._detail_at is None or now - self._detail_at >= self.config.detail_interval
        if detail:
            self._detail_at = now
        samples = []
        seen: set[str] = set()
        for pod in self.pods.pods():
            samples.append(self._sample_pod(pod, seen, detail))
        self._pod_meters = {k: m for k, m in self._pod_meters.items() if k in seen}  # pods that left
        self._detail = {k: d for k, d in self._detail.items() if k in seen}
        if detail:
            self._container_meters = {k: m for k, m in self._container_meters.items() if k in seen}
        return NodeState(cpu_capacity=self.capacity.cpu_millis, memory_capacity=mem_total or self.capacity.memory_bytes,
                         cpu_used=node_cpu, memory_used=mem_used, pods=tuple(samples),
                         offline_parent=self.layout.offline_parent, cgroup_version=self.backend.version,
                         has_cpu_idle=self.has_cpu_idle, has_cpu_burst=self.has_cpu_burst,
                         owns_offline_parent=self.layout.owns_parents,
                         numa_zones=tuple(self.capacity.numa_zones))

    def _sample_pod(self, pod: PodInfo, seen: set[str], detail: bool) -> PodSample:
        path = self.layout.pod_path(pod.uid, pod.qos_class, offline=pod.offline)
        try:
            cpu, memory = self._usage(self._pod_meters, path, seen)
        except (OSError, ValueError):  # not on this host, or it left between listing and reading: not an error
            return PodSample(pod, None)
        if detail:
            self._detail[path] = self._sample_detail(path, seen)
        containers, cpu_psi, memory_psi = self._detail.get(path, ((), None, None))
        # listed every tick for pinned pods only, so a restarted container is pinned within a second
        container_paths = tuple(self.layout.containers(path)) if pinned(pod) else ()
        return PodSample(pod, path, cpu, memory, containers, cpu_psi, memory_psi, container_paths)

    def _sample_detail(self, path: str, seen: set[str]) -> tuple:
        """The pod's containers' usage (averaged over the detail interval) and its own PSI."""
        containers = []
        for cpath in self.layout.containers(path):
            try:
                ccpu, cmem = self._usage(self._container_meters, cpath, seen)
            except (OSError, ValueError):  # a container that just exited
                continue
            name = cpath.rsplit("/", 1)[-1]
            containers.append(ContainerUsage(container_id(name) or name, ccpu / 1000.0, cmem))
        return tuple(containers), self._pressure(path, "cpu"), self._pressure(path, "memory")

    def _usage(self, meters: dict[str, CpuMeter], path: str, seen: set[str]) -> tuple[float, int]:
        """(millicores since the last reading, working-set bytes) of one cgroup."""
        seen.add(path)
        meter = meters.get(path)
        if meter is None:
            meter = meters[path] = CpuMeter(lambda: self.backend.cpu_usage_ns(path), self.monotonic)
        return meter.sample() or 0.0, self.backend.memory_usage(path)

    def _pressure(self, path: str, resource: str) -> Pressure | None:
        try:
            text = self.backend.pressure(path, resource)
        except (OSError, KeyError):
            return None
        return parse_pressure(text) if text else None

    # -- the slow loop ------------------------------------------------------------------------------
    def slow_tick(self) -> NodeReport:
        started = self.monotonic()
        if self.profiles.poll():
            self.metrics.profile_in_force(self.profiles.current.name, self.profiles.current.digest)
        self.spec = self._effective_spec()
        self._refresh_slow_collectors(started)
        if self.runtime is not None:
            try:  # exits, restarts and stops first, so this tick sees the pods as they are now
                self.runtime.tick()
            except Exception:  # the runtime's trouble must not cost the node its QoS or its report
                log.exception("local runtime tick failed")
        state = self.observe()
        self._system_cpu, self._offline_cpu = state.system_cpu, state.offline_cpu
        self.metrics.observed(cpu_used=state.cpu_used, memory_used=state.memory_used, online_cpu=state.online_cpu)
        if self.config.enforce:
            numa = numa_intents(state)
            self._note_unpinned(numa.problems)
            plan = quota_plan(state, self.spec.cpu, self._capped)
            writes = plan.writes + offline_pod_writes(state, self.spec.cpu) + burst_writes(state, self.spec.burst) + \
                memory_intents(state, self.spec.memory)
            self._apply(writes + numa.writes)
            self._capped, self._quota_on_parent = plan.capped, plan.on_parent
            self.quota = plan.quota
            self.metrics.quota.set(plan.quota)
            self._slow_quota, self._fast_cut_at = self.quota, None
            self._evict(state)
        else:
            self.quota = offline_quota(state.cpu_capacity, state.online_cpu, state.system_cpu, self.spec.cpu)
        self.batch, self.overcommit_state = batch_allocatable(state, self.spec.overcommit, self.overcommit_state)
        self.metrics.offered(self.batch.cpu_millis, self.batch.memory_bytes)
        if self.node_resources is not None and self.config.enforce:
            self.node_resources(self.batch.cpu_millis, self.batch.memory_bytes)
        report = self.build_report(state)
        self.publish(report)
        self.unreported.clear()
        self.metrics.loop_seconds.labels("slow").observe(self.monotonic() - started)
        return report

    def _effective_spec(self) -> ProfileSpec:
        """The profile's spec for this node now; where node overrides that match together (or with the windows
        open now) break a rule none of them breaks alone, the spec in force stays, with one error logged."""
        profile = self.profiles.current
        try:
            spec = profile.effective(self.node_labels(), _now(self.clock))
        except ProfileError as exc:
            message = f"QoS profile {profile.label} for this node: {exc}"
            if message != self._spec_error:
                log.error("%s; keeping the settings in force", message)
            self._spec_error = message
            return self.spec
        self._spec_error = None
        return spec

    def _refresh_slow_collectors(self, now: float) -> None:
        if now - self._capacity_at >= self.config.topology_interval:
            self.capacity, self._capacity_at = self._read_capacity(), now
        if now - self._devices_at >= self.config.device_interval:
            self._devices, self._devices_at = self.devices(), now

    def _read_capacity(self) -> Capacity:
        capacity = self.read_capacity(self.paths)
        capacity.topology_policy = self.topology_policy()
        return capacity

    def _apply(self, writes: list[CgroupWrite]) -> None:
        self.metrics.cgroup_writes.inc(len(self.executor.apply(writes)))
        for w in writes:
            # the offline quota is always a number of millicores (never None, "no limit", here)
            if w.path == self.layout.offline_parent and w.knob == "cpu.quota" and isinstance(w.value, int):
                self.quota = w.value
                self.metrics.quota.set(w.value)

    def _note_unpinned(self, problems: list[PinProblem]) -> None:
        """Warn once per pod and problem (again if it comes back after going away); count them by reason."""
        now = {(p.uid, p.detail) for p in problems}
        for p in problems:
            if (p.uid, p.detail) not in self._unpinned:
                log.warning("not pinning pod %s to its NUMA zones: %s", p.pod, p.detail)
        self._unpinned = now
        counts: dict[str, int] = {}
        for p in problems:
            counts[p.reason] = counts.get(p.reason, 0) + 1
        self.metrics.unpinned(counts, UNPINNED_REASONS)

    def _evict(self, state: NodeState) -> None:
        evictions, self.eviction_state = decide_evictions(state, self.spec.eviction, self.eviction_state,
                                                          self.monotonic())
        refused = set()
        for intent in evictions:
            if self.evictor.evict(intent):
                self.metrics.evictions.labels(intent.resource).inc()
                self.unreported.append(Eviction(intent.uid, intent.namespace, intent.name, intent.reason,
                                                int(self.clock() * 1e9)))
            else:
                refused.add(intent.uid)
        if refused:  # not gone: may be chosen again on a later interval
            self.eviction_state = replace(self.eviction_state, pending=self.eviction_state.pending - refused)
        wanted = self.eviction_state.under_pressure
        if self.taint is not None and wanted != self._tainted and self.taint(wanted):
            self._tainted = wanted  # on failure it is tried again next slow tick

    # -- the fast loop ------------------------------------------------------------------------------
    def fast_tick(self) -> bool:
        """Cut the offline quota if online work needs room now; True if it was cut."""
        if not self.config.enforce:
            return False
        started = self.monotonic()
        try:
            pods, offline = self._fast_pods.sample(), self._fast_offline.sample()
        except (OSError, ValueError) as exc:
            log.debug("fast sample failed: %s", exc)
            return False
        if pods is None or offline is None:
            return False
        online = max(0.0, pods - offline)
        system = self._system_cpu  # daemons move slowly: the slow loop's figure, one file read less a tick
        capacity = self.capacity.cpu_millis
        # Busy if either clock says so: CFS throttling leaves some 25 ms windows with no offline CPU at all.
        busy_at = capacity * self.config.offline_busy_percent / 100.0
        self._offline_busy = offline > busy_at or self._offline_cpu > busy_at
        if not self._quota_on_parent:  # online pods share the offline parent: its quota must stay off
            self._fast_seconds.observe(self.monotonic() - started)
            return False
        wanted = offline_quota(capacity, online, system, self.spec.cpu)
        rising = self._fast_online is not None and online > self._fast_online + capacity * 0.05
        self._fast_online = online
        window_start, self._fast_last = self._fast_last, started
        recent = self._fast_recent
        recent.append((started, online))
        while recent and recent[0][0] < started - self.config.fast_reopen:
            recent.popleft()
        step = capacity * self.config.fast_cut_percent / 100.0
        cut = self.quota is None or wanted < self.quota - step
        if cut:
            self._apply([CgroupWrite(self.layout.offline_parent, "cpu.quota", wanted,
                                     f"fast: online {online:.0f}m + system {system:.0f}m")])
            self._fast_cut_at = started
            if rising:
                self.metrics.reaction.observe(self.monotonic() - window_start)
        elif self._fast_cut_at is not None and started - self._fast_cut_at >= self.config.fast_reopen:
            self._reopen(capacity, max(o for _, o in recent), system, step)
        self._fast_seconds.observe(self.monotonic() - started)
        return cut

    def _reopen(self, capacity: int, peak: float, system: float, step: float) -> None:
        """After a cut, give offline work back the room online work has left for ``fast_reopen`` seconds:
        the quota for the highest online use seen in that span, never above the slow loop's decision.
        Without this a cut held until the next slow tick, and bursty online work kept the offline quota
        at its 25 ms peaks nearly all the time."""
        if self._slow_quota is None or self.quota is None:
            return
        target = min(self._slow_quota, offline_quota(capacity, peak, system, self.spec.cpu))
        if target > self.quota + step:
            self._apply([CgroupWrite(self.layout.offline_parent, "cpu.quota", target,
                                     f"fast: room again (online peak {peak:.0f}m over "
                                     f"{self.config.fast_reopen * 1000:.0f} ms + system {system:.0f}m)")])
        if self.quota >= self._slow_quota:
            self._fast_cut_at = None

    # -- the control thread -------------------------------------------------------------------------
    def run(self, stop: threading.Event, after_slow: Callable[[], None] | None = None) -> None:
        """Run both loops on this thread until ``stop`` is set.

        One thread, so the loops never race on a cgroup file: a slow tick takes
        the place of the fast tick due at that moment.  The fast loop runs at
        ``fast_interval`` while offline pods use CPU and at ``fast_idle_interval``
        while they do not (nothing to squeeze then; each wake-up costs CPU).
        A failing tick is logged and the loop goes on.
        """
        next_slow = self.monotonic()
        cpu = time.thread_time()
        while not stop.is_set():
            began = self.monotonic()
            try:
                if began >= next_slow:
                    next_slow = max(next_slow + self.config.slow_interval, began)
                    self.slow_tick()
                    if after_slow is not None:
                        after_slow()
                    now_cpu = time.thread_time()
                    self.metrics.loops_cpu.inc(now_cpu - cpu)
                    cpu = now_cpu
                else:
                    self.fast_tick()
            except Exception:  # one bad tick must not stop the agent
                log.exception("agent loop iteration failed")
            stop.wait(max(0.0, min(began + self.fast_pace, next_slow) - self.monotonic()))

    @property
    def fast_pace(self) -> float:
        """Seconds between fast ticks now: full pace while offline pods use CPU, relaxed while they do not."""
        return self.config.fast_interval if self._offline_busy else self.config.fast_idle_interval

    # -- report -------------------------------------------------------------------------------------
    def build_report(self, state: NodeState) -> NodeReport:
        cpu_p, mem_p, io_p = node_pressure(self.paths)
        pods = [PodUsage(s.pod.uid, s.pod.namespace, s.pod.name, s.pod.qos_level, s.cpu_used / 1000.0, s.memory_used,
                         list(s.containers), s.cpu_pressure, s.memory_pressure) for s in state.pods]
        batch = self.batch or BatchAllocatable(0, 0)
        return NodeReport(
            identity=Identity(self.config.node_name, __version__, self.boot_id, 0, int(self.clock() * 1e9),
                              int(self.config.slow_interval * 1000), runs_pods=self.runtime is not None),
            capacity=self.capacity, devices=self._devices,
            load=Load(state.cpu_used / 1000.0, state.memory_used, cpu_p, mem_p, io_p, pods),
            colocation=Colocation(batch.cpu_millis, batch.memory_bytes, self.quota, list(self.unreported),
                                  self.profiles.current.label, self.eviction_state.under_pressure),
            runtime=self.runtime.runtime() if self.runtime is not None else [])


def _now(clock: Callable[[], float]) -> datetime:
    return datetime.fromtimestamp(clock(), tz=UTC)


def _default_capacity(paths: HostPaths) -> Capacity:
    from agent.collectors.topology import read_capacity
    return read_capacity(paths)
