"""backfill: place best-effort pods (no resource requests) wherever predicates allow.

They need only a pod slot on a node, so they fill in after allocate has
handed out the resources; a best-effort gang is still placed all-or-nothing.
A task that finds no node is passed over, as in Volcano, while its job
could still become ready without it.
"""

from __future__ import annotations

from scheduler.actions.shared.jobs import (
    PREDICATE_ERROR_CACHE,
    could_become_ready,
    finish_job,
    place_task,
    schedulable_jobs,
    task_role,
)
from scheduler.framework.plugin import Action
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement


class Backfill(Action):
    name = "backfill"
    arguments = {"predicate_error_cache": PREDICATE_ERROR_CACHE}

    def execute(self, ssn: Session) -> None:
        jobs = [job for js in schedulable_jobs(ssn, best_effort=True).values() for job in js]
        for job in sorted(jobs, key=ssn.job_key):
            stmt = Statement(ssn)
            failed: dict[str, str] = {}
            for task in sorted(job.pending_tasks(), key=ssn.task_key):
                if not place_task(ssn, stmt, task):
                    failed[task_role(task)] = task.fit_error or ""
                    if not could_become_ready(job, failed):
                        break
            finish_job(ssn, stmt, job)
