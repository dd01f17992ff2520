"""sla: jobs that have waited past their SLA go first and are admitted regardless of queue room.

The waiting time comes from the PodGroup annotation ``sla-waiting-time`` or
the plugin argument ``sla-waiting-time`` (Go durations: ``30m``, ``1h30m``).
Jobs with a deadline go before jobs without one, the earliest deadline first.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING

from proto.vocab.duration import parse_duration
from scheduler.framework.args import Arg
from scheduler.framework.plugin import ABSTAIN, PERMIT, Plugin, Vote
from scheduler.framework.snapshot import JobInfo

if TYPE_CHECKING:
    from scheduler.framework.session import Session

log = logging.getLogger(__name__)
ANNOTATION = "sla-waiting-time"


class SLA(Plugin):
    name = "sla"
    hooks = ("job_order", "job_enqueueable")
    arguments = {"waiting_time": Arg("sla-waiting-time", "duration", None, minimum=0)}

    def open(self, ssn: Session) -> None:
        self.now = ssn.now
        self.deadlines = {}
        for uid, job in ssn.jobs.items():
            wait = self._waiting_time(job)
            if wait is not None and job.created is not None:
                self.deadlines[uid] = job.created + timedelta(seconds=wait)

    def _waiting_time(self, job: JobInfo) -> float | None:
        raw = job.group.annotations.get(ANNOTATION) if job.group else None
        if raw:
            try:
                return parse_duration(raw)
            except ValueError as exc:  # bad or absurd values are the user's, not a reason to stop scheduling
                log.warning("PodGroup %s: ignoring annotation %s: %s", job.uid, ANNOTATION, exc)
        return self.args.waiting_time

    def job_order(self, a: JobInfo, b: JobInfo) -> int:
        da, db = self.deadlines.get(a.uid), self.deadlines.get(b.uid)
        if da is None or db is None:
            return 0 if da is db else (1 if da is None else -1)
        return (da > db) - (da < db)

    def job_enqueueable(self, job: JobInfo) -> Vote:
        deadline = self.deadlines.get(job.uid)
        if deadline is not None and self.now >= deadline:
            return PERMIT
        return ABSTAIN
