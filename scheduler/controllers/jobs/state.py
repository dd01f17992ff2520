"""A Job's lifecycle as tables (Volcano's pkg/controllers/job/state).

:data:`STEPS` says, for each phase and action, what the controller does — sync the pods to the spec,
kill the whole job (keeping pods in the retained phases), or kill one task, pod or partition — and
which status update follows.  :data:`TRANSITIONS` lists the phase changes the updates may make; any
other is refused (logged, the phase kept).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from scheduler.controllers.jobs import keys
from scheduler.controllers.jobs.jobstatus import JobStatus
from scheduler.controllers.jobs.spec import JobSpec

RETAIN_NONE: frozenset[str] = frozenset()
RETAIN_SOFT = frozenset({"Succeeded", "Failed"})  # finished pods stay (PodRetainPhaseSoft)

SYNC, KILL_JOB, KILL_TARGET = "sync", "kill-job", "kill-target"

# status.update(spec) -> whether it changed the phase (Volcano's UpdateStatusFn)
Update = Callable[[JobStatus, JobSpec], bool]


@dataclass(frozen=True)
class Step:
    op: str  # SYNC, KILL_JOB or KILL_TARGET
    update: Update | None = None
    retain: frozenset[str] = RETAIN_NONE


def _restart(status: JobStatus, spec: JobSpec) -> bool:
    status.phase = keys.RESTARTING
    status.retry_count += 1
    return True


def _to(phase: str) -> Update:
    def update(status: JobStatus, spec: JobSpec) -> bool:
        status.phase = phase
        return True
    update.__name__ = f"to_{phase}"
    return update


def _once_gone(phase: str) -> Update:
    """Into ``phase`` once no pod is pending, running or terminating (aborting, completing, terminating)."""
    def update(status: JobStatus, spec: JobSpec) -> bool:
        if status.terminating or status.pending or status.running:
            return False
        status.phase = phase
        return True
    update.__name__ = f"once_gone_{phase}"
    return update


def _pending_sync(status: JobStatus, spec: JobSpec) -> bool:
    """Running once minAvailable pods run or have finished."""
    if spec.min_available <= status.running + status.succeeded + status.failed:
        status.phase = keys.RUNNING
        return True
    return False


def _running_sync(status: JobStatus, spec: JobSpec) -> bool:
    """Completed or Failed when every pod finished (minSuccess, task minimums); Pending again when too many
    pods wait for a node (more than the replicas beyond minAvailable)."""
    replicas = spec.total_replicas
    if replicas == 0:
        return False  # scaled down to nothing: the phase stays
    if spec.min_success is not None and status.succeeded >= spec.min_success:
        status.phase = keys.COMPLETED
        return True
    if status.succeeded + status.failed == replicas:
        if spec.min_available >= sum(t.min_available for t in spec.tasks):
            for task in spec.tasks:
                counts = status.task_status_count.get(task.name)
                if counts is not None and counts.get("Succeeded", 0) < task.min_available:
                    status.phase = keys.FAILED
                    return True
        if spec.min_success is not None and status.succeeded < spec.min_success:
            status.phase = keys.FAILED
        elif status.succeeded >= spec.min_available:
            status.phase = keys.COMPLETED
        else:
            status.phase = keys.FAILED
        return True
    if status.pending > replicas - spec.min_available:
        status.phase = keys.PENDING
        return True
    return False


def _restarting(status: JobStatus, spec: JobSpec) -> bool:
    """Failed when the retries are spent; Pending again once enough pods are gone to start over."""
    if status.retry_count >= spec.max_retry:
        status.phase = keys.FAILED
        return True
    if spec.total_replicas - status.terminating >= status.min_available:
        status.phase = keys.PENDING
        return True
    return False


_RESTART_TARGET = (keys.RESTART_TASK, keys.RESTART_POD, keys.RESTART_PARTITION)
_ACTIVE = {  # Pending and Running take the same actions; they differ in how a sync moves them on
    keys.RESTART_JOB: Step(KILL_JOB, _restart, RETAIN_NONE),
    **{a: Step(KILL_TARGET, _restart) for a in _RESTART_TARGET},
    keys.ABORT_JOB: Step(KILL_JOB, _to(keys.ABORTING), RETAIN_SOFT),
    keys.COMPLETE_JOB: Step(KILL_JOB, _to(keys.COMPLETING), RETAIN_SOFT),
    keys.TERMINATE_JOB: Step(KILL_JOB, _to(keys.TERMINATING), RETAIN_SOFT),
}
_FINISHED = {"*": Step(KILL_JOB, None, RETAIN_SOFT)}
_RESUME = Step(KILL_JOB, _restart, RETAIN_SOFT)

#: phase -> action ("*": any other) -> what to do
STEPS: dict[str, dict[str, Step]] = {
    keys.PENDING: {**_ACTIVE, "*": Step(SYNC, _pending_sync)},
    keys.RUNNING: {**_ACTIVE, "*": Step(SYNC, _running_sync)},
    keys.RESTARTING: {keys.SYNC_JOB: Step(SYNC, _restarting), **{a: Step(KILL_TARGET, _restarting)
                                                                 for a in _RESTART_TARGET},
                      "*": Step(KILL_JOB, _restarting, RETAIN_NONE)},
    keys.ABORTING: {keys.RESUME_JOB: _RESUME, "*": Step(KILL_JOB, _once_gone(keys.ABORTED), RETAIN_SOFT)},
    keys.ABORTED: {keys.RESUME_JOB: _RESUME, "*": Step(KILL_JOB, None, RETAIN_SOFT)},
    keys.COMPLETING: {"*": Step(KILL_JOB, _once_gone(keys.COMPLETED), RETAIN_SOFT)},
    keys.TERMINATING: {"*": Step(KILL_JOB, _once_gone(keys.TERMINATED), RETAIN_SOFT)},
    keys.COMPLETED: _FINISHED, keys.FAILED: _FINISHED, keys.TERMINATED: _FINISHED,
}

#: the phase changes the updates above can make (and the initial "" -> Pending)
TRANSITIONS: dict[str, frozenset[str]] = {
    "": frozenset({keys.PENDING}),
    keys.PENDING: frozenset({keys.RUNNING, keys.RESTARTING, keys.ABORTING, keys.COMPLETING, keys.TERMINATING}),
    keys.RUNNING: frozenset({keys.PENDING, keys.RESTARTING, keys.ABORTING, keys.COMPLETING, keys.TERMINATING,
                             keys.COMPLETED, keys.FAILED}),
    keys.RESTARTING: frozenset({keys.PENDING, keys.FAILED}),
    keys.ABORTING: frozenset({keys.ABORTED, keys.RESTARTING}),
    keys.ABORTED: frozenset({keys.RESTARTING}),
    keys.COMPLETING: frozenset({keys.COMPLETED}),
    keys.TERMINATING: frozenset({keys.TERMINATED}),
    keys.COMPLETED: frozenset(), keys.FAILED: frozenset(), keys.TERMINATED: frozenset(),
}


def step(phase: str, action: str) -> Step:
    """What ``action`` does to a job in ``phase`` (an unknown phase is treated as Pending, as Volcano's NewState)."""
    table = STEPS.get(phase) or STEPS[keys.PENDING]
    return table.get(action) or table["*"]


def allowed(old: str, new: str) -> bool:
    return old == new or new in TRANSITIONS.get(old, TRANSITIONS[keys.PENDING])
