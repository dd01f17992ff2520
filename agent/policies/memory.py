"""Memory: offline pods limited to their batch-memory; on cgroup v2 online pods protected and
offline pods throttled (``memory.high``) before any OOM kill."""

from __future__ import annotations

from agent.intents import CgroupWrite
from agent.policies.nodestate import NodeState
from agent.profile import MemorySettings
from proto.model import QosLevel


def memory_intents(state: NodeState, settings: MemorySettings) -> list[CgroupWrite]:
    out = []
    for sample in state.pods:
        pod, path = sample.pod, sample.path
        if path is None:
            continue
        if pod.offline:
            limit = pod.batch_memory if settings.limit_offline_to_batch and pod.batch_memory else pod.memory_limit
            if settings.limit_offline_to_batch and pod.batch_memory:
                out.append(CgroupWrite(path, "memory.limit", pod.batch_memory, "offline: batch-memory request"))
            if state.cgroup_version == 2 and limit:
                out.append(CgroupWrite(path, "memory.high", int(limit * settings.offline_high_percent / 100),
                                       f"offline: throttle at {settings.offline_high_percent:g}% of its limit"))
        elif state.cgroup_version == 2 and settings.protect_online and pod.memory_request:
            knob = "memory.min" if pod.qos_level == QosLevel.LC else "memory.low"
            out.append(CgroupWrite(path, knob, pod.memory_request, f"online {pod.qos_level.name}: protect request"))
    return out
