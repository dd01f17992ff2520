"""binpack: prefer nodes that the task would fill most, to keep whole nodes free.

Score per node = (sum over requested resources of weight × (used + request) /
allocatable) / (sum of those weights) × 100 × ``binpack.weight``, with
Volcano's arguments ``binpack.weight``, ``binpack.cpu``, ``binpack.memory``,
``binpack.resources`` and ``binpack.resources.<name>``.
"""

from __future__ import annotations

import numpy as np

from ..framework.args import Arg
from ..framework.plugin import Plugin, register_plugin
from ..framework.snapshot import TaskInfo


@register_plugin
class Binpack(Plugin):
    name = "binpack"
    hooks = ("node_order",)
    arguments = {
        "weight": Arg("binpack.weight", "float", 1.0, minimum=0),
        "cpu": Arg("binpack.cpu", "float", 1.0, minimum=0),
        "memory": Arg("binpack.memory", "float", 1.0, minimum=0),
        "resources": Arg("binpack.resources", "list", ()),
        "resource_weights": Arg("binpack.resources.", "float", 1.0, minimum=0, prefix=True),
    }

    @classmethod
    def parse(cls, raw):
        args = super().parse(raw)
        unknown = set(args.resource_weights) - set(args.resources)
        if unknown:
            raise ValueError(f"binpack.resources.{sorted(unknown)[0]}: resource is not listed in binpack.resources")
        return args

    def open(self, ssn) -> None:
        self.nodes = ssn.nodes
        weights = np.zeros(ssn.index.size)
        weights[ssn.index.column["cpu"]] = self.args.cpu
        weights[ssn.index.column["memory"]] = self.args.memory
        for name in self.args.resources:
            if name in ssn.index.column:
                weights[ssn.index.column[name]] = self.args.resource_weights.get(name, 1.0)
        self.weights = weights

    def node_order(self, task: TaskInfo, cand: np.ndarray) -> np.ndarray:
        if not self.args.weight:
            return np.zeros(cand.size)
        cols = [c for c in task.cols if self.weights[c] > 0]
        if not cols:
            return np.zeros(cand.size)
        score = np.zeros(cand.size)
        for col in cols:
            alloc = self.nodes.alloc[col, cand]
            used = alloc - self.nodes.idle[col, cand] + task.req[col]
            with np.errstate(divide="ignore", invalid="ignore"):
                part = np.where((alloc > 0) & (used <= alloc), used / alloc, 0.0)
            score += self.weights[col] * part
        return score * (100.0 * self.args.weight / self.weights[cols].sum())
