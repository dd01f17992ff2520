"""The effects interface: where a cycle's decisions go (binds, evictions, status), and the plain
implementation that applies them to the scheduler's own cache.

Every run mode hands the scheduler an :class:`Effects`: the simulator and the plain ``serve`` use
:class:`CacheEffects` as it is; embedded mode (``EmbeddedEffects``) and Kubernetes mode
(``KubeEffects``) build on it, persisting to the store or writing through the API server.  The
session and the actions never know which one they talk to.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from scheduler.api.objects import Condition, Pod, PodGroup
from scheduler.cluster.cache import ClusterCache


class Effects(Protocol):
    """Where a session's decisions go: binds, evictions and status."""

    # what bind returns is the implementation's own (CacheEffects: whether the pod was still there); ignored here
    def bind(self, pod: Pod, node: str, annotations: dict[str, str]) -> object: ...
    def evict(self, pod: Pod, reason: str) -> None: ...
    def group_status(self, group: PodGroup, phase: str, conditions: list[Condition]) -> bool: ...
    def pod_reason(self, pod: Pod, reason: str | None) -> None: ...
    def nominate(self, pod: Pod, node: str | None) -> None: ...
    def queue_allocated(self, name: str, allocated: dict[str, int]) -> None: ...
    # what the queue deserves this cycle (None: no plugin shares the cluster between queues); shown, not decided on
    def queue_deserved(self, name: str, deserved: dict[str, int] | None) -> None: ...
    def flush(self) -> int: ...  # write what was batched this cycle (status); how many writes
    def backlog(self) -> int: ...  # writes still outstanding (failed ones are retried)


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

    def queue_deserved(self, name: str, deserved: dict[str, int] | None) -> None:
        self.cache.queue_deserved[name] = deserved

    def flush(self) -> int:
        """Nothing is batched here: the cache already holds every decision."""
        return 0

    def backlog(self) -> int:
        return 0
