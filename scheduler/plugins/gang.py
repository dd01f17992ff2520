"""gang: a job runs only when at least minMember of its tasks can run together.

With ``minTaskMember`` (per task role, ``volcano.sh/task-spec``) each role must also have that many
placed, as long as minMember covers the roles' sum (Volcano's rule; otherwise only minMember counts).

A pod with ``spec.schedulingGates`` is never placed, so a gang that needs it waits whole: while its
gated members are among those minMember (or a role's minTaskMember) needs, the job is not valid and
none of its members are tried (Volcano keeps such a job valid, skips its gated tasks and discards the
partial placement because the job is not ready; the outcome is the same, and the reason names the gates).

Also: never evict a running job below its minMember, schedule jobs that are
not yet whole before those that are, and explain on the PodGroup (condition
``Unschedulable``) and on each pending pod how many members fitted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.api.objects import Condition
from scheduler.framework.plugin import PERMIT, Plugin, Vote, reject
from scheduler.framework.snapshot import JobInfo, TaskInfo, TaskStatus
from scheduler.framework.status import gates_reason

if TYPE_CHECKING:
    from scheduler.framework.session import Session

# What counts towards a task role's minTaskMember, as Volcano counts it (job_info.go CheckTask*).
_READY = (TaskStatus.ALLOCATED, TaskStatus.RUNNING, TaskStatus.SUCCEEDED)
_PIPELINED = _READY + (TaskStatus.PIPELINED,)
_VALID = _PIPELINED + (TaskStatus.PENDING,)

NOT_ENOUGH_RESOURCES = "NotEnoughResources"
NOT_ENOUGH_TASKS = "NotEnoughTasks"


class Gang(Plugin):
    name = "gang"
    hooks = ("job_valid", "job_order", "job_ready", "job_pipelined", "job_starving", "preemptable", "reclaimable",
             "evictable")

    def open(self, ssn: Session) -> None:
        # per job: its pending pods held by scheduling gates (gates do not change within a session)
        self._gated: dict[str, list[TaskInfo]] = {}

    def job_valid(self, job: JobInfo) -> str | None:
        short = job.role_counts is not None and job.role_shortfall(_VALID)
        if short:
            role, have, need = short
            return (f"pod group {job.uid} has {have} pod(s) of task {role!r}, fewer than its minTaskMember {need}; "
                    "waiting for more pods")
        if job.valid_num < job.min_member:
            return (f"pod group {job.uid} has {job.valid_num} pod(s), fewer than its minMember "
                    f"{job.min_member}; waiting for more pods")
        return self._gated_reason(job)

    def _gated_reason(self, job: JobInfo) -> str | None:
        """Why the job cannot become ready while its gated pods wait, or None when it can without them."""
        gated = self._gated.get(job.uid)
        if gated is None:
            gated = self._gated[job.uid] = [t for t in job.tasks.values()
                                            if t.status == TaskStatus.PENDING and t.pod.scheduling_gates]
        if not gated:
            return None
        short = None
        if job.valid_num - len(gated) < job.min_member:
            short = f"minMember {job.min_member}"
        elif job.role_counts is not None:
            for role in sorted(job.task_min):
                by_status = job.role_counts.get(role)
                have = sum(by_status[s] for s in _VALID) if by_status else 0
                if have - sum(1 for t in gated if t.role == role) < job.task_min[role]:
                    short = f"task {role!r}'s minTaskMember {job.task_min[role]}"
                    break
        if short is None:
            return None
        first = gated[0].pod
        return (f"pod group {job.uid} needs its {len(gated)} gated pod(s) for its {short}; {first.key} is "
                + gates_reason(first.scheduling_gates))

    def job_order(self, a: JobInfo, b: JobInfo) -> int:
        ra, rb = self.job_ready(a), self.job_ready(b)
        return 0 if ra == rb else (1 if ra else -1)

    def job_ready(self, job: JobInfo) -> bool:
        return job.ready_num >= job.min_member and (job.role_counts is None or job.role_shortfall(_READY) is None)

    def job_pipelined(self, job: JobInfo) -> Vote:
        if job.ready_num + job.waiting_num < job.min_member:
            return reject(f"{job.ready_num + job.waiting_num} of minMember {job.min_member} placed")
        short = job.role_counts is not None and job.role_shortfall(_PIPELINED)
        if short:
            return reject(f"{short[1]} of task {short[0]!r}'s minTaskMember {short[2]} placed")
        return PERMIT

    def job_starving(self, job: JobInfo) -> bool:
        return job.ready_num + job.waiting_num < job.min_member

    def preemptable(self, preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Victims that leave every gang (minMember > 1) at or above its minMember.

        Volcano's gang preemptableFn: a candidate may go while its job's ready
        tasks, less the victims already chosen before it, exceed minMember.  A
        job with minMember 1 (a plain pod, or an elastic job with no gang) has
        no gang to break, so any of its tasks may go — unlike Volcano, where the
        same rule makes plain pods impossible to preempt or reclaim unless gang's
        victim hooks are turned off (volcano-sh/volcano#3332, #2629).  Gang has
        an ``evictable`` hook, so the session applies this rule to whichever
        tier decides victims.
        """
        occupied: dict[str, int] = {}
        victims = []
        for task in candidates:
            job = task.job
            left = occupied.setdefault(job.uid, job.ready_num)
            if job.min_member <= 1 or left > job.min_member:
                occupied[job.uid] = left - 1
                victims.append(task)
        return victims

    reclaimable = preemptable

    def evictable(self, task: TaskInfo) -> bool:
        job = task.job
        return job.min_member <= 1 or job.ready_num > job.min_member

    def close(self, ssn: Session) -> None:
        for job in ssn.jobs.values():
            if job.group is None:
                continue
            job.conditions = [self._condition(job)]
            if job.fit_count is not None and job.min_member > 1:
                job.fit_error = self._gang_message(job)

    def _condition(self, job: JobInfo) -> Condition:
        ready = job.ready_num
        if ready >= job.min_member and job.min_member > 0 or job.phase == "Completed":
            return Condition("Scheduled", "True", "Scheduled",
                             f"{ready}/{len(job.tasks)} tasks in gang are placed (minMember {job.min_member})")
        invalid = self.job_valid(job)
        if invalid:
            return Condition("Unschedulable", "True", NOT_ENOUGH_TASKS, invalid)
        message = job.enqueue_reason or (self._gang_message(job) if job.fit_count is not None else job.fit_error)
        if not message:
            failed = next((t.fit_error for t in job.tasks.values() if t.fit_error), None)
            message = failed or "waiting to be scheduled"
        return Condition("Unschedulable", "True", NOT_ENOUGH_RESOURCES,
                         f"{job.pending_num}/{len(job.tasks)} tasks in gang unschedulable: {message}")

    @staticmethod
    def _gang_message(job: JobInfo) -> str:
        failed = next((t for t in job.tasks.values() if t.status == TaskStatus.PENDING and t.fit_error), None)
        detail = f"; {failed.pod.key}: {failed.fit_error}" if failed else ""
        short = job.role_counts is not None and job.role_shortfall(_PIPELINED)
        if short:
            role, have, need = short
            return (f"gang {job.uid}: {job.fit_count} of {job.min_member} required members fit; task {role!r} has "
                    f"{have} of its minTaskMember {need}{detail}")
        return f"gang {job.uid}: {job.fit_count} of {job.min_member} required members fit{detail}"
