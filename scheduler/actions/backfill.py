"""backfill: place best-effort pods (no resource requests) wherever predicates allow.

They need only a pod slot on a node, so they fill in after allocate has
handed out the resources; a best-effort gang is still placed all-or-nothing.
"""

from __future__ import annotations

from scheduler.actions.shared.jobs import finish_job, place_task, schedulable_jobs
from scheduler.framework.plugin import Action
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement


class Backfill(Action):
    name = "backfill"

    def execute(self, ssn: Session) -> None:
        jobs = [job for js in schedulable_jobs(ssn, best_effort=True).values() for job in js]
        for job in sorted(jobs, key=ssn.job_key):
            stmt = Statement(ssn)
            for task in sorted(job.pending_tasks(), key=ssn.task_key):
                if not place_task(ssn, stmt, task):
                    break
            finish_job(ssn, stmt, job)
