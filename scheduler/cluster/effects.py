"""Where decisions land when the cluster is the scheduler's own cache (the simulator).

The Kubernetes and embedded modes supply their own effects with the same
methods; the session and the actions never know which one they talk to.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from scheduler.api.objects import Condition, Pod, PodGroup
from scheduler.cluster.cache import ClusterCache


class CacheEffects:
    """Binds, evictions and status applied straight to a :class:`ClusterCache`."""

    def __init__(self, cache: ClusterCache, clock: Callable[[], float] = time.time):
        self.cache = cache
        self.clock = clock  # Unix seconds: when a bind happened (usage estimates compare it with report times)

    def bind(self, pod: Pod, node: str, annotations: dict[str, str]) -> bool:
        return self.cache.bind(pod.uid, node, annotations, at=self.clock())

    def evict(self, pod: Pod, reason: str) -> None:
        self.cache.evict(pod.uid, f"Evicted: {reason}")

    def group_status(self, group: PodGroup, phase: str, conditions: list[Condition]) -> bool:
        return self.cache.set_group_status(group, phase, conditions)

    def pod_reason(self, pod: Pod, reason: str | None) -> None:
        self.cache.set_pod_reason(pod.uid, reason)

    def nominate(self, pod: Pod, node: str | None) -> None:
        self.cache.nominate(pod.uid, node)

    def queue_allocated(self, name: str, allocated: dict[str, int]) -> None:
        self.cache.set_queue_allocated(name, allocated)

    def flush(self) -> int:
        """Nothing is batched here: the cache already holds every decision."""
        return 0

    def backlog(self) -> int:
        return 0
