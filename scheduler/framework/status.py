"""PodGroup phases as a table, and the close-of-session status writer.

Phases follow Volcano: Pending -> Inqueue (admitted; operators such as
Kubeflow's wait for this before creating pods) -> Running (at least
minMember tasks placed), Unknown (some running but the gang is no longer
whole), Completed (every task succeeded).  A transition the table does not
allow is refused and logged; the old phase stays.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from scheduler.api.objects import Condition
from scheduler.framework.snapshot import JobInfo, TaskInfo, TaskStatus

if TYPE_CHECKING:
    from scheduler.framework.session import Session

log = logging.getLogger(__name__)

PENDING, INQUEUE, RUNNING, UNKNOWN, COMPLETED = "Pending", "Inqueue", "Running", "Unknown", "Completed"
TRANSITIONS: dict[str, frozenset[str]] = {
    # Unknown from Pending/Inqueue: a group first seen with members already running, but not enough.
    PENDING: frozenset({PENDING, INQUEUE, RUNNING, UNKNOWN, COMPLETED}),
    INQUEUE: frozenset({INQUEUE, PENDING, RUNNING, UNKNOWN, COMPLETED}),
    RUNNING: frozenset({RUNNING, UNKNOWN, PENDING, COMPLETED}),
    UNKNOWN: frozenset({UNKNOWN, RUNNING, PENDING, COMPLETED}),
    COMPLETED: frozenset({COMPLETED}),
}


class InvalidTransition(ValueError):
    pass


def check_transition(old: str, new: str) -> str:
    if new not in TRANSITIONS.get(old, ()):
        raise InvalidTransition(f"PodGroup phase {old} -> {new} is not allowed")
    return new


def next_phase(job: JobInfo, ready: bool) -> str:
    """The phase a job's group should have at the end of a session (Volcano's session.go getPodGroupPhase).

    Unknown: some members run but the gang is not whole (a running gang that lost members, or one
    still waiting for some) — except while the missing ones are only terminating on their nodes.
    Running: minMember placed; Completed: every placed member has finished.
    """
    c = job.counts
    placed = c[TaskStatus.ALLOCATED] + c[TaskStatus.RUNNING] + c[TaskStatus.SUCCEEDED] + c[TaskStatus.FAILED]
    if c[TaskStatus.RUNNING] and not ready and not _only_terminating(job, placed):
        return UNKNOWN
    placed += c[TaskStatus.RELEASING]  # terminating members still hold their place
    if placed >= job.min_member and (placed or job.tasks):
        finished = c[TaskStatus.SUCCEEDED] + c[TaskStatus.FAILED]
        return COMPLETED if placed and finished == placed else RUNNING
    if job.phase in (INQUEUE,):
        return INQUEUE
    return PENDING


def _only_terminating(job: JobInfo, placed: int) -> bool:
    """Short of its gang only by members terminating on their nodes, with nothing left to place."""
    c = job.counts
    return bool(c[TaskStatus.RELEASING]) and not job.pending_num and not c[TaskStatus.PIPELINED] \
        and placed + c[TaskStatus.RELEASING] >= job.min_member


def write_status(ssn: Session) -> None:
    """Hand every job's phase, conditions and pending reasons, and queue allocations, to the effects."""
    for job in ssn.jobs.values():
        _write_job(ssn, job)
    for pod in ssn.snapshot.foreign:
        ssn.effects.pod_reason(pod, f"left to scheduler {pod.scheduler_name!r} (spec.schedulerName)")
    _write_queues(ssn)


