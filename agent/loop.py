"""The node agent: collect -> decide -> act, on two clocks.

The *fast* loop (every ``fast_interval``, 25 ms by default, while offline pods
use CPU; 200 ms while they do not; at once when a PSI trigger fires, where the
kernel lets the agent set one fine enough) reads two cheap counters — the CPU
time of all pods and of the offline parent — and, where the kernel keeps it,
the online pods' CPU stall.  Where offline pods are SCHED_IDLE the offline
quota stays open and the fast loop clamps it when online signals call for it
(online use rising, online tasks stalled; see
:func:`agent.policies.cpu.online_signal`), opening it again once no signal has
come for ``clampHold``.  Elsewhere the quota always clamps and the fast loop
cuts it as soon as online work needs the room, letting it rise again once
online use has left room for ``clampHold``.  The *slow* loop (every second)
recomputes everything from a full sample, applies per-pod cgroup settings,
evicts under real pressure (see :mod:`agent.policies.eviction`), updates the
batch allocatable, and publishes the node report.  Topology and devices are
refreshed on their own, longer intervals.

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
from agent.collectors.psi import StallTrigger, open_trigger, stall_counter
from agent.evictor import Evictor
from agent.fastloop import FastLoop
from agent.hostpaths import HostPaths
from agent.intents import BatchAllocatable, CgroupWrite
from agent.metrics import AgentMetrics
from agent.pods import PodInfo, PodSource
from agent.policies.batch import OvercommitState, batch_allocatable
from agent.policies.cpu import (
    QuotaPlan,
    burst_writes,
    offline_pod_writes,
    offline_quota,
    on_signals,
    quota_plan,
)
from agent.policies.eviction import EvictionState, decide_evictions
from agent.policies.memory import memory_intents
from agent.policies.nodestate import NodeState, PodSample
from agent.policies.numa import REASONS as UNPINNED_REASONS
from agent.policies.numa import PinProblem, numa_intents, pinned
from agent.profile import ProfileError, ProfileSpec, ProfileWatcher, numeric_settings
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
    offline_busy_percent: float = 1.0  # offline work above this (of capacity) keeps the fast loop at full pace
    psi_trigger: bool = True       # wake the fast loop on a PSI trigger where the kernel allows a window under 1 s
    enforce: bool = True           # False: observe and report only


class LocalPods(Protocol):
    """Embedded mode's local runtime as the agent drives it (see agent.embedded.LocalRuntime)."""

    def tick(self) -> None: ...

    def runtime(self) -> list[PodRuntime]: ...


