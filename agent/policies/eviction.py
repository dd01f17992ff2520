"""Eviction: when the node stays above its high watermark, offline pods go until it is below the low one.

A resource enters *evicting* after ``samples`` consecutive samples above its
high watermark and stays there until a sample is below its low watermark
(hysteresis: a node hovering between the two keeps shedding offline work,
at the configured rate).  The node is *under pressure* while either resource
is evicting; in Kubernetes mode that is when it carries the
``volcano.sh/offline-job-evicting`` taint.  Only offline pods are ever chosen — lowest priority first, then the heaviest
user of the resource under pressure — and no more than ``maxPerInterval`` in
any ``interval``.  The state (consecutive samples over the watermark, the
current interval's evictions, pods already asked to leave) is passed in and
returned, so the decision stays a pure function.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from agent.intents import Evict
from agent.policies.nodestate import NodeState, PodSample
from agent.profile import EvictionSettings


@dataclass(frozen=True)
class EvictionState:
    cpu_over: int = 0                     # consecutive samples above the CPU high watermark
    memory_over: int = 0
    interval_start: float = 0.0           # seconds (agent clock)
    evicted_in_interval: int = 0
    pending: frozenset = field(default_factory=frozenset)  # uids asked to leave, still present
    cpu_evicting: bool = False            # entered after `samples` over high; left below low
    memory_evicting: bool = False

    @property
    def under_pressure(self) -> bool:
        return self.cpu_evicting or self.memory_evicting


def _order(samples: list[PodSample], resource: str) -> list[PodSample]:
    usage = (lambda s: s.cpu_used) if resource == "cpu" else (lambda s: s.memory_used)
    return sorted(samples, key=lambda s: (s.pod.priority, -usage(s), s.pod.uid))


def decide_evictions(state: NodeState, settings: EvictionSettings, previous: EvictionState,
                     now: float) -> tuple[list[Evict], EvictionState]:
    present = {s.pod.uid for s in state.pods}
    st = replace(previous, pending=frozenset(u for u in previous.pending if u in present))
    if now - st.interval_start >= settings.interval:
        st = replace(st, interval_start=now, evicted_in_interval=0)
    cpu_pct = 100.0 * state.cpu_used / state.cpu_capacity if state.cpu_capacity else 0.0
    mem_pct = 100.0 * state.memory_used / state.memory_capacity if state.memory_capacity else 0.0
    cpu_over = st.cpu_over + 1 if cpu_pct > settings.cpu_high_percent else 0
    memory_over = st.memory_over + 1 if mem_pct > settings.memory_high_percent else 0
    st = replace(st, cpu_over=cpu_over, memory_over=memory_over,
                 cpu_evicting=settings.enabled and (cpu_over >= settings.samples or
                                                    (st.cpu_evicting and cpu_pct >= settings.cpu_low_percent)),
                 memory_evicting=settings.enabled and (memory_over >= settings.samples or
                                                       (st.memory_evicting and mem_pct >= settings.memory_low_percent)))
    if not settings.enabled:
        return [], st
    # Memory first: running out of it kills, running out of CPU only slows.
    plans = [("memory", st.memory_evicting, st.memory_over,
              state.memory_used - state.memory_capacity * settings.memory_low_percent / 100,
              mem_pct, settings.memory_high_percent, settings.memory_low_percent),
             ("cpu", st.cpu_evicting, st.cpu_over, state.cpu_used - state.cpu_capacity * settings.cpu_low_percent / 100,
              cpu_pct, settings.cpu_high_percent, settings.cpu_low_percent)]
    chosen: list[Evict] = []
    taken = set(st.pending)
    for resource, evicting, over, excess, pct, high, low in plans:
        if not evicting or excess <= 0:
            continue
        candidates = [s for s in state.offline if s.pod.uid not in taken]
        for sample in _order(candidates, resource):
            if excess <= 0 or st.evicted_in_interval + len(chosen) >= settings.max_per_interval:
                break
            pod = sample.pod
            chosen.append(Evict(pod.uid, pod.namespace, pod.name,
                                f"node {resource} at {pct:.0f}% "
                                + (f"for {over} samples (high watermark {high:g}%)" if over else
                                   f"(still above the low watermark {low:g}%)")
                                + f": evicting offline pods, lowest priority first, until below {low:g}%",
                                resource))
            taken.add(pod.uid)
            excess -= sample.cpu_used if resource == "cpu" else sample.memory_used
    st = replace(st, evicted_in_interval=st.evicted_in_interval + len(chosen), pending=frozenset(taken))
    return chosen, st
