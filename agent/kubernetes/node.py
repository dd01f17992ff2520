"""This node as the API server knows it: its taint and its batch resources (labels: :mod:`agent.labels`).

While the agent is evicting offline pods the node carries
``volcano.sh/offline-job-evicting:NoSchedule``, Volcano's taint for it, so that
no scheduler places new offline work there; the taint goes when the pressure
does.  Both talk to the API server through the ``kubernetes`` client and keep
working — a failed write is retried — when it is away.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

EVICTING_TAINT = "volcano.sh/offline-job-evicting"


class NodeTaint:
    """Puts the evicting taint on the node or takes it off; idempotent, optimistic about concurrency.

    Read the Node, change only our taint in its list, and patch with the
    resourceVersion read (a concurrent writer makes that a 409: read again).
    """

    def __init__(self, core_v1: Any, node_name: str, *, key: str = EVICTING_TAINT, effect: str = "NoSchedule",
                 attempts: int = 3):
        self.api, self.node_name, self.key, self.effect, self.attempts = core_v1, node_name, key, effect, attempts

    def __call__(self, wanted: bool) -> bool:
        """Make the taint present (``wanted``) or absent; True once the node is so."""
        from kubernetes.client.exceptions import ApiException
        for _ in range(self.attempts):
            try:
                node = self.api.read_node(self.node_name)
                taints = [self.api.api_client.sanitize_for_serialization(t) for t in (node.spec.taints or [])]
                ours = [t for t in taints if t.get("key") == self.key and t.get("effect") == self.effect]
                if bool(ours) == wanted:
                    return True
                if wanted:
                    taints.append({"key": self.key, "effect": self.effect,
                                   "timeAdded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
                else:
                    taints = [t for t in taints if t not in ours]
                self.api.patch_node(self.node_name, {"metadata": {"resourceVersion": node.metadata.resource_version},
                                                     "spec": {"taints": taints}})
                log.warning("node %s: %s taint %s:%s", self.node_name, "added" if wanted else "removed", self.key,
                            self.effect)
                return True
            except ApiException as exc:
                if exc.status == 409:
                    continue  # someone else changed the node meanwhile: read it again
                log.error("cannot %s taint %s on node %s: %s %s", "add" if wanted else "remove", self.key,
                          self.node_name, exc.status, exc.reason)
                return False
            except Exception as exc:  # API server away: the agent tries again on its next interval
                log.error("cannot reach the API server to %s taint %s: %s", "add" if wanted else "remove",
                          self.key, exc)
                return False
        log.error("node %s kept changing; taint %s not %s", self.node_name, self.key, "added" if wanted else "removed")
        return False


class NodeResources:
    """Publishes the batch allocatable into the Node's status, where other schedulers and kubectl see it.

    ``kubernetes.io/batch-cpu`` (millicores, as a count) and
    ``kubernetes.io/batch-memory`` (bytes) go into ``status.capacity`` and
    ``status.allocatable`` with a patch of the status subresource — when the
    figures differ from what was last written (the agent's policy already
    republishes only meaningful moves), again after a failure, and every
    ``refresh`` seconds anyway (a Node object deleted and registered again by
    its kubelet has lost them).
    """

    def __init__(self, core_v1: Any, node_name: str, *, timeout: float = 5.0, refresh: float = 300.0,
                 clock: Callable[[], float] = time.monotonic):
        self.api, self.node_name, self.timeout = core_v1, node_name, timeout
        self.refresh, self.clock = refresh, clock
        self._written: tuple[int, int] | None = None
        self._written_at = 0.0
        self._failing = False

    def __call__(self, cpu_millis: int, memory_bytes: int) -> bool:
        wanted = (int(cpu_millis), int(memory_bytes))
        if wanted == self._written and self.clock() - self._written_at < self.refresh:
            return True
        amounts = {"kubernetes.io/batch-cpu": str(wanted[0]), "kubernetes.io/batch-memory": str(wanted[1])}
        try:
            self.api.patch_node_status(self.node_name, {"status": {"capacity": amounts, "allocatable": amounts}},
                                       _request_timeout=self.timeout)
        except Exception as exc:  # API server away or refusing: keep the figures, try again next time
            if not self._failing:
                log.warning("cannot publish batch resources on node %s (will retry): %s", self.node_name, exc)
            self._failing = True
            return False
        if self._failing:
            log.info("node %s: batch resources published again", self.node_name)
        self._failing = False
        self._written, self._written_at = wanted, self.clock()
        return True
