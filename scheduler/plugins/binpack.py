"""binpack: prefer nodes that the task would fill most, to keep whole nodes free.

Score per node = (sum over requested resources of weight × (used + request) /
allocatable) / (sum of those weights) × 100 × ``binpack.weight``, with
Volcano's arguments ``binpack.weight``, ``binpack.cpu``, ``binpack.memory``,
``binpack.resources`` and ``binpack.resources.<name>``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from proto.errors import InputError
from scheduler.framework.args import Arg, Args
from scheduler.framework.plugin import Plugin
from scheduler.framework.snapshot import TaskInfo
from scheduler.plugins.shared.nodefill import used_after

if TYPE_CHECKING:
    from scheduler.framework.session import Session


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
    def parse(cls, raw: dict[str, Any] | None) -> Args:
        args = super().parse(raw)
        unknown = set(args.resource_weights) - set(args.resources)
        if unknown:
            raise InputError(f"binpack.resources.{sorted(unknown)[0]}: resource is not listed in binpack.resources")
        return args

    def open(self, ssn: Session) -> None:
        self.nodes = ssn.nodes
        weights = np.zeros(ssn.index.size)
        weights[ssn.index.column["cpu"]] = self.args.cpu
        weights[ssn.index.column["memory"]] = self.args.memory
        for name in self.args.resources:
            if name in ssn.index.column:
                weights[ssn.index.column[name]] = self.args.resource_weights.get(name, 1.0)
        self.weights = weights

    def score_key(self, task: TaskInfo) -> int:
        return id(task.req)

    def node_order(self, task: TaskInfo, nodes: np.ndarray | None) -> np.ndarray:
        size = self.nodes.count if nodes is None else nodes.size
        cols = [c for c in task.cols if self.weights[c] > 0]
        if not self.args.weight or not cols:
            return np.zeros(size)
        scale = 100.0 * self.args.weight / self.weights[cols].sum()
        if nodes is not None:  # a few nodes (a score cache refreshing those that changed): all columns at once
            where = np.array(cols)[:, None]
            fracs = 1.0 - (self.nodes.idle[where, nodes] - task.req[where]) * self.nodes.inv_alloc[where, nodes]
            fracs[fracs > 1.0 + 1e-9] = 0.0
            score = np.zeros(size)
            for col, frac in zip(cols, fracs, strict=True):
                score += self.weights[col] * frac
            return score * scale
        score = np.zeros(size)
        for col in cols:
            # used after placing, as a fraction of allocatable; a node it would overfill scores 0 here
            frac = used_after(self.nodes, task, col, slice(None))
            frac[frac > 1.0 + 1e-9] = 0.0
            score += self.weights[col] * frac
        return score * scale
