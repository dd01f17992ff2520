"""predicates: the node filters every pod must pass.

Cordoned nodes, untolerated ``NoSchedule``/``NoExecute`` taints, and
``nodeSelector`` and required node affinity.  They do not depend on
placements and are computed once per pod signature.  Host ports (kube's
NodePorts) do: they are counted per node as pods are placed and evicted
(:mod:`scheduler.plugins.shared.nodeports`), only once a pod asking for one
is seen.  Resource fit — every
resource the pod requests, the node's pod count included — is not here: the
session checks it whatever plugins are configured (``Session.fit``), after
these filters, as kube-scheduler does.

Refusals are explained the way kube-scheduler does, in the same order it
runs its filters: a node is counted under the first filter that rejects it.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import numpy as np

from scheduler.framework.args import Arg
from scheduler.framework.plugin import Plugin
from scheduler.framework.snapshot import TaskInfo
from scheduler.framework.util import count_reason
from scheduler.plugins.shared.nodeports import REASON as PORTS_REASON
from scheduler.plugins.shared.nodeports import PortTable

if TYPE_CHECKING:
    from scheduler.framework.session import Session

_UNSUPPORTED = ("GPUSharingEnable", "CacheEnable", "ProportionalEnable", "PodAffinityEnable",
                "NodeVolumeLimitsEnable", "VolumeZoneEnable", "PodTopologySpreadEnable")


class Predicates(Plugin):
    name = "predicates"
    hooks = ("predicate", "predicate_reasons", "on_allocate", "on_deallocate")
    predicate_modes = True  # host ports held by pods being evicted are free once they are gone
    arguments = {
        "node_affinity": Arg("predicate.NodeAffinityEnable", "bool", True,
                             "filter on nodeSelector and required node affinity"),
        "taint_toleration": Arg("predicate.TaintTolerationEnable", "bool", True,
                                "filter out nodes with untolerated NoSchedule/NoExecute taints"),
        "node_ports": Arg("predicate.NodePortsEnable", "bool", True,
                          "filter out nodes where a requested hostPort (protocol, host IP) is taken"),
        **{name: Arg(f"predicate.{name}", "bool", False, unsupported="Scoria's predicates do not implement it")
           for name in _UNSUPPORTED},
    }

    def open(self, ssn: Session) -> None:
        self.index = ssn.node_index
        self.count = ssn.nodes.count
        self._static: dict[tuple, np.ndarray] = {}
        self._jobs = ssn.jobs
        self._ports: PortTable | None = None  # built when the first pod asking for a host port is seen

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

    def predicate(self, task: TaskInfo, avail: np.ndarray | None, mode: str = "now") -> np.ndarray:
        mask = self.static_mask(task)
        if task.pod.host_ports and self.args.node_ports and mode != "reach":  # reach: evictions may free them
            mask = mask & ~self.port_table().conflicts(task.pod.host_ports, future=mode == "future")
        return mask

    # -- host ports (kube's NodePorts) ---------------------------------------------------------
    def port_table(self) -> PortTable:
        if self._ports is None:
            self._ports = PortTable(self.count, self._jobs.values())
        return self._ports

    def on_allocate(self, task: TaskInfo) -> None:
        if self._ports is not None and task.pod.host_ports:
            self._ports.placed(task)

    def on_deallocate(self, task: TaskInfo) -> None:
        if self._ports is not None and task.pod.host_ports:
            self._ports.removed(task)

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
        if task.pod.host_ports and self.args.node_ports:
            count_reason(reasons, PORTS_REASON, left & self.port_table().conflicts(task.pod.host_ports, future=False))
        return reasons

    def close(self, ssn: Session) -> None:
        self._static.clear()
