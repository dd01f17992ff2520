"""reclaim: a queue below its share takes resources back from queues above theirs.

Only queues marked reclaimable give anything back, only from their running
tasks not marked ``volcano.sh/preemptable: "false"``, and only as far as the
first tier of plugins with victims to offer allows (proportion/capacity: the
victim's queue is over its deserved share; gang: never below a job's
minMember; conformance: never kube-system critical pods).  An overused queue
reclaims nothing.  A job's reclaim is one statement: committed only if the
whole job would then run.  As in Volcano, the job stops reclaiming as soon as
it no longer starves, a task its queue may not reclaim for or that finds no
room is passed over for the next one, and a pod with ``preemptionPolicy:
Never`` reclaims nothing.
"""

from __future__ import annotations

from functools import partial

from scheduler.actions.shared.jobs import PREDICATE_ERROR_CACHE, schedulable_jobs
from scheduler.actions.shared.victims import RoomSearch, VictimIndex, in_queues, may_preempt
from scheduler.framework.plugin import Action
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement


class Reclaim(Action):
    name = "reclaim"
    arguments = {"predicate_error_cache": PREDICATE_ERROR_CACHE}

    def execute(self, ssn: Session) -> None:
        by_queue = schedulable_jobs(ssn, best_effort=False)
        if not by_queue:
            return
        index = VictimIndex(ssn, lambda t: t.job.queue, "reclaimable")
        for name in sorted(by_queue, key=lambda n: ssn.queue_key(ssn.queues[n])):
            queue = ssn.queues[name]
            others = [q for q, info in ssn.queues.items() if q != name and info.reclaimable]
            if not others:
                continue
            search = RoomSearch(ssn, "reclaimable", freeable=partial(index.freeable, others), candidate=in_queues(set(others)),
                                admit=partial(ssn.allocatable, queue))
            for job in sorted(by_queue[name], key=ssn.job_key):
                if ssn.overused(queue):
                    break  # Volcano asks before each of the queue's jobs
                if not ssn.job_starving(job):
                    continue
                stmt = Statement(ssn)
                tasks = sorted(job.pending_tasks(), key=ssn.task_key)
                for i, task in enumerate(tasks):
                    if not ssn.job_starving(job):
                        break  # Volcano re-checks after each task: a job that no longer starves takes no more
                    if not may_preempt(task) or not ssn.preemptive(queue, task):
                        continue
                    # (the last task fitting without evictions into a statement without any is discarded below)
                    search.make_room(stmt, task, f"reclaimed by queue {name} for {task.pod.key}",
                                     settle=i < len(tasks) - 1 or bool(stmt.evictions))
                if stmt.evictions and ssn.job_pipelined(job):
                    stmt.commit()
                    job.fit_error = None
                else:
                    stmt.discard()
