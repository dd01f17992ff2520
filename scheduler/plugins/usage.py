"""usage: place by the load nodes really carry, as their agents measure it (Volcano's load-aware plugin).

* Filter: a node whose CPU or memory in use is above ``thresholds`` (percent
  of allocatable) takes no new pods.
* Score: real free capacity, ``((100 − cpu%)·cpu.weight + (100 − mem%)·memory.weight)
  / (cpu.weight + memory.weight) × usage.weight``, counting the pod being placed.
* Pods placed since the node's last report are not in its figures yet: each
  counts at an estimate of what it will use (``estimatedScalingFactors``, a
  percentage of its requests, as Koordinator does), so a burst of placements
  does not pile onto the node that looked idlest a second ago.
* A stale report is ignored: the node is neither filtered nor favoured on usage.
"""

from __future__ import annotations

from collections import Counter
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from proto.vocab.qos import BATCH_CPU, BATCH_MEMORY
from scheduler.framework.args import Arg
from scheduler.framework.plugin import Plugin
from scheduler.framework.resources import CPU, MEMORY
from scheduler.framework.snapshot import TaskInfo, TaskStatus
from scheduler.framework.util import count_reason

if TYPE_CHECKING:
    from scheduler.framework.session import Session


class Usage(Plugin):
    name = "usage"
    hooks = ("predicate", "predicate_reasons", "node_order", "on_allocate", "on_deallocate")
    arguments = {
        "weight": Arg("usage.weight", "float", 5.0, minimum=0, help="multiplies the 0-100 score"),
        "cpu_weight": Arg("cpu.weight", "float", 1.0, minimum=0),
        "memory_weight": Arg("memory.weight", "float", 1.0, minimum=0),
        "thresholds": Arg("thresholds", "float", MappingProxyType({"cpu": 80.0, "mem": 80.0}), minimum=0,
                          maximum=100, fields=("cpu", "mem"), help="filter nodes above these percentages"),
        "estimate": Arg("estimatedScalingFactors", "float", MappingProxyType({"cpu": 85.0, "memory": 70.0}),
                        minimum=0, maximum=100, fields=("cpu", "memory"),
                        help="a pod placed since the last report counts at this percentage of its requests"),
    }

    def open(self, ssn: Session) -> None:
        nodes = ssn.nodes
        self.nodes = nodes
        self.fresh = ~nodes.stale
        # what a pod will use: its requests (batch ones included: offline pods load the node too) scaled
        # by the estimate factors, as one weight vector per resource over the request columns
        e, column = self.args.estimate, ssn.index.column
        self.cpu_weights, self.memory_weights = ssn.index.zeros(), ssn.index.zeros()
        for names, weights, factor in ((("cpu", BATCH_CPU), self.cpu_weights, e["cpu"]),
                                       (("memory", BATCH_MEMORY), self.memory_weights, e["memory"])):
            for name in names:
                if name in column:
                    weights[column[name]] = factor / 100
        self._placed: dict[str, int] = {}  # tasks placed in this session -> node
        self.pending_cpu = np.zeros(nodes.count)  # estimates of pods not yet in the node's report
        self.pending_memory = np.zeros(nodes.count)
        telemetry = ssn.snapshot.telemetry
        recent = nodes.recent_binds
        if recent:
            # per node, the report's time on either clock, whichever is earlier (a skewed agent clock never
            # hides a pod); NaN: no report, and no pod bound there is late for it
            reported = np.full(nodes.count, np.nan)
            for node in {node for node, _ in recent}:
                if (t := telemetry.get(nodes.names[node])) is not None:
                    reported[node] = min(t.sample_time_ns / 1e9, t.received)
            at = np.array([node for node, _ in recent])
            bound = np.array([np.nan if task.pod.bound_at is None else task.pod.bound_at for _, task in recent],
                             dtype=float)
            late = np.flatnonzero(bound >= reported[at])  # (NaN: False)
            if late.size:
                where = at[late]
                reqs = np.array([recent[i][1].req for i in late.tolist()])
                np.add.at(self.pending_cpu, where, reqs @ self.cpu_weights)
                np.add.at(self.pending_memory, where, reqs @ self.memory_weights)
        self.cpu_cap = nodes.alloc[CPU]
        self.memory_cap = nodes.alloc[MEMORY]
        self.over_cpu, self.over_memory = self._over(slice(None))  # kept up to date node by node

    def _count(self, task: TaskInfo, node: int, sign: int) -> None:
        self.pending_cpu[node] += sign * float(task.req @ self.cpu_weights)
        self.pending_memory[node] += sign * float(task.req @ self.memory_weights)
        cpu, memory = self._over(node)
        self.over_cpu[node], self.over_memory[node] = cpu, memory

    def on_allocate(self, task: TaskInfo) -> None:
        if task.status != TaskStatus.RUNNING:  # a placement of this session, not an undone eviction
            self._placed[task.uid] = task.node
            self._count(task, task.node, +1)

    def on_deallocate(self, task: TaskInfo) -> None:
        # a placement undone (the task has already left its node); an evicted pod's usage stays until it is gone
        node = self._placed.pop(task.uid, None) if task.status == TaskStatus.PENDING else None
        if node is not None:
            self._count(task, node, -1)

    def _percent(self, sel: int | slice | np.ndarray, extra_cpu: float = 0.0,
                 extra_memory: float = 0.0) -> tuple[np.ndarray | np.floating, np.ndarray | np.floating]:
        """CPU and memory in use, percent of allocatable, on the nodes ``sel`` (one node: numbers)."""
        n = self.nodes
        with np.errstate(divide="ignore", invalid="ignore"):
            cpu = 100.0 * (n.usage_cpu[sel] + self.pending_cpu[sel] + extra_cpu) / self.cpu_cap[sel]
            mem = 100.0 * (n.usage_memory[sel] + self.pending_memory[sel] + extra_memory) / self.memory_cap[sel]
        return cpu, mem

    def _over(self, sel: int | slice) -> tuple[Any, Any]:  # bool arrays over a slice, numpy bools for one node
        """Above the thresholds (fresh reports only), for the nodes ``sel``."""
        cpu, mem = self._percent(sel)
        t = self.args.thresholds
        fresh = self.fresh[sel]
        return fresh & (cpu > t["cpu"]), fresh & (mem > t["mem"])

    def predicate(self, task: TaskInfo, avail: np.ndarray | None) -> np.ndarray:
        return ~(self.over_cpu | self.over_memory)

    def predicate_reasons(self, task: TaskInfo, avail: np.ndarray | None, among: np.ndarray) -> Counter:
        reasons: Counter = Counter()
        cpu, mem = self.over_cpu, self.over_memory
        t = self.args.thresholds
        count_reason(reasons, f"node(s) had CPU usage above {t['cpu']:g}%", among & cpu)
        count_reason(reasons, f"node(s) had memory usage above {t['mem']:g}%", among & mem & ~cpu)
        return reasons

    def score_key(self, task: TaskInfo) -> tuple:
        return (id(task.req),)

    def node_order(self, task: TaskInfo, nodes: np.ndarray | None) -> np.ndarray:
        a = self.args
        sel = slice(None) if nodes is None else nodes
        weights = a.cpu_weight + a.memory_weight
        if not a.weight or not weights:
            return np.zeros(self.nodes.count if nodes is None else nodes.size)
        cpu, mem = self._percent(sel, float(task.req @ self.cpu_weights), float(task.req @ self.memory_weights))
        free = ((100.0 - np.clip(cpu, 0, 100)) * a.cpu_weight + (100.0 - np.clip(mem, 0, 100)) * a.memory_weight)
        score = free / weights * a.weight
        fresh = self.fresh[sel]
        return np.where(fresh & np.isfinite(score), score, 0.0)
