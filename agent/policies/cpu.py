"""Offline CPU suppression and online CPU burst.

Offline pods run as SCHED_IDLE (``cpu.idle``) where the kernel has it, else
with the minimum share; together they live under the offline parent, whose
CFS quota, when it clamps, is ``capacity × threshold − online − system`` —
what online work leaves — never below a floor.

Where offline pods are SCHED_IDLE the kernel already hands every online
wake-up the CPU at once, so a quota held all the time only leaves CPU idle:
with ``clampOnSignals`` the quota stays open (no limit) and clamps only while
online signals call for it (:func:`online_signal`: online use rising within a
fast window, online tasks stalled waiting for a CPU), for ``clampHold`` after
the last signal.  Without SCHED_IDLE (an old kernel, or the profile turning it
off) the quota is the protection and always clamps, recomputed on the fast
path so that an online burst squeezes offline work within a fast tick.
Online pods whose QoS level the profile names get a CFS burst allowance of a
share of their CPU limit.

Offline means the QoS level BE, never the Kubernetes QoS class.  In the
kubelet's layout an online pod without requests is BestEffort and lives in the
offline parent (``kubepods/besteffort``); while one does, that parent gets no
quota (it would throttle the online pod with the offline work) and each offline
pod in it gets an equal share of the offline quota on its own cgroup instead
(:func:`quota_plan`); the fast loop, which can only move the parent's quota,
waits for the slow loop then.  An online pod is never given ``cpu.idle``, the
minimal share or any part of the offline quota.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.cgroups.backend import PERIOD_US
from agent.intents import CgroupWrite
from agent.policies.nodestate import NodeState, inside
from agent.profile import BurstSettings, CpuSettings


def offline_quota(capacity: float, online: float, system: float, settings: CpuSettings) -> int:
    """Millicores the offline parent may use."""
    room = capacity * settings.offline_threshold_percent / 100.0 - online - system
    floor = capacity * settings.offline_floor_percent / 100.0
    return int(min(capacity, max(floor, room)))


MIN_POD_QUOTA = 10  # millicores: the smallest CFS quota the kernel takes (1 ms per 100 ms period)


def on_signals(state: NodeState, settings: CpuSettings) -> bool:
    """Whether the quota clamps only on online signals: the profile asks for it and offline pods are
    SCHED_IDLE here (the kernel's preemption protects online work; the quota is no longer the protection)."""
    return settings.clamp_on_signals and settings.use_cpu_idle and state.has_cpu_idle


@dataclass(frozen=True, slots=True)
class OnlineSignals:
    """What online work did in the last fast window, as the fast loop measured it."""

    online: float            # millicores online pods used in the window
    baseline: float          # millicores they used before it (the slow loop's last one-second figure)
    stall: float | None      # percent of the window online tasks waited for a CPU (PSI; None: not kept here)


def online_signal(signals: OnlineSignals, capacity: float, settings: CpuSettings) -> str | None:
    """Why online work needs the offline quota clamped now (None: it does not)."""
    rise = signals.online - signals.baseline
    if rise > capacity * settings.online_rise_percent / 100.0:
        return f"online rose {rise:.0f}m (over {settings.online_rise_percent:g}% of {capacity:.0f}m)"
    if signals.stall is not None and signals.stall > settings.online_stall_percent:
        return f"online stalled {signals.stall:.0f}% of the window (over {settings.online_stall_percent:g}%)"
    return None


@dataclass(frozen=True)
class QuotaPlan:
    """Where the offline quota goes this tick, and the writes that put it there."""

    quota: int | None               # millicores all offline work may use (None: open, no limit)
    writes: list[CgroupWrite]
    capped: frozenset[str]          # offline pod cgroups carrying their share of it (the parent is shared)
    on_parent: bool                 # the quota is on the offline parent (the fast loop may move it)


def quota_write(state: NodeState, settings: CpuSettings, *, clamped: bool = True) -> CgroupWrite:
    if not clamped:
        return CgroupWrite(state.offline_parent, "cpu.quota", None,
                           "open: offline pods are SCHED_IDLE and no online signal calls for a clamp")
    quota = offline_quota(state.cpu_capacity, state.online_cpu, state.system_cpu, settings)
    return CgroupWrite(state.offline_parent, "cpu.quota", quota,
                       f"online {state.online_cpu:.0f}m + system {state.system_cpu:.0f}m of "
                       f"{state.cpu_capacity}m at {settings.offline_threshold_percent:g}%")


def quota_plan(state: NodeState, settings: CpuSettings, capped: frozenset[str] = frozenset(), *,
               clamped: bool = True) -> QuotaPlan:
    """The offline quota on the offline parent — or, while online pods live in it, split over the offline
    pods in it, the parent left without one.  ``capped``: the pods given a share by the previous plan,
    whose share is lifted when they no longer need one (the kubelet gives a BestEffort pod no quota).
    ``clamped`` False: the quota is open (see :func:`on_signals`)."""
    quota = offline_quota(state.cpu_capacity, state.online_cpu, state.system_cpu, settings) if clamped else None
    parent = state.offline_parent
    sharing = state.online_in_offline_parent
    if not sharing and not capped:
        return QuotaPlan(quota, [quota_write(state, settings, clamped=clamped)], frozenset(), True)
    members = [s for s in state.offline if s.path is not None and inside(s.path, parent)] if sharing else []
    if quota is None:  # open: no share on any pod either
        writes = [CgroupWrite(parent, "cpu.quota", None, "open: no online signal calls for a clamp")]
        writes += [CgroupWrite(path, "cpu.quota", None, "open: no online signal calls for a clamp")
                   for path in sorted(capped)]
        return QuotaPlan(None, writes, frozenset(), not sharing)
    share = max(MIN_POD_QUOTA, quota // len(members)) if members else quota
    if sharing:
        names = ", ".join(sorted(s.pod.key for s in sharing))
        why = f"online pods in the offline parent ({names}): the offline quota goes on the offline pods"
    else:  # the parent holds offline pods only again: lift the pods' shares first, the parent's quota next tick
        why = "offline pods' shares being lifted: the offline parent's quota comes back next tick"
    writes = [CgroupWrite(parent, "cpu.quota", None, why)]
    writes += [CgroupWrite(s.path, "cpu.quota", share, f"offline: {share}m, its share of the offline quota {quota}m "
                                                       f"(online pods share its parent)")
               for s in members if s.path is not None]
    now = frozenset(s.path for s in members if s.path is not None)
    writes += [CgroupWrite(path, "cpu.quota", None, "offline quota back on the offline parent")
               for path in sorted(capped - now)]
    return QuotaPlan(quota, writes, now, False)


def offline_pod_writes(state: NodeState, settings: CpuSettings) -> list[CgroupWrite]:
    idle = settings.use_cpu_idle and state.has_cpu_idle
    # Where the kernel has cpu.idle but the profile turned it off, it is cleared first: an idle group
    # refuses a cpu.shares write (EINVAL), so a group left idle by an earlier profile would keep it.
    undo = state.has_cpu_idle and not idle
    out = []
    if state.has_cpu_idle and state.owns_offline_parent and state.offline_parent and \
            not state.online_in_offline_parent:
        # The scheduler compares tasks of two cgroups at the level where their paths meet: for an online
        # and an offline pod that is online-parent against offline-parent, so only an idle offline
        # *parent* makes every online wake-up preempt offline work at once.  The pods' own flag below
        # orders offline pods against other tasks inside that parent.
        out.append(CgroupWrite(state.offline_parent, "cpu.idle", int(idle),
                               "offline parent: SCHED_IDLE" if idle else "offline parent: cpu.idle off"))
    for sample in state.offline:
        if sample.path is None:
            continue
        if idle:
            out.append(CgroupWrite(sample.path, "cpu.idle", 1, "offline: SCHED_IDLE"))
        else:
            if undo:
                out.append(CgroupWrite(sample.path, "cpu.idle", 0, "offline: cpu.idle off"))
            out.append(CgroupWrite(sample.path, "cpu.shares", 2, "offline: minimal share"))
    return out


def burst_writes(state: NodeState, settings: BurstSettings) -> list[CgroupWrite]:
    if not settings.enabled or not state.has_cpu_burst:
        return []
    out = []
    for sample in state.online:
        pod = sample.pod
        if sample.path is None or pod.cpu_limit is None or pod.qos_level.name not in settings.qos_levels:
            continue
        burst_us = int(pod.cpu_limit * PERIOD_US // 1000 * settings.burst_percent / 100.0)
        out.append(CgroupWrite(sample.path, "cpu.burst", burst_us, f"burst {settings.burst_percent:g}% of limit"))
    return out


def cpu_intents(state: NodeState, cpu: CpuSettings, burst: BurstSettings) -> list[CgroupWrite]:
    return [*quota_plan(state, cpu).writes, *offline_pod_writes(state, cpu),
            *burst_writes(state, burst)]
