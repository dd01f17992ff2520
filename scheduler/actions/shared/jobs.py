"""Which jobs an action may work on, and placing their tasks one statement at a time: shared by
allocate, backfill, preempt and reclaim."""

from __future__ import annotations

from collections.abc import Collection

from proto.vocab.placement import REVOCABLE_ZONE_LABEL
from scheduler.framework.args import Arg
from scheduler.framework.session import Session
from scheduler.framework.snapshot import JobInfo, TaskInfo, TaskStatus
from scheduler.framework.statement import Statement

SCHEDULABLE_PHASES = ("Inqueue", "Running", "Unknown")
# Volcano's allocate, backfill, preempt and reclaim read it (conf.EnablePredicateErrCacheKey).
PREDICATE_ERROR_CACHE = Arg(
    "predicateErrorCacheEnable", "bool", True, "reuse a task role's predicate failures per node",
    ignored="Scoria checks a task against every node at once and remembers a task shape that found no node "
            "within the action whatever this says; there is no per-node error cache to turn off")
def task_role(task: TaskInfo) -> str:
    """The task's role in its job (``volcano.sh/task-spec``), "" when it has none."""
    return task.pod.task_role


def min_task_members(job: JobInfo) -> dict[str, int]:
    """Per-role minimums as the PodGroup states them (``spec.minTaskMember``), zeros left out."""
    return {role: n for role, n in job.group.min_task_member.items() if n > 0} if job.group is not None else {}


def could_become_ready(job: JobInfo, failed_roles: Collection[str]) -> bool:
    """After one of ``job``'s tasks found no node, may allocation go on with its other tasks?

    Volcano's ``JobInfo.NeedContinueAllocating``: not when every member must run
    (minMember is the job's size); with per-role minimums summing to more than
    minMember, only while the tasks of roles that have not failed could still
    make minMember; otherwise unless a failed role is below its own minimum.
    ``failed_roles`` are the roles whose tasks found no node ("" for tasks with
    no role).  Per-role minimums come from :func:`min_task_members`.
    """
    if job.min_member >= len(job.tasks):
        return False
    minimums = min_task_members(job)
    if job.min_member < sum(minimums.values()):
        left = sum(1 for t in job.pending_tasks() if task_role(t) not in failed_roles)
        return job.ready_num + left >= job.min_member
    placed = _placed_by_role(job)
    return all(placed.get(role, 0) >= minimums.get(role, 0) for role in failed_roles)


def _placed_by_role(job: JobInfo) -> dict[str, int]:
    """Tasks holding a place (allocated, running, succeeded, or pending with nothing to place) per role."""
    out: dict[str, int] = {}
    for task in job.tasks.values():
        status = task.status
        if status in (TaskStatus.ALLOCATED, TaskStatus.RUNNING, TaskStatus.SUCCEEDED) or (
                status == TaskStatus.PENDING and task.best_effort):
            role = task_role(task)
            out[role] = out.get(role, 0) + 1
    return out


def schedulable_jobs(ssn: Session, *, best_effort: bool | None) -> dict[str, list[JobInfo]]:
    """Admitted, valid jobs with pending work, by queue; invalid ones get their reason.

    ``best_effort``: only jobs whose pending tasks all request nothing (True: backfill's), only the
    others (False: allocate's), or both (None: preempt's — a best-effort pod blocked by a node's pod
    limit may preempt, as in Volcano)."""
    by_queue: dict[str, list[JobInfo]] = {}
    # Without an enqueue action nothing admits groups, so (as in Volcano) allocate takes Pending ones too.
    phases = SCHEDULABLE_PHASES if ssn.has_action("enqueue") else SCHEDULABLE_PHASES + ("Pending",)
    waiting = TaskStatus.PENDING
    for job in ssn.jobs.values():
        if not job.counts[waiting] or job.group is None or job.phase not in phases:  # (counts: pending_num)
            continue
        pending = job.pending_tasks()  # without gated pods: those wait for their gates (their reason says so)
        if not pending:
            continue
        if best_effort is not None and all(t.best_effort for t in pending) != best_effort:
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


def placement_shape(task: TaskInfo) -> tuple:
    """What the session and the shipped predicate plugins read of a task to find it a node: tasks of equal
    shape in one job fit the same nodes, in one session state."""
    facts, pod = task.facts, task.pod
    return (id(task.req), task.sig, pod.qos_class, task.nominated, facts.offline, facts.numa_policy,
            facts.devices, facts.duration, facts.preemptable, pod.annotations.get(REVOCABLE_ZONE_LABEL),
            task.job.uid, pod.host_ports)


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


def node_shortage(ssn: Session, task: TaskInfo) -> str | None:
    """Why no node could hold ``task`` even empty (its requests, its node selection), or None when one could.

    A queue's limits are not the reason a pod waits when no node could ever take it: an 8-CPU pod on
    4-CPU nodes, a cluster with no node (or none Ready) are node shortages whatever the queue's share, and
    saying so names what to change."""
    full = ssn.nodes.alloc
    if ssn.feasible(task, full).any():
        return None
    return ssn.explain(task, full)


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
