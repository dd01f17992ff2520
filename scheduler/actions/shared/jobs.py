"""Which jobs an action may work on, and placing their tasks one statement at a time: shared by
allocate, backfill, preempt and reclaim."""

from __future__ import annotations

from scheduler.framework.session import Session
from scheduler.framework.snapshot import JobInfo, TaskInfo
from scheduler.framework.statement import Statement

SCHEDULABLE_PHASES = ("Inqueue", "Running", "Unknown")


def schedulable_jobs(ssn: Session, *, best_effort: bool) -> dict[str, list[JobInfo]]:
    """Admitted, valid jobs with pending work, by queue; invalid ones get their reason."""
    by_queue: dict[str, list[JobInfo]] = {}
    # Without an enqueue action nothing admits groups, so (as in Volcano) allocate takes Pending ones too.
    phases = SCHEDULABLE_PHASES if ssn.has_action("enqueue") else SCHEDULABLE_PHASES + ("Pending",)
    for job in ssn.jobs.values():
        if job.group is None or job.phase not in phases or not job.pending_num:
            continue
        pending = job.pending_tasks()
        if all(t.best_effort for t in pending) != best_effort:
            continue  # pure best-effort jobs are backfill's; the rest are allocate's
        reason = ssn.job_valid(job)
        if reason:
            job.fit_error = reason
            continue
        if job.queue not in ssn.queues:
            job.fit_error = f"queue {job.queue!r} does not exist"
            continue
        by_queue.setdefault(job.queue, []).append(job)
    return by_queue


def place_task(ssn: Session, stmt: Statement, task: TaskInfo) -> bool:
    """Allocate on idle resources, else pipeline onto resources being released."""
    nodes = ssn.nodes
    free = nodes.free(task)
    mask = ssn.feasible(task, free)
    if mask.any():
        stmt.allocate(task, ssn.best_node(task, mask))
        return True
    if nodes.releasing_count:  # resources being released: reserve them (pipeline) for this task
        mask = ssn.feasible(task, nodes.future_idle(task), mode="future")
        if mask.any():
            stmt.pipeline(task, ssn.best_node(task, mask))
            return True
    task.fit_error = ssn.explain(task, free)
    return False


def finish_job(ssn: Session, stmt: Statement, job: JobInfo) -> None:
    """Commit a ready job; keep a pipelined one's reservations; undo the rest."""
    if ssn.job_ready(job):
        stmt.commit()
        job.fit_count = None
    elif ssn.job_pipelined(job):
        ssn.held.append(stmt)
    else:
        job.fit_count = job.ready_num + job.waiting_num
        stmt.discard()
