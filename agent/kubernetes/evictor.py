"""Evictions through the Kubernetes Eviction API (Kubernetes mode's evictor).

Through the Eviction API, so PodDisruptionBudgets hold — a refusal (429) is not
forced and is tried again on a later interval.  Idempotent: a pod asked to leave
is not asked again for ``retry_after`` seconds while it is still leaving.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from agent.intents import Evict

# logs under the name it had in agent/evictor.py, so log lines read as before the move
log = logging.getLogger("agent.evictor")


class KubernetesEvictor:
    def __init__(self, core_v1: Any, *, retry_after: float = 10.0, clock: Callable[[], float] = time.monotonic):
        self.api = core_v1
        self.retry_after = retry_after
        self.clock = clock
        self._asked: dict[str, float] = {}

    def evict(self, intent: Evict) -> bool:
        from kubernetes.client import V1DeleteOptions, V1Eviction, V1ObjectMeta, V1Preconditions
        from kubernetes.client.exceptions import ApiException

        now = self.clock()
        if now - self._asked.get(intent.uid, -1e18) < self.retry_after:
            return True  # already asked; the pod is on its way out
        body = V1Eviction(metadata=V1ObjectMeta(name=intent.name, namespace=intent.namespace),
                          delete_options=V1DeleteOptions(preconditions=V1Preconditions(uid=intent.uid)))
        try:
            self.api.create_namespaced_pod_eviction(intent.name, intent.namespace, body)
        except ApiException as exc:
            if exc.status == 404:
                return True  # already gone
            if exc.status == 409:  # the uid precondition failed: the pod we meant is gone, a namesake is not ours
                log.info("not evicting %s/%s: it is a newer pod than the one chosen", intent.namespace, intent.name)
                return True
            if exc.status == 429:
                log.info("eviction of %s/%s refused for now (disruption budget): %s", intent.namespace,
                         intent.name, exc.reason)
                return False
            log.error("eviction of %s/%s failed: %s %s", intent.namespace, intent.name, exc.status, exc.reason)
            return False
        self._asked[intent.uid] = now
        log.warning("evicted %s/%s: %s", intent.namespace, intent.name, intent.reason)
        return True
