"""preempt: inside a queue, evict lower-priority work for a starving job.

Victims come from the same queue and other jobs, and must be acceptable to
every plugin with an opinion (priority: lower job priority; gang: the
victim's job stays at or above minMember; conformance: never kube-system
critical pods).  The preemptor's tasks are pipelined onto the freed nodes in
one statement, committed only if the whole job would then run — so a gang
that cannot be completed evicts nobody.
"""

from __future__ import annotations

from scheduler.actions.shared.jobs import schedulable_jobs
from scheduler.actions.shared.victims import RoomSearch, VictimIndex, in_queues
from scheduler.framework.plugin import Action
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement


class Preempt(Action):
    name = "preempt"

    def execute(self, ssn: Session) -> None:
        by_queue = schedulable_jobs(ssn, best_effort=False)
        if not by_queue:
            return
        index = VictimIndex(ssn, lambda t: t.job.queue, "preemptable")
        for name in sorted(by_queue, key=lambda n: ssn.queue_key(ssn.queues[n])):
            search = RoomSearch(ssn, "preemptable", freeable=index.freeable([name]),
                                candidate=in_queues({name}),
                                admit=lambda t: ssn.allocatable(ssn.queues[t.job.queue], t))
            for job in sorted(by_queue[name], key=ssn.job_key):
                if not ssn.job_starving(job):
                    continue
                stmt = Statement(ssn)
                for task in sorted(job.pending_tasks(), key=ssn.task_key):
                    # its own job's running tasks are candidates too: the victim plugins judge them by task priority
                    if not search.make_room(stmt, task, f"preempted by {task.pod.key} (priority {job.priority})"):
                        break
                if stmt.evictions and ssn.job_pipelined(job):
                    stmt.commit()
                    job.fit_error = None
                else:
                    stmt.discard()
