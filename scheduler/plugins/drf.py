"""drf: dominant resource fairness between jobs, namespaces and — hierarchically — queues.

A job's share is its largest fraction of any cluster resource.  Jobs with
the smaller share go first; with ``enablePreemptable`` a task may preempt
another job's task when, afterwards, the preemptor's share would still not
exceed the victim's.  Shares are of real resources: batch resources, what
online work leaves idle for offline pods, are left out (``queueshare.share_mask``).

``enableNamespaceOrder`` (namespace fair share) puts the namespace first: a
namespace's share is the dominant share of everything its jobs hold, divided by
its weight, and jobs of the namespace with the smaller share go first (within a
queue: Scoria's allocate takes queues in turn, then jobs, and ranks a queue's jobs
when it orders them and when a job goes back in line — Volcano v1.7's allocate
took namespaces in turn, re-ranking them after every job).  Preemption across
namespaces follows the namespaces' shares — a victim's namespace must keep a
share above the preemptor's once the task moves — and falls back to the jobs'
shares when the two are equal or the namespace is the same.  Every namespace
weighs 1: Volcano read weights from ResourceQuota objects
(``volcano.sh/namespace.weight``), which Scoria does not load.  Volcano removed
this mode in v1.8 (commit 4ee689ac2, "Refactor namespace fairshare function");
its v1.7 semantics are what is built here.

``enableHierarchy`` is hierarchical DRF (hdrf): queues name their place in a
weighted tree with the annotations ``volcano.sh/hierarchy`` (``root/eng/dev``)
and ``volcano.sh/hierarchy-weights`` (``100/50/50``), read by
:mod:`scheduler.api.hierarchy`; jobs are the leaves.  An inner node's share is
computed from its children's allocations rescaled to the smallest dominant
share among its demanding children (a child whose job holds all it asked
for, or needs a resource the cluster has run out of, is *saturated* and counts
as it is).  Queues are ordered by walking both paths from the root: an
unsaturated node before a saturated one, then the smaller ``share / weight``.
Reclaim takes a task when, after the move, the reclaimer's queue would still
come first.  A queue without the annotations hangs at the root.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from scheduler.api.hierarchy import queue_hierarchy
from scheduler.framework.plugin import Plugin
from scheduler.framework.resources import EPS, dominant_shares
from scheduler.framework.snapshot import JobInfo, QueueInfo, TaskInfo
from scheduler.plugins.shared.queueshare import share_mask

if TYPE_CHECKING:
    from scheduler.framework.session import Session

_DELTA = 1e-6
_ROOT_PATH: tuple[str, ...] = ("root",)


class _Node:
    """A node of the hdrf tree: the root, a level of a queue's path, or a job (a leaf)."""

    __slots__ = ("weight", "parent", "children", "allocated", "request", "share", "saturated")

    def __init__(self, weight: float, parent: _Node | None, allocated: np.ndarray,
                 request: np.ndarray | None = None):
        self.weight = weight
        self.parent = parent
        self.children: dict[tuple[str, str], _Node] | None = None if request is not None else {}
        self.allocated = allocated  # a leaf shares its job's allocation array with the plugin
        self.request = request  # a leaf's: everything its job asks for
        self.share = 0.0
        self.saturated = False


