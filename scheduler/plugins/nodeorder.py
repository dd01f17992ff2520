"""nodeorder: kube-scheduler's node scores, vectorised over the candidate nodes.

Each score is 0-100 and multiplied by its weight (Volcano's argument names):
``leastrequested`` favours free nodes (spreading), ``mostrequested`` full ones,
``balancedresource`` nodes whose CPU and memory end up equally used,
``nodeaffinity`` preferred node-affinity terms, ``tainttoleration`` nodes
with fewer untolerated ``PreferNoSchedule`` taints, ``podtopologyspread`` nodes
whose topology domains hold fewer of the pods a ``ScheduleAnyway`` spread
constraint selects (kube-scheduler's PodTopologySpread score, normalised over
the nodes passing the pod's node selector, affinity and taints),
``podaffinity`` kube-scheduler's InterPodAffinity score (preferred inter-pod
affinity and anti-affinity, the pod's and placed pods', normalised to 0-100).
``podtopologyspread.defaultConstraints`` (Scoria's; see the predicates plugin)
gives ScheduleAnyway constraints for pods without any of their own.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.framework.args import Arg, Args
from scheduler.framework.nodeindex import first_untolerated
from scheduler.framework.plugin import Plugin
from scheduler.framework.snapshot import TaskInfo
from scheduler.plugins.shared import topologyspread
from scheduler.plugins.shared.nodefill import used_fractions
from scheduler.plugins.shared.podaffinity import PodAffinityState, normalized, state_of

if TYPE_CHECKING:
    from scheduler.framework.session import Session

log = logging.getLogger(__name__)
_NOT_IMPLEMENTED = "Scoria's nodeorder does not implement this score; it counts as 0"
SPREAD_DEFAULTS_KEY = "podtopologyspread.defaultConstraints"


class NodeOrder(Plugin):
    name = "nodeorder"
    hooks = ("node_order", "on_allocate", "on_deallocate")
    arguments = {
        "spread": Arg("podtopologyspread.weight", "float", 2.0, minimum=0),
        "least": Arg("leastrequested.weight", "float", 1.0, minimum=0),
        "most": Arg("mostrequested.weight", "float", 0.0, minimum=0),
        "balanced": Arg("balancedresource.weight", "float", 1.0, minimum=0),
        "affinity": Arg("nodeaffinity.weight", "float", 1.0, minimum=0),
        "taint": Arg("tainttoleration.weight", "float", 1.0, minimum=0),
        "podaffinity": Arg("podaffinity.weight", "float", 2.0, minimum=0),
        **{name: Arg(f"{name}.weight", "float", 0.0, minimum=0, ignored=_NOT_IMPLEMENTED)
           for name in ("imagelocality", "selectorspread")},
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
        self.spread_counts = topologyspread.SpreadCounts(ssn.nodes, ssn.node_index)
        self._spread_defaults = getattr(self.args, "spread_defaults", ())
        interpod = state_of(ssn) if self.args.podaffinity else None
        # None when no pod of the session has a term: then it costs nothing
        self.interpod: PodAffinityState | None = interpod if interpod is not None and interpod.active else None

    @classmethod
    def parse(cls, raw: dict[str, Any] | None) -> Args:
        rest, defaults = topologyspread.parse_defaults(raw, SPREAD_DEFAULTS_KEY, False,
                                                       "predicates' predicate.PodTopologySpreadDefaultConstraints")
        args = super().parse(rest)
        return Args({**args.as_dict(), "spread_defaults": defaults}, args.unimplemented, args.notes)

    @classmethod
    def implements(cls, key: str) -> bool:
        return key == SPREAD_DEFAULTS_KEY or super().implements(key)

    # -- pod topology spread (ScheduleAnyway) ---------------------------------------------------
    def _spread_rules(self, task: TaskInfo) -> tuple[topologyspread.Rule, ...]:
        if not self.args.spread or not (task.pod.spread_constraints or self._spread_defaults):
            return ()
        return topologyspread.rules(task.pod, False, self._spread_defaults)

    # -- the counts of spread and inter-pod affinity follow every placement ----------------------
    def on_allocate(self, task: TaskInfo) -> None:
        self.spread_counts.on_allocate(task)
        if self.interpod is not None:
            self.interpod.on_allocate(task)

    def on_deallocate(self, task: TaskInfo) -> None:
        self.spread_counts.on_deallocate(task)
        if self.interpod is not None:
            self.interpod.on_deallocate(task)

    def _spread_score(self, task: TaskInfo, soft: tuple[topologyspread.Rule, ...]) -> np.ndarray:
        """Every node's spread score; the candidates are the nodes the pod's node-level filters admit."""
        selector, terms, tolerations = task.sig
        filtered = (self.index.schedulable_mask(tolerations) & self.index.tolerated_mask(tolerations)
                    & self.index.affinity_mask(selector, terms))
        return self.spread_counts.scores(task, soft, filtered)

    # -- inter-pod affinity -------------------------------------------------------------------
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
        key: tuple = (id(task.req), task.pod.preferred_terms if a.affinity else None,
                      task.pod.tolerations if a.taint and self.soft_taints else None)
        soft = self._spread_rules(task)
        if soft:  # spread scores move with the counts, and one node's depends on the others'
            key += (task.sig, task.pod.namespace, soft, self.spread_counts.version)
        version = self._interpod_key(task)
        if version is not None:  # so do inter-pod affinity scores
            key += (task.pod.pod_affinity, task.pod.namespace, tuple(sorted(task.pod.labels.items())), version)
        return key

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
        soft = self._spread_rules(task)
        if soft:
            score += a.spread * self._spread_score(task, soft)[sel]
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

