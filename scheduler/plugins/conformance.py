"""conformance: never evict critical pods (kube-system, system-*-critical classes).

It has an ``evictable`` hook, so the session applies its refusal to whichever
tier decides victims (in Volcano a later tier may take a pod it refused).
"""

from __future__ import annotations

from scheduler.framework.plugin import Plugin
from scheduler.framework.snapshot import TaskInfo


class Conformance(Plugin):
    name = "conformance"
    hooks = ("preemptable", "reclaimable", "evictable")

    def preemptable(self, evictor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        return [t for t in candidates if not t.pod.critical]

    reclaimable = preemptable

    def evictable(self, task: TaskInfo) -> bool:
        return not task.pod.critical
