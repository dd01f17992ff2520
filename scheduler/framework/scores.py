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
from collections.abc import Sequence
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
        # sums of several plugins' scores, by the plugins' keys: refreshed where nodes changed, as each is
        self.totals: OrderedDict[tuple, tuple[np.ndarray | None, int]] = OrderedDict()

    def scores(self, plugin: Scorer, task: TaskInfo) -> np.ndarray | None:
        """All nodes' scores from ``plugin`` for ``task`` (None: no opinion); read-only, owned by the cache."""
        score_key = getattr(plugin, "score_key", None)
        if score_key is None:
            return plugin.node_order(task, None)
        return self._scores(plugin, (plugin.name, score_key(task)), task)

    def _scores(self, plugin: Scorer, key: tuple, task: TaskInfo) -> np.ndarray | None:
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

    def total(self, plugins: list[Scorer], task: TaskInfo) -> np.ndarray | None:
        """The sum of ``plugins``' scores for ``task``, added in their order (None: none has an opinion);
        read-only, owned by the cache.  Kept per combination of the plugins' keys and refreshed only where
        nodes changed, unless a plugin has no ``score_key`` (then summed afresh)."""
        keys = []
        for plugin in plugins:
            score_key = getattr(plugin, "score_key", None)
            if score_key is None:
                return _summed([self.scores(p, task) for p in plugins])
            keys.append((plugin.name, score_key(task)))
        combo = tuple(keys)
        version = self.nodes.version
        entry = self.totals.get(combo)
        if entry is not None:
            self.totals.move_to_end(combo)
            if entry[1] == version:
                return entry[0]
        parts = [part for part in (self._scores(p, key, task) for p, key in zip(plugins, keys, strict=True))
                 if part is not None]  # which plugins have an opinion follows from their keys
        values: np.ndarray | None
        if entry is not None and entry[0] is not None and version - entry[1] <= REFRESH_LIMIT:
            values = entry[0]
            changed = self.nodes.changed_since(entry[1])
            values[changed] = _summed([part[changed] for part in parts])
        else:
            values = _summed(parts)
        self.totals[combo] = (values, version)
        if len(self.totals) > MAX_ENTRIES:
            self.totals.popitem(last=False)
        return values


def _summed(parts: Sequence[np.ndarray | None]) -> np.ndarray | None:
    """The scores that are not None added in order (a new array), or None."""
    total = None
    for part in parts:
        if part is not None:
            total = part.copy() if total is None else total + part
    return total
