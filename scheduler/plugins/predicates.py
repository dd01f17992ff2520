"""predicates: the node filters every pod must pass.

Cordoned nodes, untolerated ``NoSchedule``/``NoExecute`` taints, ``nodeSelector``
and required node affinity, the node's pod count, and resource fit for every
resource the pod requests (extended resources included).  The first four do
not depend on placements and are computed once per pod signature; resource
fit is one comparison per requested resource across all nodes.

Refusals are explained the way kube-scheduler does, in the same order it
runs its filters: a node is counted under the first filter that rejects it,
and under every resource it lacks.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import numpy as np

from scheduler.framework.args import Arg
from scheduler.framework.plugin import Plugin
from scheduler.framework.resources import EPS, PODS
from scheduler.framework.snapshot import TaskInfo
from scheduler.framework.util import count_reason

if TYPE_CHECKING:
    from scheduler.framework.session import Session

_UNSUPPORTED = ("GPUSharingEnable", "CacheEnable", "ProportionalEnable", "PodAffinityEnable",
                "NodeVolumeLimitsEnable", "VolumeZoneEnable", "PodTopologySpreadEnable", "NodePortsEnable")


class Predicates(Plugin):
    name = "predicates"
    hooks = ("predicate", "predicate_reasons")
    arguments = {
        "node_affinity": Arg("predicate.NodeAffinityEnable", "bool", True,
                             "filter on nodeSelector and required node affinity"),
        "taint_toleration": Arg("predicate.TaintTolerationEnable", "bool", True,
                                "filter out nodes with untolerated NoSchedule/NoExecute taints"),
        **{name: Arg(f"predicate.{name}", "bool", False, unsupported="Scoria's predicates do not implement it")
           for name in _UNSUPPORTED},
    }

    def open(self, ssn: Session) -> None:
        self.index = ssn.node_index
        self.count = ssn.nodes.count
        self.names = ssn.index.names
        self._static: dict[tuple, np.ndarray] = {}

    # -- the filter -----------------------------------------------------------------------
    def static_mask(self, task: TaskInfo) -> np.ndarray:
        mask = self._static.get(task.sig)
        if mask is None:
            selector, terms, tolerations = task.sig
            mask = self.index.schedulable_mask(tolerations)
            if self.args.taint_toleration:
                mask = mask & self.index.tolerated_mask(tolerations)
            if self.args.node_affinity:
                mask = mask & self.index.affinity_mask(selector, terms)
            self._static[task.sig] = mask
        return mask

    def predicate(self, task: TaskInfo, avail: np.ndarray | None) -> np.ndarray:
        mask = self.static_mask(task)
        if avail is None:
            return mask
        req = task.req
        mask = mask.copy()
        for col in task.cols:  # unknown (NaN) capacity is not refused here: the plugin that set it decides
            mask &= ~(avail[col] + EPS < req[col])
        return mask

    # -- the explanation ---------------------------------------------------------------------
    def predicate_reasons(self, task: TaskInfo, avail: np.ndarray | None, among: np.ndarray) -> Counter:
        selector, terms, tolerations = task.sig
        reasons: Counter = Counter()
        left = among.copy()
        schedulable = self.index.schedulable_mask(tolerations)
        count_reason(reasons, "node(s) were unschedulable", left & ~schedulable)
        left &= schedulable
        if self.args.taint_toleration:
            tolerated = self.index.tolerated_mask(tolerations)
            reasons.update(self.index.taint_reasons(tolerations, left & ~tolerated))
            left &= tolerated
        if self.args.node_affinity:
            matched = self.index.affinity_mask(selector, terms)
            count_reason(reasons, "node(s) didn't match Pod's node affinity/selector", left & ~matched)
            left &= matched
        if avail is not None:
            for col in task.cols:
                short = left & (avail[col] + EPS < task.req[col])
                label = "Too many pods" if col == PODS else f"Insufficient {self.names[col]}"
                count_reason(reasons, label, short)
        return reasons

    def close(self, ssn: Session) -> None:
        self._static.clear()
