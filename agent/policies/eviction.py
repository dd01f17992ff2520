"""Eviction: for real pressure only — memory running out, online and system demand over the
watermark, or offline pods starving.  A node busy because offline work fills its idle CPU is
co-location working, not pressure, and evicts nothing.

Three triggers, each with hysteresis, each a count of consecutive samples kept in the state:

* **memory** — node memory in use (working set) above ``memoryHighPercent``, or the node's memory
  PSI (``full avg10``) at least ``memoryStallPercent``, for ``samples`` samples; it goes on until
  memory is below ``memoryLowPercent`` with no stall.
* **cpu demand** — online pods and the system (everything but offline pods' own use) above
  ``cpuHighPercent`` for ``samples`` samples; it goes on until they are below ``cpuLowPercent``.
* **starvation** — offline pods' *satisfaction*, the CPU they could get (what online and system work
  leave, within the offline quota) against the CPU they request (batch-cpu, else cpu requests), below
  ``starvationPercent`` while they use at least ``starvationUsagePercent`` of what they could get (idle
  pods are not starving), for ``starvationSamples`` samples; it goes on until a sample is not starving.

The node is *under pressure* while any of them is evicting; in Kubernetes mode that is when it carries
the ``volcano.sh/offline-job-evicting`` taint.  Only offline pods are ever chosen — lowest priority
first, then the heaviest user of the resource under pressure — and no more than ``maxPerInterval`` in
any ``interval``.  Memory goes first (running out of it kills; running out of CPU only slows).  The
state (consecutive samples, the current interval's evictions, pods already asked to leave) is passed
in and returned, so the decision stays a pure function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from agent.intents import Evict
from agent.policies.nodestate import NodeState, PodSample, request
from agent.profile import EvictionSettings


@dataclass(frozen=True)
class EvictionState:
    cpu_over: int = 0                     # consecutive samples of online + system above the CPU high watermark
    memory_over: int = 0                  # ... of memory above its high watermark (or stalled)
    starving: int = 0                     # ... of offline pods starving
    interval_start: float = 0.0           # seconds (agent clock)
    evicted_in_interval: int = 0
    pending: frozenset = field(default_factory=frozenset)  # uids asked to leave, still present
    cpu_evicting: bool = False            # entered after `samples` over high; left below low
    memory_evicting: bool = False
    starvation_evicting: bool = False     # entered after `starvationSamples` starving; left when not

    @property
    def under_pressure(self) -> bool:
        return self.cpu_evicting or self.memory_evicting or self.starvation_evicting


@dataclass(frozen=True)
class _Plan:
    """One trigger's part of a decision: whether it evicts, how much to shed, the candidates' order."""

    resource: str       # "cpu" or "memory" (the eviction's label)
    evicting: bool
    excess: float       # millicores or bytes to shed (requested millicores for starvation)
    usage: str          # what is shed per pod: "cpu", "memory" or "request"
    reason: str


def satisfaction(state: NodeState) -> float | None:
    """What offline pods could get against what they request (None: they request nothing)."""
    requested = state.offline_requested
    return min(1.0, state.offline_allowed / requested) if requested > 0 else None


def starving(state: NodeState, settings: EvictionSettings) -> bool:
    """Offline pods get less than ``starvationPercent`` of their request and use what they can get."""
    s = satisfaction(state)
    if s is None or s * 100.0 >= settings.starvation_percent:
        return False
    return state.offline_cpu >= state.offline_allowed * settings.starvation_usage_percent / 100.0


@dataclass(frozen=True)
class _Levels:
    """One sample's readings against the watermarks, worked out once for the triggers and their reasons."""

    cpu_pct: float      # online and system CPU demand, percent of capacity
    mem_pct: float      # memory in use, percent of capacity
    stall: float        # node memory PSI "full avg10"
    stalled: bool       # at or above memoryStallPercent (where that is on)


def _levels(state: NodeState, settings: EvictionSettings) -> _Levels:
    cap, mem = state.cpu_capacity, state.memory_capacity
    stall = state.memory_pressure.full_avg10 if state.memory_pressure is not None else 0.0
    return _Levels(100.0 * state.demand_cpu / cap if cap else 0.0, 100.0 * state.memory_used / mem if mem else 0.0,
                   stall, settings.memory_stall_percent > 0 and stall >= settings.memory_stall_percent)


#: what one offline pod frees, by what a plan sheds
_USAGE: dict[str, Callable[[PodSample], float]] = {
    "cpu": lambda s: s.cpu_used, "memory": lambda s: s.memory_used, "request": lambda s: request(s.pod)}


def _order(samples: list[PodSample], usage: str) -> list[PodSample]:
    key = _USAGE[usage]
    return sorted(samples, key=lambda s: (s.pod.priority, -key(s), s.pod.uid))


