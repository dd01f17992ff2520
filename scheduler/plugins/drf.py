"""drf: dominant resource fairness between jobs.

A job's share is its largest fraction of any cluster resource.  Jobs with
the smaller share go first; with ``enablePreemptable`` a task may preempt
another job's task when, afterwards, the preemptor's share would still not
exceed the victim's.  Shares are of real resources: batch resources, what
online work leaves idle for offline pods, are left out (``queueshare.share_mask``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from proto.errors import InputError
from scheduler.framework.plugin import Plugin
from scheduler.framework.resources import dominant_share
from scheduler.framework.snapshot import JobInfo, TaskInfo
from scheduler.plugins.shared.queueshare import share_mask

if TYPE_CHECKING:
    from scheduler.framework.session import Session

_DELTA = 1e-6


class DRF(Plugin):
    name = "drf"
    hooks = ("job_order", "preemptable", "victim_key", "on_allocate", "on_deallocate")

    @classmethod
    def check_flags(cls, flags: dict[str, bool]) -> None:
        if flags.get("enableHierarchy"):
            raise InputError("enableHierarchy is not supported by drf; use the capacity plugin with "
                             "Queue spec.parent for hierarchical queues")
        if flags.get("enableNamespaceOrder"):
            raise InputError("enableNamespaceOrder is not supported by drf")

    def open(self, ssn: Session) -> None:
        self.total = ssn.total
        self.mask = share_mask(ssn.index)
        self.allocated = {uid: job.allocated.copy() for uid, job in ssn.jobs.items()}
        self.shares = {uid: dominant_share(a, self.total, self.mask) for uid, a in self.allocated.items()}

    def job_order(self, a: JobInfo, b: JobInfo) -> int:
        sa, sb = self.shares[a.uid], self.shares[b.uid]
        return (sa > sb) - (sa < sb)

    def preemptable(self, preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        mine = dominant_share(self.allocated[preemptor.job.uid] + preemptor.req, self.total, self.mask)
        left: dict[str, object] = {}
        victims = []
        for task in candidates:
            alloc = left.setdefault(task.job.uid, self.allocated[task.job.uid].copy())
            alloc -= task.req
            theirs = dominant_share(alloc, self.total, self.mask)
            if mine < theirs or abs(mine - theirs) <= _DELTA:
                victims.append(task)
        return victims

    def victim_key(self, preemptor: TaskInfo) -> str:
        return preemptor.job.uid  # its answer depends on the preemptor job's share

    def on_allocate(self, task: TaskInfo) -> None:
        self._change(task, +1)

    def on_deallocate(self, task: TaskInfo) -> None:
        self._change(task, -1)

    def _change(self, task: TaskInfo, sign: int) -> None:
        uid = task.job.uid
        self.allocated[uid] += sign * task.req
        self.shares[uid] = dominant_share(self.allocated[uid], self.total, self.mask)
