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

Deserved amounts, guarantees, shares and reclaim count real resources only;
batch resources (what online work leaves idle for offline pods) are limited by
a capability set on them, never counted against a queue's share
(``plugins/shared/queueshare.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from scheduler.api.objects import ROOT_QUEUE
from scheduler.framework.plugin import ABSTAIN, PERMIT, Plugin, Vote, reject
from scheduler.framework.resources import EPS
from scheduler.framework.snapshot import JobInfo, QueueInfo, TaskInfo
from scheduler.plugins.shared.queueshare import describe, limit_mask, over_limit, share, share_mask

if TYPE_CHECKING:
    from scheduler.framework.session import Session


class Attr:
    __slots__ = ("name", "parent", "children", "capability", "deserved", "guarantee", "allocated", "inqueue",
                 "share")

    def __init__(self, name: str, parent: str, zeros: np.ndarray):
        self.name, self.parent = name, parent
        self.children: list[str] = []
        self.capability = zeros + np.inf
        self.deserved = zeros.copy()
        self.guarantee = zeros.copy()
        self.allocated = zeros.copy()
        self.inqueue = zeros.copy()
        self.share = 0.0


class Capacity(Plugin):
    name = "capacity"
    hooks = ("queue_order", "allocatable", "preemptive", "reclaimable", "job_enqueueable", "job_enqueued",
             "on_allocate", "on_deallocate")

    def open(self, ssn: Session) -> None:
        self.index = ssn.index
        self.mask = share_mask(ssn.index)
        self.limits = limit_mask(ssn.index)
        self.hierarchy = self.flags.get("enableHierarchy", False)
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
        else:
            assert q is not None  # every queue but the root is one of ssn.queues (see open)
            attr.capability = np.minimum(q.capability, parent_cap)
            attr.guarantee = q.guarantee.copy()
            own = q.deserved if q.deserved is not None else attr.guarantee.copy()
            attr.deserved = np.clip(np.where(np.isinf(own), attr.guarantee, own), attr.guarantee, attr.capability)
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

    # -- hooks ------------------------------------------------------------------------------
    def queue_order(self, a: QueueInfo, b: QueueInfo) -> int:
        if a.priority != b.priority:  # Queue spec.priority first, as Volcano orders queues
            return -1 if a.priority > b.priority else 1
        sa, sb = self.attrs[a.name].share, self.attrs[b.name].share
        return (sa > sb) - (sa < sb)

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
        return self._refusal(queue.name) or self._over_capability(queue.name, task.req)

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        attr = self.attrs[queue.name]
        future = attr.allocated + task.req
        cols = [c for c in task.cols if self.mask[c]]
        return all(future[c] <= attr.deserved[c] + EPS for c in cols)

    def reclaimable(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Victims from queues above deserved on a resource they hold, never below guarantee."""
        allocations: dict[str, np.ndarray] = {}
        victims = []
        for task in candidates:
            attr = self.attrs.get(task.job.queue)
            if attr is None:
                continue
            allocated = allocations.setdefault(attr.name, attr.allocated.copy())
            cols = [c for c in task.cols if self.mask[c]]
            if not any(allocated[c] > attr.deserved[c] + EPS for c in cols):
                continue
            if any(allocated[c] - task.req[c] < attr.guarantee[c] - EPS for c in cols):
                continue
            allocated -= task.req
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

