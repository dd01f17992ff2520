"""allocate: place pending tasks on nodes, queue by queue, job by job, gangs all-or-nothing.

Queues take turns in queue order (the least-served first); an overused queue
drops out.  A job's tasks go into one statement: if the job becomes ready
(gang: minMember placed) the statement commits; if not, it is discarded and
the job records how many of its members fitted.  Once a job is ready it
yields after each further task so that other queues get their turn — which
is what makes weighted queues converge to their shares.
"""

from __future__ import annotations

from scheduler.actions.shared.jobs import finish_job, place_task, schedulable_jobs
from scheduler.framework.plugin import Action
from scheduler.framework.session import Session
from scheduler.framework.snapshot import JobInfo, QueueInfo
from scheduler.framework.statement import Statement
from scheduler.framework.util import PriorityQueue


def fulfil_nominations(ssn: Session) -> None:
    """First place tasks on the nodes that last cycle's evictions freed for them.

    Their queue already counts them (the room was made under its limits), so
    queue checks are not asked again; a gang still commits only if whole.
    """
    if not ssn.nodes.reserved_count:  # it counts exactly the pending tasks holding a nominated node
        return
    nominated = []
    for job in ssn.jobs.values():
        if job.reserved.any():
            tasks = [t for t in job.pending_tasks() if t.nominated >= 0]
            if tasks:
                nominated.append((job, tasks))
    for job, tasks in sorted(nominated, key=lambda jt: ssn.job_key(jt[0])):
        stmt = Statement(ssn)
        for task in sorted(tasks, key=ssn.task_key):
            node = task.nominated
            if ssn.feasible(task, ssn.nodes.free(task))[node]:
                stmt.allocate(task, node)
        if len(stmt) and ssn.job_ready(job):
            stmt.commit()
        else:
            stmt.discard()


class Allocate(Action):
    name = "allocate"

    def execute(self, ssn: Session) -> None:
        fulfil_nominations(ssn)
        by_queue = schedulable_jobs(ssn, best_effort=False)
        jobs = {name: PriorityQueue(ssn.compare_jobs, js) for name, js in by_queue.items()}
        queues = PriorityQueue(ssn.compare_queues, [ssn.queues[name] for name in jobs])
        while queues:
            queue = queues.pop()
            reason = ssn.overused(queue)
            if reason:
                for job in jobs[queue.name].items():
                    job.fit_error = job.fit_error or reason
                continue
            if not jobs[queue.name]:
                continue
            self.allocate_job(ssn, queue, jobs[queue.name].pop(), jobs[queue.name])
            queues.push(queue)

    def allocate_job(self, ssn: Session, queue: QueueInfo, job: JobInfo, rest: PriorityQueue) -> None:
        stmt = Statement(ssn)
        tasks = sorted(job.pending_tasks(), key=ssn.task_key)
        for i, task in enumerate(tasks):
            reason = ssn.allocatable(queue, task)
            if reason:
                task.fit_error = reason
                break
            if not place_task(ssn, stmt, task):
                break
            if i + 1 < len(tasks) and ssn.job_ready(job):
                rest.push(job)  # ready: let other jobs and queues have a turn
                break
        finish_job(ssn, stmt, job)
