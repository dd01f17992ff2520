"""enqueue: admit Pending PodGroups (phase Inqueue) when the plugins allow.

Admission does not need the group's pods: frameworks such as Kubeflow's
training operator create pods only after the group is Inqueue, so a gang with
too few pods is admitted here and waits for its pods in allocate.
"""

from __future__ import annotations

from scheduler.framework.args import Arg
from scheduler.framework.plugin import Action, VoteKind
from scheduler.framework.session import Session
from scheduler.framework.status import INQUEUE, PENDING


class Enqueue(Action):
    name = "enqueue"
    # Volcano's enqueue read this before v1.3 (docs/design/job-resource-reservation-design.md); it reads none now.
    arguments = {"overcommit_factor": Arg(
        "overcommit-factor", "float", 1.2, "how far admission may overcommit the cluster", minimum=0,
        ignored="Volcano moved it to the overcommit plugin: set the overcommit plugin's overcommit-factor")}

    def execute(self, ssn: Session) -> None:
        waiting: dict[str, list] = {}
        for job in ssn.jobs.values():
            if job.group is not None and job.phase == PENDING:
                waiting.setdefault(job.queue, []).append(job)
        queues = sorted((ssn.queues[name] for name in waiting if name in ssn.queues), key=ssn.queue_key)
        for name in waiting:
            if name not in ssn.queues:
                for job in waiting[name]:
                    job.enqueue_reason = f"queue {name!r} does not exist"
        for queue in queues:
            for job in sorted(waiting[queue.name], key=ssn.job_key):
                if queue.state != "Open":
                    job.enqueue_reason = f"queue {queue.name} is {queue.state}: it admits no new jobs"
                    continue
                if job.min_resources is not None:
                    vote = ssn.job_enqueueable(job)
                    if vote.kind == VoteKind.REJECT:
                        job.enqueue_reason = f"pod group {job.uid} is Pending: {vote.reason}"
                        continue
                job.phase = INQUEUE
                job.enqueue_reason = None
                ssn.job_enqueued(job)

