"""Offline CPU suppression and online CPU burst.

Offline pods run as SCHED_IDLE (``cpu.idle``) where the kernel has it, else
with the minimum share; together they live under the offline parent, whose
CFS quota is ``capacity × threshold − online − system`` — what online work
leaves — never below a floor.  Recomputed on the fast path, so an online burst
squeezes offline work within one fast tick.  Online pods whose QoS level the
profile names get a CFS burst allowance of a share of their CPU limit.
"""

from __future__ import annotations

from agent.cgroups.backend import PERIOD_US
from agent.intents import CgroupWrite
from agent.policies.nodestate import NodeState
from agent.profile import BurstSettings, CpuSettings


def offline_quota(capacity: float, online: float, system: float, settings: CpuSettings) -> int:
    """Millicores the offline parent may use."""
    room = capacity * settings.offline_threshold_percent / 100.0 - online - system
    floor = capacity * settings.offline_floor_percent / 100.0
    return int(min(capacity, max(floor, room)))


def quota_write(state: NodeState, settings: CpuSettings) -> CgroupWrite:
    quota = offline_quota(state.cpu_capacity, state.online_cpu, state.system_cpu, settings)
    return CgroupWrite(state.offline_parent, "cpu.quota", quota,
                       f"online {state.online_cpu:.0f}m + system {state.system_cpu:.0f}m of "
                       f"{state.cpu_capacity}m at {settings.offline_threshold_percent:g}%")


def offline_pod_writes(state: NodeState, settings: CpuSettings) -> list[CgroupWrite]:
    idle = settings.use_cpu_idle and state.has_cpu_idle
    # Where the kernel has cpu.idle but the profile turned it off, it is cleared first: an idle group
    # refuses a cpu.shares write (EINVAL), so a group left idle by an earlier profile would keep it.
    undo = state.has_cpu_idle and not idle
    out = []
    if state.has_cpu_idle and state.owns_offline_parent and state.offline_parent:
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
    return [quota_write(state, cpu), *offline_pod_writes(state, cpu), *burst_writes(state, burst)]
