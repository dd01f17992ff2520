"""proportion: share the cluster between queues by weight.

Each queue's *deserved* share is found by water-filling: the remaining
resources are split by weight among queues that still want more, each capped
by its capability and by what its jobs request, and never below its
guarantee; repeat until nothing changes.  A queue at its deserved share is
*overused* and allocates no more; a queue below it may reclaim from queues
above theirs; a job is admitted (Inqueue) only if its minResources fit under
the queue's capability.

Shares are of real resources only (``plugins/shared/queueshare.py``): batch
resources count against a queue's capability if one is set on them, never
against its share, and a queue at its share of real resources still places
pending work that asks for none of them (offline pods on batch resources).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from scheduler.framework.plugin import ABSTAIN, PERMIT, Plugin, Vote, reject
from scheduler.framework.resources import EPS
from scheduler.framework.snapshot import JobInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.plugins.shared.queueshare import ShareOf, describe, limit_mask, over_limit, share_mask

if TYPE_CHECKING:
    from scheduler.framework.session import Session


class QueueAttr:
    __slots__ = ("name", "weight", "allocated", "request", "inqueue", "deserved", "capability", "guarantee",
                 "share", "share_free")

    def __init__(self, queue: QueueInfo, total: np.ndarray, zeros: np.ndarray):
        self.name = queue.name
        self.weight = queue.weight
        self.allocated = zeros.copy()
        self.request = zeros.copy()
        self.inqueue = zeros.copy()
        self.deserved = zeros.copy()
        self.capability = np.minimum(queue.capability, total)
        self.guarantee = queue.guarantee.copy()
        self.share = 0.0
        self.share_free = False  # a pending task asks for no shared resource (offline on batch resources only)


def water_fill(attrs: list[QueueAttr], total: np.ndarray, mask: np.ndarray) -> None:
    """Set each attr's ``deserved``: a weighted share of ``total``, per dimension in ``mask``.

    Queue *i* deserves ``clip(weight_i × level, floor_i, cap_i)`` where the floor
    is its guarantee and the cap is what it can use (its request, at most its
    capability, never below its guarantee); the level is raised until the
    cluster is handed out or every queue is at its cap.  The level is found
    exactly from the breakpoints of that piecewise-linear sum, so shares add
    up to the total without rounding drift.
    """
    if not attrs:
        return
    weights = np.array([a.weight for a in attrs], dtype=float)
    for col in np.flatnonzero(mask):
        floors = np.array([a.guarantee[col] for a in attrs])
        caps = np.maximum(floors, np.array([min(a.capability[col], a.request[col]) for a in attrs]))
        shares = _level_fill(weights, floors, caps, float(total[col]))
        for a, value in zip(attrs, shares, strict=True):
            a.deserved[col] = value
    for a in attrs:
        a.deserved[~mask] = 0


def _level_fill(weights: np.ndarray, floors: np.ndarray, caps: np.ndarray, total: float) -> np.ndarray:
    def handed_out(level: float) -> float:
        return float(np.clip(weights * level, floors, caps).sum())

    if caps.sum() <= total:  # every queue can have its cap (caps >= floors)
        return caps.copy()
    if floors.sum() >= total:  # guarantees alone use everything
        return floors.copy()
    points = np.unique(np.concatenate([floors / weights, caps / weights]))
    low = 0.0
    for high in points:
        if handed_out(high) >= total:
            break
        low = high
    # handed_out is linear on [low, high]: interpolate to hand out exactly ``total``.
    a, b = handed_out(low), handed_out(high)
    level = high if b == a else low + (total - a) * (high - low) / (b - a)
    return np.clip(weights * level, floors, caps)


class Proportion(Plugin):
    name = "proportion"
    hooks = ("queue_order", "overused", "allocatable", "preemptive", "reclaimable", "job_enqueueable",
             "job_enqueued", "on_allocate", "on_deallocate")

    def open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.index = ssn.index
        self.mask = share_mask(ssn.index)
        self.limits = limit_mask(ssn.index)
        zeros = ssn.index.zeros()
        self.attrs = {name: QueueAttr(q, ssn.total, zeros) for name, q in ssn.queues.items()}
        # Each queue's allocated (its jobs' allocations and reservations: room made by evictions stays with
        # its pod) and request (its jobs' allocations and pending tasks), summed in one pass per array in
        # the order a loop over jobs and their tasks would add them.
        rows = {name: i for i, name in enumerate(self.attrs)}
        held_rows: list[int] = []
        held: list[np.ndarray] = []
        reserved: list[np.ndarray] = []
        asked_rows: list[int] = []
        asked: list[np.ndarray] = []
        pending = TaskStatus.PENDING
        for job in ssn.jobs.values():
            row = rows.get(job.queue)
            if row is None:
                continue
            attr = self.attrs[job.queue]
            held_rows.append(row)
            held.append(job.allocated)
            reserved.append(job.reserved)
            asked_rows.append(row)
            asked.append(job.allocated)
            if job.counts[pending]:
                for task in job.tasks.values():
                    if task.status == pending:
                        asked_rows.append(row)
                        asked.append(task.req)
                        if not task.best_effort and not task.req[self.mask].any():
                            attr.share_free = True
            if job.phase == "Inqueue" and job.min_resources is not None:
                attr.inqueue += np.maximum(job.min_resources - job.allocated, 0)
        size = len(zeros)
        for target, at, vectors in (("allocated", held_rows, np.array(held).reshape(-1, size)
                                     + np.array(reserved).reshape(-1, size)),
                                    ("request", asked_rows, asked)):
            if at:
                sums = np.zeros((len(rows), size))
                np.add.at(sums, np.array(at), np.array(vectors).reshape(-1, size))
                for name, row in rows.items():
                    setattr(self.attrs[name], target, sums[row].copy())
        water_fill(list(self.attrs.values()), ssn.total, self.mask)
        self._share = {name: ShareOf(attr.deserved, self.mask) for name, attr in self.attrs.items()}
        for name, attr in self.attrs.items():
            attr.share = self._share[name](attr.allocated)

    def queue_deserved(self, queue: str) -> np.ndarray | None:
        attr = self.attrs.get(queue)
        return None if attr is None else attr.deserved

    def queue_order(self, a: QueueInfo, b: QueueInfo) -> int:
        if a.priority != b.priority:  # Queue spec.priority first, as Volcano orders queues
            return -1 if a.priority > b.priority else 1
        sa, sb = self.attrs[a.name].share, self.attrs[b.name].share
        return (sa > sb) - (sa < sb)

    def overused(self, queue: QueueInfo) -> str | None:
        """At its deserved share of every real resource; not while it has pending work that needs none of them
        (that work cannot take it past its share; ``allocatable`` still holds back each task that would)."""
        attr = self.attrs[queue.name]
        cols = np.flatnonzero(self.mask)
        if not attr.share_free and (attr.deserved[cols] <= attr.allocated[cols] + EPS).all():
            return (f"queue {queue.name} is at its deserved share: allocated {describe(self.index, attr.allocated, cols[:2])}"
                    f" of deserved {describe(self.index, attr.deserved, cols[:2])}")
        return None

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> str | None:
        """Refuse a task that would take the queue past its capability or deserved share.

        Where a limit is the whole cluster, node fit is the real constraint and
        the predicates explain it better, so only limits below the cluster's
        total are checked here.
        """
        if queue.state != "Open":  # Volcano's queueAllocatable: a Closing or Closed queue places nothing new
            return f"queue {queue.name} is {queue.state}: it places no new pods"
        attr = self.attrs[queue.name]
        total = self.ssn.total
        future = attr.allocated + task.req
        for limit, what, mask in ((attr.capability, "its capability", self.limits),
                                  (attr.deserved, "its deserved share", self.mask)):
            over = over_limit(future, limit, total, [c for c in task.cols if mask[c]])
            if over:
                return (f"queue {queue.name} would exceed {what}: {describe(self.index, future, over)} "
                        f"of {describe(self.index, limit, over)}")
        return None

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        return self.allocatable(queue, task) is None

    def reclaimable(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Victims from queues above their deserved share, as long as they stay above it before each."""
        allocations: dict[str, np.ndarray] = {}
        victims = []
        cols = np.flatnonzero(self.mask)
        for task in candidates:
            attr = self.attrs.get(task.job.queue)
            if attr is None:
                continue
            allocated = allocations.setdefault(attr.name, attr.allocated.copy())
            if (allocated[cols] <= attr.deserved[cols] + EPS).all():
                continue
            allocated -= task.req
            victims.append(task)
        return victims

    def job_enqueueable(self, job: JobInfo) -> Vote:
        attr = self.attrs.get(job.queue)
        if attr is None or job.min_resources is None:
            return ABSTAIN
        future = attr.allocated + attr.inqueue + job.min_resources
        cols = [c for c in np.flatnonzero(self.limits) if job.min_resources[c] > 0]
        over = [c for c in cols if future[c] > attr.capability[c] + EPS]
        if over:
            return reject(f"queue {job.queue} capability exceeded: minResources {describe(self.index, job.min_resources, over)}"
                          f" on top of {describe(self.index, attr.allocated + attr.inqueue, over)} in use or admitted,"
                          f" capability {describe(self.index, attr.capability, over)}")
        return PERMIT

    def job_enqueued(self, job: JobInfo) -> None:
        attr = self.attrs.get(job.queue)
        if attr is not None and job.min_resources is not None:
            attr.inqueue += job.min_resources

    def on_allocate(self, task: TaskInfo) -> None:
        self._change(task, +1)

    def on_deallocate(self, task: TaskInfo) -> None:
        self._change(task, -1)

    def _change(self, task: TaskInfo, sign: int) -> None:
        attr = self.attrs.get(task.job.queue)
        if attr is None or task.nominated >= 0:  # a nominated task was counted at open
            return
        attr.allocated += sign * task.req
        attr.share = self._share[attr.name](attr.allocated)  # share(attr.allocated, attr.deserved, self.mask)
