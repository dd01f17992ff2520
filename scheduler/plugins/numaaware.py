"""numa-aware: place pods where their NUMA policy can be met, and pin them to the zones chosen.

A pod's policy is its annotation ``volcano.sh/numa-topology-policy``; for a
Guaranteed pod the node's kubelet policy applies too when it is stricter,
because the kubelet enforces it for such pods.  The node's policy is its
label ``volcano.sh/numa-topology-policy`` if it has one, else what its agent
reports (``topologyManagerPolicy`` from the kubelet's configuration).

* ``single-numa-node``: one zone must hold the pod's CPU, memory and devices.
* ``restricted``: the pod must fit in as few zones as it could on an empty node.
* ``best-effort``: anywhere, pinned to the fewest zones that fit now; nodes
  where it fits in fewer zones score higher.

Free capacity per zone is the scheduler's own count of what pinned pods hold
(:mod:`scheduler.framework.ledger`), so a zone freed by a finished pod can
be used at once.  Nodes that report no topology cannot take restricted or
single-numa-node pods.  The chosen zones are written on the pod
(``scoria.io/numa-nodes``) and the agent pins the pod's cgroups to them.

Unlike Volcano, the pod's own policy is honoured on any node (Scoria's agent
applies the pinning itself) rather than only where the kubelet's policy is
the same.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import numpy as np

from scheduler.framework.args import Arg
from scheduler.framework.ledger import BEST_EFFORT, RESTRICTED, SINGLE
from scheduler.framework.plugin import Plugin
from scheduler.framework.snapshot import TaskInfo
from scheduler.framework.util import count_reason

if TYPE_CHECKING:
    from scheduler.framework.session import Session


class NumaAware(Plugin):
    name = "numa-aware"
    hooks = ("predicate", "predicate_reasons", "node_order")
    predicate_modes = True
    arguments = {"weight": Arg("weight", "float", 1.0, minimum=0, help="multiplies the 0-100 zone score")}

    def open(self, ssn: Session) -> None:
        self.topology = ssn.topology
        self.topology.numa = True

    def _applies(self, task: TaskInfo) -> bool:
        return bool(task.facts.numa_policy not in ("", "none") or
                    (task.pod.qos_class == "Guaranteed" and self.topology.s.policy.any()))

    def predicate(self, task: TaskInfo, avail: np.ndarray | None, mode: str = "now") -> np.ndarray:
        if not self._applies(task):
            return np.ones(self.topology.s.known.size, dtype=bool)
        return self.topology.numa_fit(task, mode)[0]

    def predicate_reasons(self, task: TaskInfo, avail: np.ndarray | None, among: np.ndarray) -> Counter:
        reasons: Counter = Counter()
        if not self._applies(task):
            return reasons
        fits, policy = self.topology.numa_fit(task)
        failed = among & ~fits
        no_report = failed & ~self.topology.s.has_zones
        count_reason(reasons, "node(s) reported no NUMA topology", no_report)
        failed &= ~no_report
        count_reason(reasons, "node(s) had no single NUMA node with room for the pod (single-numa-node)",
               failed & (policy == SINGLE))
        count_reason(reasons, "node(s) could not fit the pod in its fewest NUMA nodes (restricted)",
               failed & (policy == RESTRICTED))
        return reasons

    def score_key(self, task: TaskInfo) -> tuple:
        return (id(task.req), task.facts.numa_policy, task.pod.qos_class, task.facts.devices)

    def node_order(self, task: TaskInfo, nodes: np.ndarray | None) -> np.ndarray | None:
        t = self.topology
        if not self.args.weight or not self._applies(task):
            return None
        sel = slice(None) if nodes is None else nodes
        policy = t.policy(task)[sel]
        fewest = t.fewest_free_zones(task)[sel].astype(float)
        best = t.min_zones(task)[sel].astype(float)
        score = np.where((policy >= BEST_EFFORT) & (fewest <= t.s.zones), 100.0 * best / np.maximum(fewest, 1), 0.0)
        return self.args.weight * np.minimum(score, 100.0)