def _update(levels: _Levels, state: NodeState, settings: EvictionSettings, st: EvictionState) -> EvictionState:
    """The counters and the three triggers' states after this sample."""
    cpu_pct, mem_pct, stalled = levels.cpu_pct, levels.mem_pct, levels.stalled
    cpu_over = st.cpu_over + 1 if cpu_pct > settings.cpu_high_percent else 0
    memory_over = st.memory_over + 1 if mem_pct > settings.memory_high_percent or stalled else 0
    hungry = starving(state, settings)
    starved = st.starving + 1 if hungry else 0
    on = settings.enabled
    return replace(
        st, cpu_over=cpu_over, memory_over=memory_over, starving=starved,
        cpu_evicting=on and (cpu_over >= settings.samples or
                             (st.cpu_evicting and cpu_pct >= settings.cpu_low_percent)),
        memory_evicting=on and (memory_over >= settings.samples or
                                (st.memory_evicting and (mem_pct >= settings.memory_low_percent or stalled))),
        starvation_evicting=on and hungry and (starved >= settings.starvation_samples or st.starvation_evicting))


def _plans(levels: _Levels, state: NodeState, settings: EvictionSettings, st: EvictionState) -> list[_Plan]:
    cap, mem = state.cpu_capacity, state.memory_capacity
    mem_pct, cpu_pct, stall, is_stalled = levels.mem_pct, levels.cpu_pct, levels.stall, levels.stalled
    memory_excess = state.memory_used - mem * settings.memory_low_percent / 100
    if is_stalled:
        memory_excess = max(memory_excess, 1.0)  # stalled: at least one pod goes, whatever the working set
    low, high = settings.memory_low_percent, settings.memory_high_percent
    stalled = f", memory stall {stall:g}% (at most {settings.memory_stall_percent:g}%)" if is_stalled else ""
    memory_why = (f"node memory at {mem_pct:.0f}%{stalled} "
                  + (f"for {st.memory_over} samples (high watermark {high:g}%)" if st.memory_over else
                     f"(still above the low watermark {low:g}% or stalled)")
                  + f": evicting offline pods, lowest priority first, until below {low:g}%")
    low, high = settings.cpu_low_percent, settings.cpu_high_percent
    cpu_why = (f"online and system cpu at {cpu_pct:.0f}% "
               + (f"for {st.cpu_over} samples (high watermark {high:g}%)" if st.cpu_over else
                  f"(still above the low watermark {low:g}%)")
               + f": evicting offline pods, lowest priority first, until below {low:g}%")
    requested, allowed = state.offline_requested, state.offline_allowed
    s = satisfaction(state) or 0.0
    starve_why = (f"offline pods starving: they could get {allowed:.0f}m of the {requested:.0f}m they request "
                  f"({100 * s:.0f}%, below {settings.starvation_percent:g}%) for {st.starving} samples: evicting "
                  f"offline pods, lowest priority first, until the rest get {settings.starvation_percent:g}%")
    return [
        _Plan("memory", st.memory_evicting, memory_excess, "memory", memory_why),
        # demand above the low watermark leaves offline work no room: offline use counts as excess too
        _Plan("cpu", st.cpu_evicting, state.demand_cpu + state.offline_cpu - cap * low / 100, "cpu", cpu_why),
        _Plan("cpu", st.starvation_evicting, requested - allowed * 100.0 / max(settings.starvation_percent, 1e-9),
              "request", starve_why),
    ]


def decide_evictions(state: NodeState, settings: EvictionSettings, previous: EvictionState,
                     now: float) -> tuple[list[Evict], EvictionState]:
    present = {s.pod.uid for s in state.pods}
    st = replace(previous, pending=frozenset(u for u in previous.pending if u in present))
    if now - st.interval_start >= settings.interval:
        st = replace(st, interval_start=now, evicted_in_interval=0)
    levels = _levels(state, settings)
    st = _update(levels, state, settings, st)
    if not settings.enabled:
        return [], st
    chosen: list[Evict] = []
    taken = set(st.pending)
    for plan in _plans(levels, state, settings, st):
        excess = plan.excess
        if not plan.evicting or excess <= 0:
            continue
        candidates = [s for s in state.offline if s.pod.uid not in taken and
                      (plan.usage != "request" or request(s.pod) > 0)]
        for sample in _order(candidates, plan.usage):
            if excess <= 0 or st.evicted_in_interval + len(chosen) >= settings.max_per_interval:
                break
            pod = sample.pod
            chosen.append(Evict(pod.uid, pod.namespace, pod.name, plan.reason, plan.resource))
            taken.add(pod.uid)
            excess -= _USAGE[plan.usage](sample)
    st = replace(st, evicted_in_interval=st.evicted_in_interval + len(chosen), pending=frozenset(taken))
    return chosen, st
