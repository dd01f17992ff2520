"""Vectorised node-independent predicates: labels, affinity terms, taints.

Each distinct label key is indexed once per set of nodes (value -> boolean
mask over nodes); nodes with the same set of taints form one group.  A
selector, an affinity term or a set of tolerations then becomes a few mask
operations instead of a Python loop over ten thousand nodes, and the result is
cached per pod signature so the pods of one job share the work.  An index
depends only on its node objects, so a snapshot keeper keeps one from cycle to
cycle while the nodes do not change (:meth:`trim` bounds what it remembers);
the masks it hands out are read-only.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from scheduler.api.objects import FILTER_EFFECTS, UNSCHEDULABLE_TAINT_KEY, Requirement, SelectorTerm, Taint, Toleration


class NodeIndex:
    def __init__(self, nodes: list) -> None:
        self.nodes = nodes
        self.count = len(nodes)
        self._labels: dict[str, dict[str, np.ndarray]] = {}  # key -> value -> the nodes with it (indices)
        self._has_key: dict[str, np.ndarray] = {}
        self._names = {n.name: i for i, n in enumerate(nodes)}
        groups: dict[tuple[Taint, ...], list[int]] = {}
        for i, node in enumerate(nodes):
            taints = tuple(t for t in node.taints if t.effect in FILTER_EFFECTS)
            groups.setdefault(taints, []).append(i)
        self.taint_groups = [(taints, self._mask(members)) for taints, members in groups.items()]
        self.unschedulable = np.array([n.unschedulable for n in nodes], dtype=bool)
        self._tolerated: dict[tuple, np.ndarray] = {}
        self._affinity: dict[tuple, np.ndarray] = {}

    def trim(self, limit: int = 4096) -> None:
        """Forget the masks of pod signatures when more than ``limit`` are remembered (an index kept
        from cycle to cycle would otherwise grow with every signature it ever saw)."""
        if len(self._affinity) > limit:
            self._affinity.clear()
        if len(self._tolerated) > limit:
            self._tolerated.clear()

    def _mask(self, members: list[int]) -> np.ndarray:
        mask = np.zeros(self.count, dtype=bool)
        mask[members] = True
        return mask

    # -- labels -------------------------------------------------------------------------
    def _index_key(self, key: str) -> dict[str, np.ndarray]:
        """The nodes with each value of label ``key``, as index arrays: memory in proportion to the nodes
        however many values there are (a hostname key has one per node)."""
        table = self._labels.get(key)
        if table is None:
            members: dict[str, list[int]] = {}
            for i, node in enumerate(self.nodes):
                value = node.labels.get(key)
                if value is not None:
                    members.setdefault(value, []).append(i)
            table = {value: _frozen(np.array(idx, dtype=np.intp)) for value, idx in members.items()}
            self._labels[key] = table
            self._has_key[key] = _frozen(self._mask([i for idx in members.values() for i in idx]))
        return table

    def label_mask(self, key: str, values: tuple[str, ...]) -> np.ndarray:
        table = self._index_key(key)
        out = np.zeros(self.count, dtype=bool)
        for value in values:
            idx = table.get(value)
            if idx is not None:
                out[idx] = True
        return out

    def key_mask(self, key: str) -> np.ndarray:
        self._index_key(key)
        return self._has_key[key]

    def requirement_mask(self, req: Requirement) -> np.ndarray:
        if req.field:  # metadata.name
            mask = self._mask([self._names[v] for v in req.values if v in self._names])
            return mask if req.operator == "In" else ~mask
        op = req.operator
        if op == "In":
            return self.label_mask(req.key, req.values)
        if op == "NotIn":
            return ~self.label_mask(req.key, req.values)
        if op == "Exists":
            return self.key_mask(req.key).copy()
        if op == "DoesNotExist":
            return ~self.key_mask(req.key)
        bound = int(req.values[0])
        out = np.zeros(self.count, dtype=bool)
        for value, idx in self._index_key(req.key).items():
            try:
                number = int(value)
            except ValueError:
                continue
            if (number > bound) if op == "Gt" else (number < bound):
                out[idx] = True
        return out

    def term_mask(self, term: SelectorTerm) -> np.ndarray:
        out = np.ones(self.count, dtype=bool)
        for req in term.requirements:
            out &= self.requirement_mask(req)
        return out

    def affinity_mask(self, selector: tuple, terms: tuple[SelectorTerm, ...] | None) -> np.ndarray:
        """Nodes matching ``nodeSelector`` and any of the required affinity terms."""
        key = (selector, terms)
        mask = self._affinity.get(key)
        if mask is None:
            mask = np.ones(self.count, dtype=bool)
            for label, value in selector:
                mask &= self.label_mask(label, (value,))
            if terms is not None:
                any_term = np.zeros(self.count, dtype=bool)
                for term in terms:
                    any_term |= self.term_mask(term)
                mask &= any_term
            self._affinity[key] = _frozen(mask)
        return mask

    # -- taints -------------------------------------------------------------------------
    def tolerated_mask(self, tolerations: tuple[Toleration, ...]) -> np.ndarray:
        mask = self._tolerated.get(tolerations)
        if mask is None:
            mask = np.zeros(self.count, dtype=bool)
            for taints, members in self.taint_groups:
                if first_untolerated(taints, tolerations) is None:
                    mask |= members
            self._tolerated[tolerations] = _frozen(mask)
        return mask

    def taint_reasons(self, tolerations: tuple[Toleration, ...], among: np.ndarray) -> Counter:
        """For nodes in ``among`` that a pod does not tolerate: the first untolerated taint each."""
        reasons: Counter = Counter()
        for taints, members in self.taint_groups:
            taint = first_untolerated(taints, tolerations)
            if taint is not None:
                n = int(np.count_nonzero(members & among))
                if n:
                    reasons[f"node(s) had untolerated taint {taint.describe()}"] += n
        return reasons

    def schedulable_mask(self, tolerations: tuple[Toleration, ...]) -> np.ndarray:
        """Cordoned nodes are out unless the pod tolerates the unschedulable taint."""
        cordon = Taint(UNSCHEDULABLE_TAINT_KEY, "", "NoSchedule")
        if any(t.tolerates(cordon) for t in tolerations):
            return np.ones(self.count, dtype=bool)
        return ~self.unschedulable


def _frozen(mask: np.ndarray) -> np.ndarray:
    """A cached mask, made read-only: callers combine masks into new arrays, never change one in place."""
    mask.flags.writeable = False
    return mask


def first_untolerated(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...]) -> Taint | None:
    for taint in taints:
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None
