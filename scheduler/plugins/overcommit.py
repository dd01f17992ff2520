"""overcommit: admit jobs while the cluster, scaled by a factor, still has room for them.

A PodGroup with minResources goes Inqueue only if ``total × overcommit-factor
− allocated − already admitted`` covers its minResources, so the queue of
admitted jobs cannot grow far beyond what the cluster can run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from scheduler.framework.args import Arg
from scheduler.framework.plugin import ABSTAIN, PERMIT, Plugin, Vote, reject
from scheduler.framework.resources import EPS
from scheduler.framework.snapshot import JobInfo
from scheduler.plugins.shared.queueshare import describe

if TYPE_CHECKING:
    from scheduler.framework.session import Session


class Overcommit(Plugin):
    name = "overcommit"
    hooks = ("job_enqueueable", "job_enqueued")
    arguments = {"factor": Arg("overcommit-factor", "float", 1.2, minimum=1.0)}

    def open(self, ssn: Session) -> None:
        self.index = ssn.index
        self.mask = ssn.index.share_mask
        used = ssn.index.zeros()
        self.inqueue = ssn.index.zeros()
        for job in ssn.jobs.values():
            used += job.allocated
            if job.phase == "Inqueue" and job.min_resources is not None:
                self.inqueue += np.maximum(job.min_resources - job.allocated, 0)
        self.room = ssn.total * self.args.factor - used

    def job_enqueueable(self, job: JobInfo) -> Vote:
        if job.min_resources is None:
            return ABSTAIN
        free = self.room - self.inqueue
        short = [c for c in np.flatnonzero(self.mask) if job.min_resources[c] > free[c] + EPS]
        if short:
            return reject(f"cluster is full for admission: minResources {describe(self.index, job.min_resources, short)}"
                          f" exceeds the {describe(self.index, np.maximum(free, 0), short)} left"
                          f" (overcommit-factor {self.args.factor:g})")
        return PERMIT

    def job_enqueued(self, job: JobInfo) -> None:
        if job.min_resources is not None:
            self.inqueue += job.min_resources
