"""How full a node is once a task is placed on it: the base of nodeorder's and binpack's scores."""

from __future__ import annotations

import numpy as np

from scheduler.framework.resources import CPU, MEMORY
from scheduler.framework.snapshot import NodeTable, TaskInfo


def used_after(nodes: NodeTable, task: TaskInfo, col: int, sel: slice | np.ndarray) -> np.ndarray:
    """The share of resource ``col`` in use on nodes ``sel`` once ``task`` is placed (above 1: overfilled)."""
    return 1.0 - (nodes.idle[col, sel] - task.req[col]) * nodes.inv_alloc[col, sel]


def used_fractions(nodes: NodeTable, task: TaskInfo, sel: slice | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CPU and memory used on nodes ``sel`` after placing ``task``: 0..1, and 1 where a node has none."""
    if isinstance(sel, slice):
        out = []
        for col in (CPU, MEMORY):
            frac = used_after(nodes, task, col, sel)
            out.append(np.clip(frac, 0.0, 1.0, out=frac))
        return out[0], out[1]
    # a few nodes (a score cache refreshing those that changed): both columns at once, fewer numpy calls
    both = slice(CPU, MEMORY + 1)  # (adjacent base columns)
    frac = 1.0 - (nodes.idle[both, sel] - task.req[both, None]) * nodes.inv_alloc[both, sel]
    np.clip(frac, 0.0, 1.0, out=frac)
    return frac[0], frac[1]
