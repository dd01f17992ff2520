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

import numpy as np

from ..api.qos import BATCH_CPU, BATCH_MEMORY
from ..framework.args import Arg
from ..framework.plugin import Plugin, register_plugin
from ..framework.resources import CPU, MEMORY
from ..framework.snapshot import TaskInfo, TaskStatus
from ..framework.util import count_reason


@register_plugin
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

    def open(self, ssn) -> None:
        nodes = ssn.nodes
        self.nodes = nodes
        self.fresh = ~nodes.stale
        column = ssn.index.column
        # what a pod will use: its requests, batch ones included (offline pods load the node too)
        self.cols = {"cpu": [c for c in (CPU, column.get(BATCH_CPU)) if c is not None],
                     "memory": [c for c in (MEMORY, column.get(BATCH_MEMORY)) if c is not None]}
        self.pending_cpu = np.zeros(nodes.count)  # estimates of pods not yet in the report
        self.pending_memory = np.zeros(nodes.count)
        telemetry = ssn.snapshot.telemetry
        for node, task in nodes.recent_binds:
            report = telemetry.get(nodes.names[node])
            if report is not None and task.pod.bound_at >= report.sample_time_ns / 1e9:
                self._count(task, node, +1)
        self.cpu_cap = nodes.alloc[CPU]
        self.memory_cap = nodes.alloc[MEMORY]

    def _estimate(self, task: TaskInfo) -> tuple[float, float]:
        e = self.args.estimate
        req = task.req
        return (sum(req[c] for c in self.cols["cpu"]) * e["cpu"] / 100,
                sum(req[c] for c in self.cols["memory"]) * e["memory"] / 100)

    def _count(self, task: TaskInfo, node: int, sign: int) -> None:
        cpu, memory = self._estimate(task)
        self.pending_cpu[node] += sign * cpu
        self.pending_memory[node] += sign * memory

    def on_allocate(self, task: TaskInfo) -> None:
        if task.status != TaskStatus.RUNNING:  # a placement of this session, not an undone eviction
            self._count(task, task.node, +1)

    def on_deallocate(self, task: TaskInfo) -> None:
        if task.status == TaskStatus.PENDING:  # a placement undone (an evicted pod's usage stays until it is gone)
            self._count(task, task.node, -1)

    def _percent(self, sel, extra_cpu: float = 0.0, extra_memory: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        n = self.nodes
        with np.errstate(divide="ignore", invalid="ignore"):
            cpu = 100.0 * (n.usage_cpu[sel] + self.pending_cpu[sel] + extra_cpu) / self.cpu_cap[sel]
            mem = 100.0 * (n.usage_memory[sel] + self.pending_memory[sel] + extra_memory) / self.memory_cap[sel]
        return cpu, mem

    def _over(self) -> tuple[np.ndarray, np.ndarray]:
        cpu, mem = self._percent(slice(None))
        t = self.args.thresholds
        return self.fresh & (cpu > t["cpu"]), self.fresh & (mem > t["mem"])

    def predicate(self, task: TaskInfo, avail: np.ndarray | None) -> np.ndarray:
        cpu, mem = self._over()
        return ~(cpu | mem)

    def predicate_reasons(self, task: TaskInfo, avail: np.ndarray | None, among: np.ndarray) -> Counter:
        reasons: Counter = Counter()
        cpu, mem = self._over()
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
        cpu, mem = self._percent(sel, *self._estimate(task))
        free = ((100.0 - np.clip(cpu, 0, 100)) * a.cpu_weight + (100.0 - np.clip(mem, 0, 100)) * a.memory_weight)
        score = free / weights * a.weight
        fresh = self.fresh[sel]
        return np.where(fresh & np.isfinite(score), score, 0.0)
