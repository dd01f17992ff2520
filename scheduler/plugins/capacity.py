"""capacity: elastic queues with deserved, guarantee and capability — optionally as a tree.

Each queue may use idle resources up to its *capability*; what it holds above
its *deserved* amount can be reclaimed by queues below theirs; its
*guarantee* is never reclaimed.  With ``enableHierarchy`` queues form a tree
through ``spec.parent`` (default ``root``, which owns the whole cluster):

* a limit a child does not set is inherited from its parent, and a child can
  never exceed its parent (``realCapability = min(own, parent's)``);
* a parent's allocation is the sum of its descendants', and every ancestor's
  capability must hold for a task to be placed;
* only leaf queues hold jobs; children's guarantees must fit in the parent's.

Reclaim follows Volcano: a queue may reclaim for a task while below its deserved
amount on at least one resource the task asks for (and within its capability);
a victim's queue must be above its deserved amount on a resource the victim
holds and the queue deserves — or deserve none of what it holds — and keep its
guarantee.  ``ancestorReclaimLevel: N`` (with ``enableHierarchy``) looks up to N
levels up the tree: a queue may reclaim when an ancestor within N levels is
below its deserved amount; each of the victim's ancestors within N levels that
the reclaimer does not share must be above its deserved amount too (or deserve
none of what the victim holds); and a queue deserving none of what it holds is
no victim for a queue under a common ancestor (within N levels) that deserves
none of what it asks.  A negative level is refused (Volcano falls back to 0).

Dynamic resource allocation is not supported: ``capacity.DynamicResourceAllocationEnable``
and ``capacity.DRAConsumableCapacityEnable`` are accepted (with a warning when
true), and a pod with ``spec.resourceClaims`` is refused by the queue check with
a reason saying so.

Deserved amounts, guarantees, shares and reclaim count real resources only;
batch resources (what online work leaves idle for offline pods) are limited by
a capability set on them, never counted against a queue's share
(``plugins/shared/queueshare.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from scheduler.api.objects import ROOT_QUEUE
from scheduler.framework.args import Arg
from scheduler.framework.plugin import ABSTAIN, PERMIT, Plugin, Vote, reject
from scheduler.framework.resources import EPS
from scheduler.framework.snapshot import JobInfo, QueueInfo, TaskInfo
from scheduler.plugins.shared.queueshare import describe, limit_mask, over_limit, share, share_mask

if TYPE_CHECKING:
    from scheduler.framework.session import Session


_NO_DRA = "Scoria does not support dynamic resource allocation: a pod with spec.resourceClaims stays pending"


class Attr:
    __slots__ = ("name", "parent", "children", "capability", "deserved", "guarantee", "allocated", "inqueue",
                 "share", "relevant", "ancestors")

    def __init__(self, name: str, parent: str, zeros: np.ndarray):
        self.name, self.parent = name, parent
        self.children: list[str] = []
        self.capability = zeros + np.inf
        self.deserved = zeros.copy()
        self.guarantee = zeros.copy()
        self.allocated = zeros.copy()
        self.inqueue = zeros.copy()
        self.share = 0.0
        # resources the queue's deserved amount speaks about: a positive amount, or an extended resource
        # named in deserved or guarantee even at 0 (Volcano's "relevant dimensions")
        self.relevant = np.zeros(zeros.shape, dtype=bool)
        self.ancestors: list[Attr] = []  # parent first, root last


class Capacity(Plugin):
    name = "capacity"
    hooks = ("queue_order", "victim_queue_order", "allocatable", "preemptive", "reclaimable", "job_enqueueable", "job_enqueued",
             "on_allocate", "on_deallocate")
    arguments = {
        "ancestor_reclaim_level": Arg("ancestorReclaimLevel", "int", 0, minimum=0),
        "dra": Arg("capacity.DynamicResourceAllocationEnable", "bool", False, ignored=_NO_DRA),
        "dra_consumable": Arg("capacity.DRAConsumableCapacityEnable", "bool", False, ignored=_NO_DRA),
    }

    def open(self, ssn: Session) -> None:
        self.index = ssn.index
        self.mask = share_mask(ssn.index)
        self.limits = limit_mask(ssn.index)
        self.hierarchy = self.flags.get("enableHierarchy", False)
        self.level = self.args.ancestor_reclaim_level if self.hierarchy else 0
        self.total = ssn.total
        zeros = ssn.index.zeros()
        self.attrs: dict[str, Attr] = {ROOT_QUEUE: Attr(ROOT_QUEUE, "", zeros)}
        for name, q in ssn.queues.items():
            if name == ROOT_QUEUE:
                continue
            parent = (q.parent or ROOT_QUEUE) if self.hierarchy else ROOT_QUEUE
            self.attrs[name] = Attr(name, parent if parent in ssn.queues or parent == ROOT_QUEUE else ROOT_QUEUE,
                                    zeros)
        for attr in self.attrs.values():
            if attr.parent:
                self.attrs[attr.parent].children.append(attr.name)
        self.problems: dict[str, str] = {}  # parent queue -> why its subtree cannot schedule
        self._limits(ssn, ROOT_QUEUE, ssn.total, ssn.total)
        for attr in self.attrs.values():
            attr.ancestors = self._path(attr.name)[1:]
        for job in ssn.jobs.values():
            if job.queue in self.attrs:
                for attr in self._path(job.queue):
                    attr.allocated += job.allocated + job.reserved  # room made by evictions stays with its pod
                    if job.phase == "Inqueue" and job.min_resources is not None:
                        attr.inqueue += np.maximum(job.min_resources - job.allocated, 0)
        for attr in self.attrs.values():
            attr.share = share(attr.allocated, attr.deserved, self.mask)

    def _limits(self, ssn: Session, name: str, parent_cap: np.ndarray, parent_guarantee: np.ndarray) -> None:
        """Resolve capability/deserved/guarantee top-down, inheriting unset dimensions."""
        attr = self.attrs[name]
        q = ssn.queues.get(name)
        if name == ROOT_QUEUE:
            attr.capability = ssn.total.copy() if q is None else np.minimum(q.capability, ssn.total)
            attr.deserved = attr.capability.copy()
            attr.guarantee = attr.capability.copy()
            attr.relevant = attr.deserved > EPS
        else:
            assert q is not None  # every queue but the root is one of ssn.queues (see open)
            attr.capability = np.minimum(q.capability, parent_cap)
            attr.guarantee = q.guarantee.copy()
            own = q.deserved if q.deserved is not None else attr.guarantee.copy()
            attr.deserved = np.clip(np.where(np.isinf(own), attr.guarantee, own), attr.guarantee, attr.capability)
            named = ~np.isinf(q.deserved) if q.deserved is not None else np.zeros(attr.deserved.shape, dtype=bool)
            named |= attr.guarantee > EPS
            named[:2] = False  # cpu and memory count only when positive
            attr.relevant = (attr.deserved > EPS) | named
        sum_guarantee = self.index.zeros()
        for child in attr.children:
            self._limits(ssn, child, attr.capability, attr.guarantee)
            sum_guarantee += self.attrs[child].guarantee
        over = [c for c in np.flatnonzero(self.mask) if sum_guarantee[c] > attr.guarantee[c] + EPS]
        if self.hierarchy and over:
            self.problems[name] = (f"children of queue {name} guarantee {describe(self.index, sum_guarantee, over)},"
                                   f" more than its {describe(self.index, attr.guarantee, over)}")

    def _path(self, name: str) -> list[Attr]:
        """The queue and its ancestors (root included)."""
        out, seen = [], set()
        while name and name not in seen and name in self.attrs:
            seen.add(name)
            out.append(self.attrs[name])
            name = self.attrs[name].parent
        return out

    def queue_deserved(self, queue: str) -> np.ndarray | None:
        attr = self.attrs.get(queue)
        return None if attr is None else attr.deserved

    # -- hooks ------------------------------------------------------------------------------
    def queue_order(self, a: QueueInfo, b: QueueInfo) -> int:
        if a.priority != b.priority:  # Queue spec.priority first, as Volcano orders queues
            return -1 if a.priority > b.priority else 1
        sa, sb = self.attrs[a.name].share, self.attrs[b.name].share
        return (sa > sb) - (sa < sb)

    def victim_queue_order(self, a: QueueInfo, b: QueueInfo, preemptor: QueueInfo) -> int:
        """With the hierarchy, victims from queues sharing a deeper ancestor with the preemptor's go first
        (Volcano's capacity VictimQueueOrderFn: its siblings before its cousins)."""
        if not self.hierarchy:
            return 0
        home = [attr.name for attr in reversed(self._path(preemptor.name))]  # root first
        la, lb = self._shared_depth(a.name, home), self._shared_depth(b.name, home)
        return 0 if la == lb else (-1 if la > lb else 1)

    def _shared_depth(self, name: str, home: list[str]) -> int:
        """How deep the ancestors of ``name`` (root first) run alongside ``home``'s, as Volcano's getQueueLevel."""
        level = 0
        for i, (mine, theirs) in enumerate(zip(reversed([a.name for a in self._path(name)]), home, strict=False)):
            if mine != theirs:
                break
            level = i
        return level

    def _refusal(self, name: str) -> str | None:
        if self.problems:  # fixed at open; usually none, so no walk up the tree per task
            for attr in self._path(name)[1:]:
                if attr.name in self.problems:
                    return f"queue tree is inconsistent: {self.problems[attr.name]}"
        if self.hierarchy and self.attrs[name].children:
            return f"queue {name} has child queues; only leaf queues run jobs"
        return None

    def _over_capability(self, name: str, extra: np.ndarray, *, admitted: bool = False) -> str | None:
        """Would ``extra`` on top of each ancestor's allocation (and admitted jobs) exceed a capability?"""
        cols = [c for c in np.flatnonzero(self.limits) if extra[c] > 0]
        for attr in self._path(name):
            future = attr.allocated + extra + (attr.inqueue if admitted else 0)
            over = over_limit(future, attr.capability, self.total, cols)
            if over:
                whose = "its" if attr.name == name else f"ancestor {attr.name}'s"
                return (f"queue {name} would exceed {whose} capability: {describe(self.index, future, over)} "
                        f"of {describe(self.index, attr.capability, over)}")
        return None

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> str | None:
        if queue.state != "Open":  # Volcano's queueAllocatable: a Closing or Closed queue places nothing new
            return f"queue {queue.name} is {queue.state}: it places no new pods"
        return self._refusal(queue.name) or self._over_capability(queue.name, task.req)

    # Volcano's comparisons, over the share mask (real resources, no pod count) and the task's resources.
    def _within_partly(self, future: np.ndarray, deserved: np.ndarray, req: np.ndarray) -> bool:
        """``future <= deserved`` on at least one resource the task asks for, leaving out resources that
        neither the queue uses nor deserves.  A task asking for no shared resource (batch resources only)
        takes nothing the queue deserves: within."""
        cols = np.flatnonzero(self.mask & (req > EPS))
        if not cols.size:
            return True
        for c in cols:
            if future[c] <= EPS and deserved[c] <= EPS:
                continue
            if future[c] <= deserved[c] + EPS:
                return True
        return False

    def _immediate(self, task: TaskInfo, attr: Attr) -> bool:
        """Is the queue owed none of what the task holds (no resource both positive in its request and in
        the queue's deserved amount)?  Such a task may always be reclaimed (above its guarantee)."""
        return not bool((self.mask & (task.req > EPS) & (attr.deserved > EPS)).any())

    def _exceeds(self, allocated: np.ndarray, attr: Attr, task: TaskInfo) -> bool:
        """Is the queue above its deserved amount on a resource the task holds and the queue deserves?"""
        cols = self.mask & (task.req > EPS) & attr.relevant
        return bool((allocated[cols] > attr.deserved[cols] + EPS).any())

    def _ancestor(self, attr: Attr, depth: int) -> Attr | None:
        """The queue's ancestor ``depth`` levels up (1: its parent), or None."""
        return attr.ancestors[depth - 1] if depth <= len(attr.ancestors) else None

    def _shares_ancestor(self, a: Attr, b: Attr) -> bool:
        """Do the two queues have a common ancestor other than the root within ``ancestorReclaimLevel``?"""
        mine = {x.name for x in a.ancestors[:self.level]} - {ROOT_QUEUE}
        return any(x.name in mine for x in b.ancestors[:self.level])

    def _ancestor_to_check(self, reclaimer: Attr, victim: Attr, depth: int) -> Attr | None:
        """The victim's ancestor at ``depth`` when it must be above its deserved amount too: not the root,
        and not an ancestor the reclaimer shares at that depth (that subtree gains nothing)."""
        anc = self._ancestor(victim, depth)
        if anc is None or anc.name == ROOT_QUEUE:
            return None
        mine = self._ancestor(reclaimer, depth)
        return None if mine is not None and mine.name == anc.name else anc

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        """May the queue reclaim for ``task``: within its capability, and below its deserved amount on some
        resource the task asks for — or, with ``ancestorReclaimLevel``, an ancestor up to that many levels is."""
        if self._refusal(queue.name):
            return False
        attr = self.attrs[queue.name]
        future = attr.allocated + task.req
        cols = [c for c in task.cols if self.limits[c]]
        if over_limit(future, attr.capability, self.total, cols):
            return False
        if self._within_partly(future, attr.deserved, task.req):
            return True
        for depth in range(1, self.level + 1):
            anc = self._ancestor(attr, depth)
            if anc is not None and anc.name != ROOT_QUEUE and \
                    self._within_partly(anc.allocated + task.req, anc.deserved, task.req):
                return True
        return False

    def reclaimable(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Victims from queues above their deserved amount on a resource they hold, never below their guarantee.

        With ``ancestorReclaimLevel`` N (and ``enableHierarchy``) each of the victim queue's ancestors up to
        N levels that the reclaimer's queue does not share must be above its deserved amount too, and a
        queue deserving nothing of what it holds is no victim for a sibling (within N levels) that deserves
        nothing of what it asks either.
        """
        mine = self.attrs.get(reclaimer.job.queue)
        if mine is None or self._refusal(mine.name):
            return []
        allocations: dict[str, np.ndarray] = {}
        victims = []
        for task in candidates:
            attr = self.attrs.get(task.job.queue)
            if attr is None:
                continue
            allocated = allocations.setdefault(attr.name, attr.allocated.copy())
            cols = [c for c in task.cols if self.mask[c]]
            if any(allocated[c] - task.req[c] < attr.guarantee[c] - EPS for c in cols):
                continue
            if self._immediate(task, attr):
                if self.level and self._shares_ancestor(mine, attr) and self._immediate(reclaimer, mine):
                    continue  # siblings deserving nothing of it: no real contention under their ancestor
            elif not self._exceeds(allocated, attr, task):
                continue
            charged = []
            for depth in range(1, self.level + 1):
                anc = self._ancestor_to_check(mine, attr, depth)
                if anc is None:
                    continue
                anc_allocated = allocations.setdefault(anc.name, anc.allocated.copy())
                if not self._immediate(task, anc) and not self._exceeds(anc_allocated, anc, task):
                    break
                charged.append(anc_allocated)
            else:
                allocated -= task.req
                for anc_allocated in charged:
                    anc_allocated -= task.req
                victims.append(task)
        return victims

    def job_enqueueable(self, job: JobInfo) -> Vote:
        refusal = self._refusal(job.queue) if job.queue in self.attrs else None
        if refusal:
            return reject(refusal)
        if job.min_resources is None or job.queue not in self.attrs:
            return ABSTAIN
        over = self._over_capability(job.queue, job.min_resources, admitted=True)
        return reject(f"minResources do not fit: {over}") if over else PERMIT

    def job_enqueued(self, job: JobInfo) -> None:
        if job.min_resources is not None:
            for attr in self._path(job.queue):
                attr.inqueue += job.min_resources

    def on_allocate(self, task: TaskInfo) -> None:
        self._change(task, +1)

    def on_deallocate(self, task: TaskInfo) -> None:
        self._change(task, -1)

    def _change(self, task: TaskInfo, sign: int) -> None:
        if task.nominated >= 0:  # a nominated task was counted at open
            return
        for attr in self._path(task.job.queue):
            attr.allocated += sign * task.req
            attr.share = share(attr.allocated, attr.deserved, self.mask)

