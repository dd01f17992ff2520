"""allocate: place pending tasks on nodes, queue by queue, job by job, gangs all-or-nothing.

Queues take turns in queue order (the least-served first); an overused queue
drops out.  A job's tasks go into one statement: if the job becomes ready
(gang: minMember placed) the statement commits; if not, it is discarded and
the job records how many of its members fitted.  Once a job is ready it
yields after each further task so that other queues get their turn — which
is what makes weighted queues converge to their shares.

As in Volcano (``allocate.go`` ``allocateResourcesForTasks``), a task its
queue refuses is skipped and the next one tried; a task that finds no node
is skipped too while the job could still become ready without it
(:func:`~scheduler.actions.shared.jobs.could_become_ready`), and ends the
job's turn otherwise.  Tasks skipped are not tried again in this action; a
task whose role already failed in its job is skipped without a search.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from scheduler.actions.shared.jobs import (
    PREDICATE_ERROR_CACHE,
    could_become_ready,
    finish_job,
    node_shortage,
    place_task,
    placement_shape,
    schedulable_jobs,
    task_role,
)
from scheduler.framework.plugin import Action
from scheduler.framework.session import Session
from scheduler.framework.snapshot import JobInfo, QueueInfo, TaskInfo, TaskStatus
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


@dataclass
class Worksheet:
    """A job's tasks still to try in this action, in task order, and the roles that found no node."""

    tasks: deque[TaskInfo]
    failed_roles: dict[str, str] = field(default_factory=dict)  # role -> why its task found no node


def _shortage(ssn: Session, job: JobInfo) -> str | None:
    """The node shortage that would keep ``job``'s first pending task waiting whatever its queue's share."""
    pending = sorted(job.pending_tasks(), key=ssn.task_key)
    if not pending:
        return None
    why = node_shortage(ssn, pending[0])
    return None if why is None else why if len(pending) == 1 else f"{pending[0].name}: {why}"


class Allocate(Action):
    name = "allocate"
    arguments = {"predicate_error_cache": PREDICATE_ERROR_CACHE}

    def execute(self, ssn: Session) -> None:
        fulfil_nominations(ssn)
        by_queue = schedulable_jobs(ssn, best_effort=False)
        jobs = {name: PriorityQueue(ssn.compare_jobs, js) for name, js in by_queue.items()}
        queues = PriorityQueue(ssn.compare_queues, [ssn.queues[name] for name in jobs])
        sheets: dict[str, Worksheet] = {}
        while queues:
            queue = queues.pop()
            reason = ssn.overused(queue)
            if reason:
                for job in jobs[queue.name].items():
                    job.fit_error = job.fit_error or _shortage(ssn, job) or reason
                continue
            if not jobs[queue.name]:
                continue
            job = jobs[queue.name].pop()
            sheet = sheets.get(job.uid)
            if sheet is None:
                sheet = sheets[job.uid] = Worksheet(deque(sorted(job.pending_tasks(), key=ssn.task_key)))
            if self.allocate_job(ssn, queue, job, sheet):
                jobs[queue.name].push(job)  # ready with tasks left: let other jobs and queues have a turn
            queues.push(queue)

    def allocate_job(self, ssn: Session, queue: QueueInfo, job: JobInfo, sheet: Worksheet) -> bool:
        """One turn of ``job``: place tasks until it is ready; True when it committed with tasks left to try."""
        stmt = Statement(ssn)
        no_room: dict[tuple, str] = {}  # shapes that found no node this turn (placing only takes room)
        tasks = sheet.tasks
        while tasks:
            task = tasks.popleft()
            if task.status != TaskStatus.PENDING:
                continue
            reason = ssn.allocatable(queue, task)
            if reason:
                task.fit_error = node_shortage(ssn, task) or reason  # a node shortage is the real cause
                continue  # Volcano: the queue refuses this task; its others may still fit the queue
            role = task_role(task)
            if role and role in sheet.failed_roles:
                task.fit_error = sheet.failed_roles[role]
                continue
            shape = placement_shape(task)
            known = no_room.get(shape)
            if known is not None:
                task.fit_error = known
            elif place_task(ssn, stmt, task):
                if ssn.job_ready(job):
                    break
                continue
            else:
                no_room[shape] = task.fit_error or ""
            sheet.failed_roles[role] = task.fit_error or ""
            if not could_become_ready(job, sheet.failed_roles):
                break
        ready = ssn.job_ready(job)
        finish_job(ssn, stmt, job)
        return ready and bool(tasks)
