"""From an event to an action: a Job's lifecycle policies (Volcano's applyPolicies) and delayed actions.

A request carries an event (``PodFailed``…), the pod and task it concerns, an exit code, the job version
the pod was made for, and, for a Command, the action itself.  The task's policies are tried before the
job's; an event policy matches the event or ``*``; a ``PodPending`` policy matches only with a timeout
(a pod is pending for a while before anything should happen); an exit-code policy matches the pod's
exit code.  A request about a pod made for an older version of the job, an internal event, or no
match, is a plain sync.  A matched policy's timeout delays the action; a later event about the same
pod may cancel it (:func:`cancels`).
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.controllers.jobs import keys
from scheduler.controllers.jobs.spec import Job, Policy


@dataclass(frozen=True)
class Request:
    event: str = ""
    action: str = ""  # set by a Command
    task: str = ""
    pod: str = ""
    pod_uid: str = ""
    partition: str = ""
    exit_code: int = 0
    version: int | None = None  # the job version the pod was made for (None: not a pod's request)
    job_uid: str = ""

    @property
    def about_pod(self) -> bool:
        return self.event in (keys.POD_PENDING, keys.POD_RUNNING, keys.POD_FAILED, keys.POD_EVICTED)


@dataclass(frozen=True)
class Decision:
    """The action a request leads to, and after how many seconds (0: now)."""

    action: str = keys.SYNC_JOB
    delay: float = 0.0


def _match(policies: tuple[Policy, ...], request: Request) -> Decision | None:
    for policy in policies:
        hit = bool(policy.events) and bool(request.event) and (request.event in policy.events
                                                               or keys.ANY_EVENT in policy.events)
        # a pending pod triggers only a policy that waits (Volcano's shouldConfigureTimeout)
        if hit and (request.event != keys.POD_PENDING or policy.timeout is not None):
            return Decision(policy.action, policy.timeout or 0.0)
        if policy.exit_code is not None and policy.exit_code == request.exit_code:
            return Decision(policy.action, policy.timeout or 0.0)
    return None


def apply_policies(job: Job, request: Request, version: int) -> Decision:
    """The action for ``request`` on ``job`` whose status version is ``version``."""
    if request.action:
        return Decision(request.action)
    if request.event in keys.INTERNAL_EVENTS:
        return Decision()
    if request.job_uid and job.uid and request.job_uid != job.uid:
        return Decision()  # about an earlier Job of the same name
    if request.version is not None and request.version < version:
        return Decision()  # about a pod of an earlier run of the job
    if request.task:
        task = job.spec.task(request.task)
        if task is not None and (found := _match(task.policies, request)):
            return found
    return _match(job.spec.policies, request) or Decision()


# -- delayed actions ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Delayed:
    """An action waiting for its policy's timeout: keyed by the pod whose event started it."""

    action: str
    event: str
    due: float  # Unix seconds
    task: str = ""
    pod: str = ""
    pod_uid: str = ""
    partition: str = ""

    @property
    def level(self) -> str:
        if self.action == keys.RESTART_TASK:
            return "task"
        if self.action == keys.RESTART_POD:
            return "pod"
        if self.action == keys.RESTART_PARTITION:
            return "partition"
        return "job"


def cancels(request: Request, waiting: Delayed) -> bool:
    """Whether ``request`` cancels the delayed action ``waiting`` of the same pod (CleanPodDelayActionsIfNeed):
    a pending pod's wait ends with any other event of that pod; a failed or evicted pod's when it runs again."""
    if not request.about_pod or request.event == keys.POD_PENDING:
        return False
    if waiting.event == keys.POD_PENDING:
        return request.pod_uid == waiting.pod_uid
    return waiting.event in (keys.POD_FAILED, keys.POD_EVICTED) and request.event == keys.POD_RUNNING


def superseded(done: Delayed, waiting: Delayed) -> bool:
    """Whether executing ``done`` makes ``waiting`` pointless (cleanupDelayActions): the same level of action,
    for the same task, pod or partition where the level is one."""
    if done.level != waiting.level:
        return False
    return (done.level == "job" or (done.level == "task" and done.task == waiting.task)
            or (done.level == "pod" and done.pod == waiting.pod)
            or (done.level == "partition" and done.partition == waiting.partition))
