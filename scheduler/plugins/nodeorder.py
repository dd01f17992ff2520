"""nodeorder: kube-scheduler's node scores, vectorised over the candidate nodes.

Each score is 0-100 and multiplied by its weight (Volcano's argument names):
``leastrequested`` favours free nodes (spreading), ``mostrequested`` full ones,
``balancedresource`` nodes whose CPU and memory end up equally used,
``nodeaffinity`` preferred node-affinity terms, ``tainttoleration`` nodes
with fewer untolerated ``PreferNoSchedule`` taints, ``podaffinity``
kube-scheduler's InterPodAffinity score (preferred inter-pod affinity and
anti-affinity, the pod's and placed pods', normalised to 0-100).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

from scheduler.framework.args import Arg
from scheduler.framework.nodeindex import first_untolerated
from scheduler.framework.plugin import Plugin
from scheduler.framework.snapshot import TaskInfo
from scheduler.plugins.shared.nodefill import used_fractions
from scheduler.plugins.shared.podaffinity import PodAffinityState, normalized, state_of

if TYPE_CHECKING:
    from scheduler.framework.session import Session

log = logging.getLogger(__name__)
_NOT_IMPLEMENTED = "Scoria's nodeorder does not implement this score; it counts as 0"


class NodeOrder(Plugin):
    name = "nodeorder"
    hooks = ("node_order", "on_allocate", "on_deallocate")
    arguments = {
        "least": Arg("leastrequested.weight", "float", 1.0, minimum=0),
        "most": Arg("mostrequested.weight", "float", 0.0, minimum=0),
        "balanced": Arg("balancedresource.weight", "float", 1.0, minimum=0),
        "affinity": Arg("nodeaffinity.weight", "float", 1.0, minimum=0),
        "taint": Arg("tainttoleration.weight", "float", 1.0, minimum=0),
        "podaffinity": Arg("podaffinity.weight", "float", 2.0, minimum=0),
        **{name: Arg(f"{name}.weight", "float", 0.0, minimum=0, ignored=_NOT_IMPLEMENTED)
           for name in ("imagelocality", "selectorspread", "podtopologyspread")},
    }

    def open(self, ssn: Session) -> None:
        self.nodes = ssn.nodes
        self.index = ssn.node_index
        groups: dict[tuple, list[int]] = {}
        for i, node in enumerate(ssn.nodes.nodes):
            soft = tuple(t for t in node.taints if t.effect == "PreferNoSchedule")
            if soft:
                groups.setdefault(soft, []).append(i)
        self.soft_taints = list(groups.items())
        self._untolerated: dict[tuple, np.ndarray] = {}
        self._preferred: dict[tuple, np.ndarray] = {}
        interpod = state_of(ssn) if self.args.podaffinity else None
        # None when no pod of the session has a term: then it costs nothing
        self.interpod: PodAffinityState | None = interpod if interpod is not None and interpod.active else None

    # -- inter-pod affinity: the counts follow every placement ------------------------------
    def on_allocate(self, task: TaskInfo) -> None:
        if self.interpod is not None:
            self.interpod.on_allocate(task)

    def on_deallocate(self, task: TaskInfo) -> None:
        if self.interpod is not None:
            self.interpod.on_deallocate(task)

    def _interpod_key(self, task: TaskInfo) -> int | None:
        """The placements the pod's affinity score reads have this version (None: it scores 0 everywhere)."""
        interpod = self.interpod
        if interpod is None or not interpod.scores_matter(task.pod):
            return None
        return interpod.version

    def _interpod_score(self, task: TaskInfo) -> np.ndarray | None:
        assert self.interpod is not None
        raw = self.interpod.raw_score(task.pod)
        return None if raw is None else normalized(raw)

    def score_key(self, task: TaskInfo) -> tuple:
        """Tasks with equal keys score every node alike (request vectors are shared per session)."""
        a = self.args
        return (id(task.req), task.pod.preferred_terms if a.affinity else None,
                task.pod.tolerations if a.taint and self.soft_taints else None,
                None if self._interpod_key(task) is None else (task.pod.pod_affinity, task.pod.namespace,
                                                               tuple(sorted(task.pod.labels.items())),
                                                               self._interpod_key(task)))

    def node_order(self, task: TaskInfo, nodes: np.ndarray | None) -> np.ndarray:
        """Scores of ``nodes`` (all when None); each node's score depends on that node alone."""
        a = self.args
        sel = slice(None) if nodes is None else nodes
        score = np.zeros(self.nodes.count if nodes is None else nodes.size)
        if a.least or a.most or a.balanced:
            cpu, mem = used_fractions(self.nodes, task, sel)
            if a.least:
                score += a.least * (100.0 - (cpu + mem) * 50.0)
            if a.most:
                score += a.most * (cpu + mem) * 50.0
            if a.balanced:
                score += a.balanced * (100.0 - np.abs(cpu - mem) * 50.0)
        if a.affinity and task.pod.preferred_terms:
            preferred = self._preferred_score(task)
            top = preferred.max()
            if top > 0:  # normalised over all nodes, so a node's score does not depend on the others
                score += a.affinity * preferred[sel] * (100.0 / top)
        if a.taint and self.soft_taints:
            counts = self._untolerated_count(task)
            top = counts.max()
            score += a.taint * (100.0 - counts[sel] * (100.0 / top) if top > 0 else 100.0)
        if self._interpod_key(task) is not None:
            interpod = self._interpod_score(task)
            if interpod is not None:
                score += a.podaffinity * interpod[sel]
        return score

    def _preferred_score(self, task: TaskInfo) -> np.ndarray:
        key = task.pod.preferred_terms
        total = self._preferred.get(key)
        if total is None:
            total = np.zeros(self.nodes.count)
            for weight, term in key:
                total += weight * self.index.term_mask(term)
            self._preferred[key] = total
        return total

    def _untolerated_count(self, task: TaskInfo) -> np.ndarray:
        tolerations = task.pod.tolerations
        counts = self._untolerated.get(tolerations)
        if counts is None:
            counts = np.zeros(self.nodes.count)
            for taints, members in self.soft_taints:
                n = sum(1 for t in taints if first_untolerated((t,), tolerations) is not None)
                counts[members] = n
            self._untolerated[tolerations] = counts
        return counts

