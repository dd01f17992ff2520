"""nodegroup: a queue's pods run in the node groups its ``spec.affinity`` names.

A node's group is its label ``volcano.sh/nodegroup-name``.  A Queue's
``spec.affinity`` lists groups under ``nodeGroupAffinity`` and
``nodeGroupAntiAffinity``, each ``requiredDuringSchedulingIgnoredDuringExecution``
and ``preferredDuringSchedulingIgnoredDuringExecution``.  As in Volcano:

* predicate — a node of group *g* admits the queue's pods when *g* is an
  affinity group (required or preferred) and not a required anti-affinity
  group, or when *g* is a preferred anti-affinity group; a node without the
  label admits them only with ``strict: false`` and a queue without affinity;
  a labelled node admits no pod of a queue without affinity;
* score — 100 for a required affinity group, plus 50 for a preferred one
  (``enablePreferredOrder: true``: 50 × (n - i) / n for the i-th of n preferred
  groups, earlier first); a preferred anti-affinity group scores -1.

Arguments: ``strict`` (default true), ``enablePreferredOrder`` (default false).
With the plugin option ``enableHierarchy: true`` a queue without ``spec.affinity``
takes that of its nearest ancestor (``spec.parent``, else ``root``).

The queue annotation ``volcano.sh/nodegroup-resource-limits`` is not read
(Scoria's Queue keeps no annotations).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import numpy as np

from scheduler.api.objects import ROOT_QUEUE, QueueAffinity
from scheduler.framework.args import Arg
from scheduler.framework.plugin import Plugin
from scheduler.framework.snapshot import TaskInfo
from scheduler.framework.util import count_reason

if TYPE_CHECKING:
    from scheduler.framework.session import Session

NODEGROUP_LABEL = "volcano.sh/nodegroup-name"
BASE_SCORE = 100.0
NO_LABEL = "node group label not found"
NO_AFFINITY = "node group affinity not specified"
UNSATISFIED = "node does not satisfy the node group affinity"


def _unset(affinity: QueueAffinity | None) -> bool:
    return affinity is None or not (affinity.required or affinity.preferred or affinity.anti_required
                                    or affinity.anti_preferred)


def admits(affinity: QueueAffinity, group: str) -> bool:
    """Volcano's rule for a node of ``group``: anti-affinity weighs more than affinity, a preferred one last."""
    ok = group in affinity.required or group in affinity.preferred
    if group in affinity.anti_required:
        ok = False
    if group in affinity.anti_preferred:
        ok = True
    return ok


def group_score(affinity: QueueAffinity, group: str, preferred_order: bool) -> float:
    score = BASE_SCORE if group in affinity.required else 0.0
    if group in affinity.preferred:
        if preferred_order:
            order = list(dict.fromkeys(affinity.preferred))  # Volcano indexes by the last occurrence
            last = {g: i for i, g in enumerate(affinity.preferred)}
            n = len(order)
            score += 0.5 * BASE_SCORE * (n - last[group]) / n
        else:
            score += 0.5 * BASE_SCORE
    if group in affinity.anti_preferred:
        score = -1.0
    return score


class NodeGroup(Plugin):
    name = "nodegroup"
    hooks = ("predicate", "predicate_reasons", "node_order")
    arguments = {
        "strict": Arg("strict", "bool", True, "nodes without the node-group label admit only queues "
                                              "without affinity when false"),
        "preferred_order": Arg("enablePreferredOrder", "bool", False,
                               "score preferred node groups by their order in the list"),
    }

    def open(self, ssn: Session) -> None:
        self.count = ssn.nodes.count
        self.affinity = self._affinities(ssn)
        groups: dict[str, list[int]] = {}
        for i, node in enumerate(ssn.nodes.nodes):
            group = node.labels.get(NODEGROUP_LABEL)
            if group is not None:
                groups.setdefault(group, []).append(i)
        self.groups = {g: np.array(idx, dtype=np.intp) for g, idx in groups.items()}
        self.labelled = ssn.node_index.key_mask(NODEGROUP_LABEL)
        self._masks: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._admitted: dict[str, np.ndarray] = {}
        self._scores: dict[str, np.ndarray] = {}

    def _affinities(self, ssn: Session) -> dict[str, QueueAffinity | None]:
        own = {name: q.queue.affinity for name, q in ssn.queues.items()}
        if not self.flags.get("enableHierarchy", False):
            return own
        out: dict[str, QueueAffinity | None] = {}
        for name in own:
            seen = {name}
            cur, affinity = name, own[name]
            while affinity is None and cur != ROOT_QUEUE:
                parent = ssn.queues[cur].parent or ROOT_QUEUE
                if parent not in ssn.queues or parent in seen:
                    break
                seen.add(parent)
                cur, affinity = parent, own[parent]
            out[name] = affinity
        return out

    def _queue_masks(self, queue: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Nodes admitted, and those refused for lack of a label, lack of affinity, or the affinity itself."""
        masks = self._masks.get(queue)
        if masks is None:
            affinity = self.affinity.get(queue)
            no_label = ~self.labelled
            if _unset(affinity):
                no_affinity = self.labelled
                if not self.args.strict:
                    no_label = np.zeros(self.count, dtype=bool)
                unsatisfied = np.zeros(self.count, dtype=bool)
            else:
                assert affinity is not None
                no_affinity = np.zeros(self.count, dtype=bool)
                unsatisfied = self.labelled.copy()
                for group, members in self.groups.items():
                    if admits(affinity, group):
                        unsatisfied[members] = False
            masks = self._masks[queue] = (no_label, no_affinity, unsatisfied)
        return masks

    def predicate(self, task: TaskInfo, avail: np.ndarray | None) -> np.ndarray:
        queue = task.job.queue
        admitted = self._admitted.get(queue)
        if admitted is None:
            no_label, no_affinity, unsatisfied = self._queue_masks(queue)
            admitted = self._admitted[queue] = ~(no_label | no_affinity | unsatisfied)
            admitted.flags.writeable = False  # shared by every task of the queue
        return admitted

    def predicate_reasons(self, task: TaskInfo, avail: np.ndarray | None, among: np.ndarray) -> Counter:
        reasons: Counter = Counter()
        for reason, mask in zip((NO_LABEL, NO_AFFINITY, UNSATISFIED), self._queue_masks(task.job.queue), strict=True):
            count_reason(reasons, reason, among & mask)
        return reasons

    def score_key(self, task: TaskInfo) -> str:
        return task.job.queue

    def node_order(self, task: TaskInfo, nodes: np.ndarray | None) -> np.ndarray | None:
        queue = task.job.queue
        scores = self._scores.get(queue)
        if scores is None:
            scores = np.zeros(self.count)
            affinity = self.affinity.get(queue)
            if affinity is not None:
                for group, members in self.groups.items():
                    scores[members] = group_score(affinity, group, self.args.preferred_order)
            self._scores[queue] = scores
        return scores.copy() if nodes is None else scores[nodes]
