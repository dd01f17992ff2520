"""Node scores kept between tasks and refreshed only where nodes changed.

Score plugins compute a node's score from that node alone, and tasks of the
same shape (``score_key``) score every node alike.  So the scores of a shape
are computed once over all nodes, and after each placement only the nodes
the node table's change log names are recomputed — placing the pods of a
large job costs a few node updates and one ``argmax`` each, not a pass over
ten thousand nodes per plugin.

A plugin whose ``node_order`` returns None has no opinion about that task
shape (no GPUs asked, no NUMA policy): that is cached too and costs nothing
later.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

import numpy as np

from scheduler.framework.snapshot import NodeTable, TaskInfo

# Beyond this many changed nodes a full recomputation is as cheap as the update.
REFRESH_LIMIT = 512
MAX_ENTRIES = 256


class Scorer(Protocol):
    """A plugin with the ``node_order`` hook; one with ``score_key(task)`` too has its scores cached per shape."""

    @property
    def name(self) -> str: ...

    def node_order(self, task: TaskInfo, nodes: np.ndarray | None) -> np.ndarray | None: ...


class ScoreCache:
    def __init__(self, nodes: NodeTable):
        self.nodes = nodes
        self.entries: OrderedDict[tuple, tuple[np.ndarray | None, int]] = OrderedDict()  # None: no opinion

    def scores(self, plugin: Scorer, task: TaskInfo) -> np.ndarray | None:
        """All nodes' scores from ``plugin`` for ``task`` (None: no opinion); read-only, owned by the cache."""
        score_key = getattr(plugin, "score_key", None)
        if score_key is None:
            return plugin.node_order(task, None)
        key = (plugin.name, score_key(task))
        version = self.nodes.version
        entry = self.entries.get(key)
        if entry is None:
            values = plugin.node_order(task, None)
        else:
            values, seen = entry
            self.entries.move_to_end(key)
            if seen == version or values is None:
                return values
            if version - seen <= REFRESH_LIMIT:
                changed = self.nodes.changed_since(seen)
                values[changed] = plugin.node_order(task, changed)
            else:
                values = plugin.node_order(task, None)
        self.entries[key] = (values, version)
        if len(self.entries) > MAX_ENTRIES:
            self.entries.popitem(last=False)
        return values