class Agent(FastLoop):
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
        self._pod_paths: dict[tuple[str, str, bool], str] = {}  # (uid, QoS class, offline) -> its cgroup
        self._container_meters: dict[str, CpuMeter] = {}
        # online use in a fast window: the online tree's own counter where one cgroup holds every online pod and
        # nothing else (a layout of our own), else all pods' less offline's (the kubelet's: read a moment apart)
        online_tree = layout.online_parent if layout.online_tree else layout.root
        self._fast_tree = CpuMeter(backend.cpu_usage_reader(online_tree), monotonic)
        self._fast_offline = CpuMeter(backend.cpu_usage_reader(layout.offline_parent), monotonic)
        # online tasks' CPU stall (PSI "some", as 1000 x the share of time), where the kernel keeps it per cgroup
        stall = stall_counter(backend, layout.online_parent) if layout.online_parent else None
        self._fast_stall = CpuMeter(stall, monotonic) if stall is not None else None
        self.trigger: StallTrigger | None = None  # opened by run(), where the kernel allows a fine one
        self.trigger_used = ""                    # which one run() used ("": none)
        self._detail: dict[str, tuple] = {}   # pod cgroup -> (containers, cpu PSI, memory PSI)
        self._detail_at: float | None = None
        self._fast_online: float | None = None
        self._fast_recent: deque[tuple[float, float]] = deque()  # (time, online millicores) of recent fast windows
        self._fast_cut_at: float | None = None  # when the fast loop last cut the quota, until it is fully reopened
        self._slow_quota: int | None = None     # the quota the slow loop decided last (the fast loop's ceiling)
        self._signals = False                   # the quota clamps only on online signals (offline is SCHED_IDLE)
        self._clamp_until: float | None = None  # signals: the clamp holds until then (None: open)
        self._slow_online: float | None = None  # online millicores of the last slow sample (the signals' baseline)
        self._quota_area = 0.0                  # ∫ quota dt since the last slow sample (open: capacity)
        self._quota_at = self._quota_since = monotonic()
        self._quota_clamped_since_slow = False
        self._pressure_now: tuple[Pressure, Pressure, Pressure] | None = None  # node PSI of the last sample
        self._settings_shown = False  # the spec's settings are in the metrics
        self._node_meter_ready = False  # a slow sample has been taken (the next has rates)
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
        # fast ticks' durations, observed into the histogram by the slow loop: one observe a tick, at 40 ticks
        # a second on a cold cache, cost more than the tick's own work
        self._fast_durations: list[float] = []
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
        self._pressure_now = node_pressure(self.paths)
        now = self.monotonic()
        detail = self._detail_at is None or now - self._detail_at >= self.config.detail_interval
        if detail:
            self._detail_at = now
        samples = []
        seen: set[str] = set()
        for pod in self.pods.pods():
            samples.append(self._sample_pod(pod, seen, detail))
        for gone in [k for k in self._pod_meters if k not in seen]:  # pods that left
            del self._pod_meters[gone]
            self.backend.forget(gone)
        self._detail = {k: d for k, d in self._detail.items() if k in seen}
        if detail:
            self._container_meters = {k: m for k, m in self._container_meters.items() if k in seen}
        return NodeState(cpu_capacity=self.capacity.cpu_millis, memory_capacity=mem_total or self.capacity.memory_bytes,
                         cpu_used=node_cpu, memory_used=mem_used, pods=tuple(samples),
                         offline_parent=self.layout.offline_parent, cgroup_version=self.backend.version,
                         has_cpu_idle=self.has_cpu_idle, has_cpu_burst=self.has_cpu_burst,
                         owns_offline_parent=self.layout.owns_parents,
                         numa_zones=tuple(self.capacity.numa_zones), offline_quota=self._quota_mean(now),
                         memory_pressure=self._pressure_now[1])

    def _sample_pod(self, pod: PodInfo, seen: set[str], detail: bool) -> PodSample:
        key = (pod.uid, pod.qos_class, pod.offline)
        path = self._pod_paths.get(key)
        if path is None:
            if len(self._pod_paths) > 4 * len(self._pod_meters) + 256:  # pods come and go: start over now and then
                self._pod_paths.clear()
            path = self._pod_paths[key] = self.layout.pod_path(pod.uid, pod.qos_class, offline=pod.offline)
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
                ccpu, cmem = self._usage(self._container_meters, cpath, seen, keep=False)
            except (OSError, ValueError):  # a container that just exited
                continue
            name = cpath.rsplit("/", 1)[-1]
            containers.append(ContainerUsage(container_id(name) or name, ccpu / 1000.0, cmem))
        return tuple(containers), self._pressure(path, "cpu"), self._pressure(path, "memory")

    def _usage(self, meters: dict[str, CpuMeter], path: str, seen: set[str], keep: bool = True) -> tuple[float, int]:
        """(millicores since the last reading, working-set bytes) of one cgroup (``keep``: read every second,
        its files kept open)."""
        seen.add(path)
        meter = meters.get(path)
        if meter is None:
            meter = meters[path] = CpuMeter(lambda: self.backend.cpu_usage_ns(path, keep=keep), self.monotonic)
        return meter.sample() or 0.0, self.backend.memory_usage(path, keep=keep)

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
        spec = self._effective_spec()
        if spec != self.spec or not self._settings_shown:
            self.metrics.settings_in_force(numeric_settings(spec))
            self._settings_shown = True
        self.spec = spec
        self._refresh_slow_collectors(started)
        if self.runtime is not None:
            try:  # exits, restarts and stops first, so this tick sees the pods as they are now
                self.runtime.tick()
            except Exception:  # the runtime's trouble must not cost the node its QoS or its report
                log.exception("local runtime tick failed")
        state = self.observe()
        self._system_cpu, self._offline_cpu = state.system_cpu, state.offline_cpu
        if self._node_meter_ready:  # the first sample has no rates yet: no baseline
            self._slow_online = state.online_cpu
        self._node_meter_ready = True
        self.metrics.observed(cpu_used=state.cpu_used, memory_used=state.memory_used, online_cpu=state.online_cpu)
        if self.config.enforce:
            numa = numa_intents(state)
            self._note_unpinned(numa.problems)
            plan = self._quota_plan(state, started)
            writes = plan.writes + offline_pod_writes(state, self.spec.cpu) + burst_writes(state, self.spec.burst) + \
                memory_intents(state, self.spec.memory)
            self._apply(writes + numa.writes)
            self._capped, self._quota_on_parent = plan.capped, plan.on_parent
            self._set_quota(plan.quota)
            self._slow_quota, self._fast_cut_at = plan.quota, None
            self._evict(state)
        else:  # what it would be: open where offline pods are SCHED_IDLE (no fast loop to see signals here)
            self.quota = None if on_signals(state, self.spec.cpu) else \
                offline_quota(state.cpu_capacity, state.online_cpu, state.system_cpu, self.spec.cpu)
        self.batch, self.overcommit_state = batch_allocatable(state, self.spec.overcommit, self.overcommit_state)
        self.metrics.offered(self.batch.cpu_millis, self.batch.memory_bytes)
        if self.node_resources is not None and self.config.enforce:
            self.node_resources(self.batch.cpu_millis, self.batch.memory_bytes)
        report = self.build_report(state)
        self.publish(report)
        self.unreported.clear()
        durations, self._fast_durations = self._fast_durations, []
        for seconds in durations:
            self._fast_seconds.observe(seconds)
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

    def _quota_plan(self, state: NodeState, now: float) -> QuotaPlan:
        """The slow loop's quota: where offline pods are SCHED_IDLE, open unless the fast loop's clamp holds
        (then the lower of its figure and the slow sample's); elsewhere clamped, from the slow sample."""
        self._signals = on_signals(state, self.spec.cpu)
        if not self._signals:
            self._clamp_until = None
            return quota_plan(state, self.spec.cpu, self._capped)
        held = self._clamp_until is not None and now < self._clamp_until
        if not held:
            self._clamp_until = None
        plan = quota_plan(state, self.spec.cpu, self._capped, clamped=held)
        if not (held and plan.on_parent and plan.quota is not None and self.quota is not None
                and self.quota < plan.quota):
            return plan
        keep = [replace(w, value=self.quota, why=f"clamp held (online signal): {self.quota}m")
                if w.path == state.offline_parent and w.knob == "cpu.quota" else w for w in plan.writes]
        return replace(plan, quota=self.quota, writes=keep)

    def _apply(self, writes: list[CgroupWrite]) -> None:
        self.metrics.cgroup_writes.inc(len(self.executor.apply(writes)))
        for w in writes:
            if w.path == self.layout.offline_parent and w.knob == "cpu.quota" and not isinstance(w.value, str):
                self._set_quota(w.value)

    def _set_quota(self, value: int | None) -> None:
        """The offline quota now in force (None: open), with its time-weighted mean kept for the next sample."""
        now = self.monotonic()
        capacity = self.capacity.cpu_millis
        self._quota_area += (capacity if self.quota is None else self.quota) * (now - self._quota_at)
        self._quota_at = now
        if value is not None:
            self._quota_clamped_since_slow = True
        self.quota = value
        self.metrics.quota_in_force(value, capacity)

    def _quota_mean(self, now: float) -> float | None:
        """Millicores the offline quota allowed on average since the last call (None: open all along)."""
        capacity = self.capacity.cpu_millis
        area = self._quota_area + (capacity if self.quota is None else self.quota) * (now - self._quota_at)
        span = now - self._quota_since
        clamped = self._quota_clamped_since_slow or self.quota is not None
        self._quota_area, self._quota_at, self._quota_since = 0.0, now, now
        self._quota_clamped_since_slow = False
        if not clamped:
            return None
        return area / span if span > 0 else float(capacity if self.quota is None else self.quota)

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

    # -- the control thread -------------------------------------------------------------------------
    def run(self, stop: threading.Event, after_slow: Callable[[], None] | None = None) -> None:
        """Run both loops on this thread until ``stop`` is set.

        One thread, so the loops never race on a cgroup file: a slow tick takes
        the place of the fast tick due at that moment.  The fast loop runs at
        ``fast_interval`` while offline pods use CPU and at ``fast_idle_interval``
        while they do not (nothing to squeeze then; each wake-up costs CPU), and
        at once when the PSI trigger fires (see :mod:`agent.collectors.psi`).
        A failing tick is logged and the loop goes on.
        """
        if self.config.psi_trigger and self.config.enforce and self.trigger is None:
            self.trigger = self._open_trigger()
            self.trigger_used = str(self.trigger) if self.trigger is not None else ""
        waiter = self.trigger.waiter() if self.trigger is not None else None
        next_slow = self.monotonic()
        cpu = time.thread_time()
        try:
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
                timeout = max(0.0, min(began + self.fast_pace, next_slow) - self.monotonic())
                # a plain sleep, not stop.wait(): half the CPU per wake-up (the loop wakes 40 times a second;
                # a stop is seen within one pace)
                if waiter is None:
                    time.sleep(timeout)
                elif waiter(timeout):
                    self.metrics.psi_wakeups.inc()
        finally:
            if self.trigger is not None:
                self.trigger.close()
                self.trigger = None

    def _open_trigger(self) -> StallTrigger | None:
        """A PSI trigger on the online pods' CPU stall (cgroup v2: the online parent's cpu.pressure; else the
        node's /proc/pressure/cpu), where the kernel allows a window under a second; None elsewhere."""
        candidates = []
        if self.layout.online_parent:
            try:
                candidates.append(self.backend.pressure_path(self.layout.online_parent, "cpu"))
            except KeyError:
                pass
        candidates.append(self.paths.proc / "pressure" / "cpu")
        for path in candidates:
            trigger = open_trigger(path)
            if trigger is not None:
                log.info("fast loop wakes on %s", trigger)
                return trigger
        return None

    @property
    def fast_pace(self) -> float:
        """Seconds between fast ticks now: full pace while offline pods use CPU, relaxed while they do not."""
        return self.config.fast_interval if self._offline_busy else self.config.fast_idle_interval

    # -- report -------------------------------------------------------------------------------------
    def build_report(self, state: NodeState) -> NodeReport:
        cpu_p, mem_p, io_p = self._pressure_now or node_pressure(self.paths)
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
