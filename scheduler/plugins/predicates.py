"""predicates: the node filters every pod must pass.

Cordoned nodes, untolerated ``NoSchedule``/``NoExecute`` taints, and
``nodeSelector`` and required node affinity.  They do not depend on
placements and are computed once per pod signature.  Host ports (kube's
NodePorts) do: they are counted per node as pods are placed and evicted
(:mod:`scheduler.plugins.shared.nodeports`), only once a pod asking for one
is seen.  So do topology spread (``predicate.PodTopologySpreadEnable``) and
required inter-pod affinity and anti-affinity (``predicate.PodAffinityEnable``,
both on by default as in Volcano): they are counted per topology domain and
kept in step with every placement of the session
(``scheduler.plugins.shared.topologyspread``, ``.podaffinity``).  Resource fit — every
resource the pod requests, the node's pod count included — is not here: the
session checks it whatever plugins are configured (``Session.fit``), after
these filters, as kube-scheduler does.

Refusals are explained the way kube-scheduler does, in the same order it
runs its filters: a node is counted under the first filter that rejects it.

Pod topology spread (``predicate.PodTopologySpreadEnable``, on by default as in
Volcano) refuses nodes where a ``DoNotSchedule`` constraint's skew would exceed
its ``maxSkew`` (:mod:`scheduler.plugins.shared.topologyspread`); it depends on
placements, so it is computed per call, and only for pods with such constraints.
``predicate.PodTopologySpreadDefaultConstraints`` (a Scoria argument: Volcano
hard-codes kube-scheduler's system defaults, which select pods by Services and
ReplicaSets Scoria does not know) gives DoNotSchedule constraints for pods
without any of their own, spreading the pods of each PodGroup.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.framework.args import Arg, Args
from scheduler.framework.plugin import Plugin
from scheduler.framework.snapshot import TaskInfo
from scheduler.framework.util import count_reason
from scheduler.plugins.shared import topologyspread
from scheduler.plugins.shared.nodeports import REASON as PORTS_REASON
from scheduler.plugins.shared.nodeports import PortTable
from scheduler.plugins.shared.podaffinity import (
    AFFINITY_REASON,
    ANTI_AFFINITY_REASON,
    EXISTING_ANTI_AFFINITY_REASON,
    NAMESPACES_REASON,
    PodAffinityState,
    state_of,
)

if TYPE_CHECKING:
    from scheduler.framework.session import Session

_UNSUPPORTED = ("CacheEnable", "ProportionalEnable",
                "NodeVolumeLimitsEnable", "VolumeZoneEnable")
SPREAD_DEFAULTS_KEY = "predicate.PodTopologySpreadDefaultConstraints"


class Predicates(Plugin):
    name = "predicates"
    hooks = ("predicate", "predicate_reasons", "on_allocate", "on_deallocate")
    predicate_modes = True  # host ports and inter-pod terms of pods being evicted are free once they are gone
    arguments = {
        "pod_topology_spread": Arg("predicate.PodTopologySpreadEnable", "bool", True,
                                   "filter on the pods' DoNotSchedule topology spread constraints"),
        "node_affinity": Arg("predicate.NodeAffinityEnable", "bool", True,
                             "filter on nodeSelector and required node affinity"),
        "taint_toleration": Arg("predicate.TaintTolerationEnable", "bool", True,
                                "filter out nodes with untolerated NoSchedule/NoExecute taints"),
        "pod_affinity": Arg("predicate.PodAffinityEnable", "bool", True,
                            "filter on required inter-pod affinity and anti-affinity, existing pods' too"),
        "node_ports": Arg("predicate.NodePortsEnable", "bool", True,
                          "filter out nodes where a requested hostPort (protocol, host IP) is taken"),
        **{name: Arg(f"predicate.{name}", "bool", False, unsupported="Scoria's predicates do not implement it")
           for name in _UNSUPPORTED},
        # Volcano <=1.8 shared GPUs from predicates; the configuration reads these as deviceshare's (config.py)
        "gpu_sharing": Arg("predicate.GPUSharingEnable", "bool", False,
                           "Volcano <=1.8's spelling of deviceshare.GPUSharingEnable, read as it"),
        "gpu_number": Arg("predicate.GPUNumberEnable", "bool", False,
                          "Volcano <=1.8's spelling of deviceshare.GPUNumberEnable, read as it"),
    }

    @classmethod
    def parse(cls, raw: dict[str, Any] | None) -> Args:
        rest, defaults = topologyspread.parse_defaults(raw, SPREAD_DEFAULTS_KEY, True,
                                                       "nodeorder's podtopologyspread.defaultConstraints")
        args = super().parse(rest)
        return Args({**args.as_dict(), "spread_defaults": defaults}, args.unimplemented, args.notes)

    @classmethod
    def implements(cls, key: str) -> bool:
        return key == SPREAD_DEFAULTS_KEY or super().implements(key)

    def open(self, ssn: Session) -> None:
        self.index = ssn.node_index
        self.count = ssn.nodes.count
        self._static: dict[tuple, np.ndarray] = {}
        self.spread = topologyspread.SpreadCounts(ssn.nodes, ssn.node_index)
        self._spread_defaults = getattr(self.args, "spread_defaults", ())
        interpod = state_of(ssn) if self.args.pod_affinity else None
        # None when no pod of the session has a term: then it costs nothing
        self.interpod: PodAffinityState | None = interpod if interpod is not None and interpod.active else None
        self._jobs = ssn.jobs
        self._ports: PortTable | None = None  # built when the first pod asking for a host port is seen

    # -- pod topology spread -------------------------------------------------------------------
    def _spread_rules(self, task: TaskInfo) -> tuple[topologyspread.Rule, ...]:
        if not self.args.pod_topology_spread or not (task.pod.spread_constraints or self._spread_defaults):
            return ()
        return topologyspread.rules(task.pod, True, self._spread_defaults)

    # -- the counts of host ports, spread and inter-pod affinity follow every placement ----------
    def on_allocate(self, task: TaskInfo) -> None:
        if self._ports is not None and task.pod.host_ports:
            self._ports.placed(task)
        self.spread.on_allocate(task)
        if self.interpod is not None:
            self.interpod.on_allocate(task)

    def on_deallocate(self, task: TaskInfo) -> None:
        if self._ports is not None and task.pod.host_ports:
            self._ports.removed(task)
        self.spread.on_deallocate(task)
        if self.interpod is not None:
            self.interpod.on_deallocate(task)

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
        # reach (preemption's upper bound): evicting pods may lower a domain's spread count and clear
        # anti-affinity either way, so only each node's own check after its evictions decides those
        hard = self._spread_rules(task) if mode != "reach" else ()
        if hard:  # pods being evicted are not counted (kube-scheduler skips terminating pods): now = future
            mask = mask & self.spread.filter_mask(task, hard)
        if self.interpod is not None:
            verdict = self.interpod.verdict(task.pod, mode)
            if verdict is not None and verdict.ok is not None:
                mask = mask & verdict.ok
        return mask

    # -- host ports (kube's NodePorts) ---------------------------------------------------------
    def port_table(self) -> PortTable:
        if self._ports is None:
            self._ports = PortTable(self.count, self._jobs.values())
        return self._ports

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
        if task.pod.host_ports and self.args.node_ports:  # kube's filter order: ports, spread, inter-pod affinity
            ports = self.port_table().conflicts(task.pod.host_ports, future=False)
            count_reason(reasons, PORTS_REASON, left & ports)
            left = left & ~ports
        hard = self._spread_rules(task)
        if hard:
            reasons.update(self.spread.filter_reasons(task, hard, left))
            left = left & self.spread.filter_mask(task, hard)
        if self.interpod is not None:
            self._interpod_reasons(task, left, reasons)
        return reasons

    def _interpod_reasons(self, task: TaskInfo, left: np.ndarray, reasons: Counter) -> None:
        """kube-scheduler's InterPodAffinity filter: a node is refused for the first rule it breaks."""
        assert self.interpod is not None
        verdict = self.interpod.verdict(task.pod)
        if verdict is None:
            return
        left = left.copy()
        for mask, reason in ((verdict.namespaces, NAMESPACES_REASON), (verdict.affinity, AFFINITY_REASON),
                             (verdict.anti, ANTI_AFFINITY_REASON), (verdict.existing, EXISTING_ANTI_AFFINITY_REASON)):
            if mask is not None:
                count_reason(reasons, reason, left & ~mask)
                left &= mask

    def close(self, ssn: Session) -> None:
        self._static.clear()