def _write_job(ssn: Session, job: JobInfo) -> None:
    group = job.group
    effects, nominated, bound = ssn.effects, ssn.nominated, ssn.bound
    # the first fit error among the job's tasks, found once, when a pending task first needs it (not once
    # per pending task: jobs can be large)
    sibling: str | None = None
    looked = False
    for task in job.tasks.values():
        pod, status = task.pod, task.status
        if pod.nominated_node and status != _PIPELINED and task.uid not in nominated:
            effects.nominate(pod, None)  # placed, or its chance passed: the reservation ends
        if status == _PENDING:
            if not looked:
                sibling, looked = next((t.fit_error for t in job.tasks.values() if t.fit_error), None), True
            effects.pod_reason(pod, pending_reason(ssn, job, task, sibling))
        elif status == _PIPELINED or (status == _ALLOCATED and task.uid not in bound):
            effects.pod_reason(pod, f"reserved on {ssn.nodes.names[task.node]}: waiting for "
                                    "resources being released and for the rest of its gang")
        elif pod.reason is not None and status in (_RUNNING, _ALLOCATED) \
                and pod.phase != "Unknown":  # a pod whose node was lost keeps the reason that says so
            effects.pod_reason(pod, None)
    if group is None:
        return
    phase = next_phase(job, ssn.job_ready(job))
    try:
        check_transition(group.phase, phase)
    except InvalidTransition as exc:
        log.error("PodGroup %s: %s; keeping %s", job.uid, exc, group.phase)
        phase = group.phase
    conditions = _merge_conditions(group.conditions, job.conditions, ssn)
    if effects.group_status(group, phase, conditions):
        ssn.phase_changes += 1


_PENDING, _ALLOCATED, _PIPELINED, _RUNNING = (TaskStatus.PENDING, TaskStatus.ALLOCATED, TaskStatus.PIPELINED,
                                             TaskStatus.RUNNING)


def gates_reason(gates: Iterable[str]) -> str:
    """Why a pod with ``spec.schedulingGates`` waits, in kube-scheduler's words (its SchedulingGates plugin)."""
    return f"waiting for scheduling gates: [{' '.join(gates)}]"


def pending_reason(ssn: Session, job: JobInfo, task: TaskInfo, sibling: str | None) -> str:
    if task.pod.scheduling_gates:  # never tried, whatever its job's state: only removing the gates changes that
        return gates_reason(task.pod.scheduling_gates)
    if job.group is None:
        return f"PodGroup {job.uid} not found"
    if job.enqueue_reason:
        return job.enqueue_reason
    if job.fit_error:
        return job.fit_error
    if task.fit_error:
        return task.fit_error
    if sibling:  # the job stopped at a sibling; this task was not tried after it
        return sibling
    if task.best_effort and not ssn.has_action("backfill"):
        return "best-effort pod (no resource requests) waits for the backfill action, which is not configured"
    return "waiting for the next scheduling cycle"


def _merge_conditions(old: list[Condition], new: list[Condition], ssn: Session) -> list[Condition]:
    """One condition per type; keep the old transition time when nothing changed."""
    if len(old) == 1 and len(new) == 1:  # the usual case: one condition, often the same as last cycle's
        was, now = old[0], new[0]
        if was.type == now.type and (was.status, was.reason, was.message) == (now.status, now.reason, now.message):
            return [was]
    by_type = {c.type: c for c in old}
    out = []
    for cond in new:
        prev = by_type.get(cond.type)
        if prev and (prev.status, prev.reason, prev.message) == (cond.status, cond.reason, cond.message):
            out.append(prev)
        else:
            cond.transition = ssn.now
            out.append(cond)
    kept = {c.type for c in new}
    out.extend(c for c in old if c.type not in kept and c.type not in ("Unschedulable", "Scheduled"))
    return out


def _write_queues(ssn: Session) -> None:
    """Each queue's allocation; a parent queue carries its descendants' allocations."""
    own = {name: ssn.index.zeros() for name in ssn.queues}
    for job in ssn.jobs.values():
        if job.queue in own:
            own[job.queue] += job.allocated
    totals = {name: vec.copy() for name, vec in own.items()}
    for name, vec in own.items():
        parent, seen = ssn.queues[name].parent, {name}
        while parent and parent in totals and parent not in seen:
            totals[parent] += vec
            seen.add(parent)
            parent = ssn.queues[parent].parent
    for name, vec in totals.items():
        ssn.effects.queue_allocated(name, ssn.index.to_dict(vec))
        deserved = ssn.queue_deserved(name)
        ssn.effects.queue_deserved(name, None if deserved is None else ssn.index.to_dict(
            np.where(np.isfinite(deserved), deserved, 0)))