class DRF(Plugin):
    name = "drf"
    hooks = ("job_order", "queue_order", "preemptable", "reclaimable", "victim_key", "on_allocate",
             "on_deallocate")

    def enabled(self, hook: str) -> bool:
        if hook in ("queue_order", "reclaimable") and not self.flags.get("enableHierarchy", False):
            return False  # only hierarchical DRF orders queues and chooses reclaim victims
        return super().enabled(hook)

    def open(self, ssn: Session) -> None:
        self.total = ssn.total
        self.mask = share_mask(ssn.index)
        # what dominant_share reads of the total (fixed for the session), found once
        self._counted = self.mask & (self.total > 0)
        self._counted_total = self.total[self._counted] if self._counted.any() else None
        # the plugin's own copy of every job's allocation (rows of one array), and each job's share
        held = np.array([job.allocated for job in ssn.jobs.values()]).reshape(len(ssn.jobs), len(self.mask))
        self.allocated = dict(zip(ssn.jobs, held, strict=True))
        self.shares = dict(zip(ssn.jobs, dominant_shares(held, self.total, self.mask), strict=True))
        self.namespaces: dict[str, np.ndarray] | None = None
        if self.flags.get("enableNamespaceOrder", False):
            self.namespaces = {}
            for uid, job in ssn.jobs.items():
                self.namespaces.setdefault(job.namespace, ssn.index.zeros())
                self.namespaces[job.namespace] += self.allocated[uid]
            self.ns_shares = {ns: self._share(a) for ns, a in self.namespaces.items()}
        self.hierarchy = self.flags.get("enableHierarchy", False)
        if self.hierarchy:
            self._build_tree(ssn)

    def _share(self, allocated: np.ndarray) -> float:
        """``dominant_share(allocated, self.total, self.mask)``, with what it reads of the total found at open."""
        if self._counted_total is None:
            return 0.0
        return float((allocated[self._counted] / self._counted_total).max())

    # -- job order and preemption --------------------------------------------------------------
    def job_order(self, a: JobInfo, b: JobInfo) -> int:
        if self.namespaces is not None and a.namespace != b.namespace:
            na, nb = self.ns_shares[a.namespace], self.ns_shares[b.namespace]
            if na != nb:
                return -1 if na < nb else 1
        sa, sb = self.shares[a.uid], self.shares[b.uid]
        return (sa > sb) - (sa < sb)

    def preemptable(self, preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        victims: list[TaskInfo] = []
        if self.namespaces is not None:
            candidates, victims = self._namespace_victims(preemptor, candidates)
        mine = self._share(self.allocated[preemptor.job.uid] + preemptor.req)
        left: dict[str, np.ndarray] = {}
        for task in candidates:
            alloc = left.setdefault(task.job.uid, self.allocated[task.job.uid].copy())
            alloc -= task.req
            theirs = self._share(alloc)
            if mine < theirs or abs(mine - theirs) <= _DELTA:
                victims.append(task)
        return victims

    def _namespace_victims(self, preemptor: TaskInfo, candidates: list[TaskInfo]
                           ) -> tuple[list[TaskInfo], list[TaskInfo]]:
        """Candidates the namespaces' shares leave undecided, and those they make victims."""
        assert self.namespaces is not None
        mine = self._share(self.namespaces[preemptor.job.namespace] + preemptor.req)
        left: dict[str, np.ndarray] = {}
        undecided, victims = [], []
        for task in candidates:
            ns = task.job.namespace
            if ns == preemptor.job.namespace:
                undecided.append(task)
                continue
            alloc = left.setdefault(ns, self.namespaces[ns].copy())
            alloc -= task.req
            theirs = self._share(alloc)
            if mine < theirs:
                victims.append(task)
            elif mine - theirs <= _DELTA:
                undecided.append(task)
        return undecided, victims

    def victim_key(self, preemptor: TaskInfo) -> str:
        return preemptor.job.uid  # its answers depend on the preemptor job's share (and its queue's)

    # -- hierarchical DRF ------------------------------------------------------------------------
    def _build_tree(self, ssn: Session) -> None:
        zeros = ssn.index.zeros()
        self.root = _Node(1.0, None, zeros.copy())
        self.leaves: dict[str, _Node] = {}
        self.paths: dict[str, tuple[str, ...]] = {}
        levels: dict[str, tuple[tuple[str, ...], tuple[float, ...]]] = {}
        for name, queue in ssn.queues.items():
            parsed = queue_hierarchy(queue.queue.annotations)  # checked when the Queue was loaded
            levels[name] = parsed or (_ROOT_PATH, (1.0,))
            self.paths[name] = levels[name][0]
        self.total_allocated = zeros.copy()
        for uid, job in ssn.jobs.items():
            path, weights = levels.get(job.queue, (_ROOT_PATH, (1.0,)))
            node = self.root
            for level, weight in zip(path[1:], weights[1:], strict=True):
                assert node.children is not None
                child = node.children.get(("q", level))
                if child is None:
                    child = node.children[("q", level)] = _Node(max(weight, 1.0), node, zeros.copy())
                node = child
            request = zeros.copy()
            for task in job.tasks.values():
                request += task.req
            assert node.children is not None
            leaf = node.children[("j", uid)] = _Node(1.0, node, self.allocated[uid], request)
            self.leaves[uid] = leaf
            self.total_allocated += self.allocated[uid]
        self.demanding = self._demanding()
        self._update(self.root)

    def _demanding(self) -> np.ndarray:
        """Resources the cluster still has some of."""
        return self.mask & (self.total > 0) & (self.total_allocated < self.total - EPS)

    def _saturated(self, node: _Node) -> bool:
        """A job holds all it asks for of some resource, or asks for one the cluster has run out of."""
        assert node.request is not None
        held = self.mask & (np.abs(node.allocated) > EPS)
        asked = node.request > EPS
        full = held & asked & (node.allocated >= node.request - EPS)
        return bool(full.any() or (held & asked & ~self.demanding).any())

    def _update(self, node: _Node) -> None:
        """Recompute ``node``'s subtree bottom up."""
        if node.children is None:
            self._update_leaf(node)
            return
        for child in node.children.values():
            self._update(child)
        self._update_inner(node)

    def _update_leaf(self, node: _Node) -> None:
        node.share = self._share(node.allocated)
        node.saturated = self._saturated(node)

    def _update_inner(self, node: _Node) -> None:
        """An inner node from its (up-to-date) children: demanding children rescaled to the smallest
        dominant share among them, saturated ones as they are."""
        assert node.children is not None
        children = node.children.values()
        lowest = min([1.0, *(c.share for c in children if c.share > 0 and not c.saturated)])
        allocated = np.zeros_like(self.total)
        for child in children:
            if child.share > 0:
                allocated += child.allocated if child.saturated else child.allocated * (lowest / child.share)
        node.allocated = allocated
        node.share = self._share(allocated)
        node.saturated = all(c.saturated for c in children)

    def _shift(self, uid: str, req: np.ndarray, sign: int) -> None:
        """Add (``sign`` 1) or take away (-1) ``req`` of job ``uid``'s allocation in the tree; its job
        allocation array (shared with the leaf) must already have changed."""
        self.total_allocated += sign * req
        demanding = self._demanding()
        if not np.array_equal(demanding, self.demanding):
            self.demanding = demanding
            self._update(self.root)  # every leaf's saturation may change
            return
        node: _Node | None = self.leaves[uid]
        assert node is not None
        self._update_leaf(node)
        node = node.parent
        while node is not None:
            self._update_inner(node)
            node = node.parent

    def _compare_paths(self, a: str, b: str) -> int:
        pa, pb = self.paths.get(a, _ROOT_PATH), self.paths.get(b, _ROOT_PATH)
        na: _Node | None = self.root
        nb: _Node | None = self.root
        depth = min(len(pa), len(pb))
        for i in range(depth):
            # a level no job hangs under has no node: nothing allocated, demanding
            sat_a, sat_b = na is not None and na.saturated, nb is not None and nb.saturated
            if sat_a != sat_b:
                return 1 if sat_a else -1  # demanding nodes first
            sa = 0.0 if na is None else na.share / na.weight
            sb = 0.0 if nb is None else nb.share / nb.weight
            if sa != sb:
                return -1 if sa < sb else 1
            if i < depth - 1:
                na = None if na is None or na.children is None else na.children.get(("q", pa[i + 1]))
                nb = None if nb is None or nb.children is None else nb.children.get(("q", pb[i + 1]))
        return 0

    def queue_order(self, a: QueueInfo, b: QueueInfo) -> int:
        return self._compare_paths(a.name, b.name)

    def reclaimable(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo] | None:
        """Victims whose queue, once the task moved to the reclaimer's queue, would still come after it."""
        mine = reclaimer.job
        if mine.uid not in self.leaves:
            return []
        victims = []
        self.allocated[mine.uid] += reclaimer.req
        self._shift(mine.uid, reclaimer.req, +1)
        try:
            for task in candidates:
                uid = task.job.uid
                if uid not in self.leaves:
                    continue
                self.allocated[uid] -= task.req
                self._shift(uid, task.req, -1)
                order = self._compare_paths(mine.queue, task.job.queue)
                self.allocated[uid] += task.req
                self._shift(uid, task.req, +1)
                if order < 0:
                    victims.append(task)
        finally:
            self.allocated[mine.uid] -= reclaimer.req
            self._shift(mine.uid, reclaimer.req, -1)
        return victims

    # -- accounting ------------------------------------------------------------------------------
    def on_allocate(self, task: TaskInfo) -> None:
        self._change(task, +1)

    def on_deallocate(self, task: TaskInfo) -> None:
        self._change(task, -1)

    def _change(self, task: TaskInfo, sign: int) -> None:
        uid = task.job.uid
        self.allocated[uid] += sign * task.req
        self.shares[uid] = self._share(self.allocated[uid])
        if self.namespaces is not None:
            ns = task.job.namespace
            self.namespaces[ns] += sign * task.req
            self.ns_shares[ns] = self._share(self.namespaces[ns])
        if self.hierarchy and uid in self.leaves:
            self._shift(uid, task.req, sign)
