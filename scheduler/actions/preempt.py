"""preempt: inside a queue, evict lower-priority work for a starving job.

Victims come from the same queue, running and not marked
``volcano.sh/preemptable: "false"``, and must be acceptable to the first tier
of plugins with victims to offer (priority: lower job priority; gang: the
victim's job stays at or above minMember; conformance: never kube-system
critical pods).  The preemptor's tasks are pipelined onto the freed nodes in
one statement, committed only if the whole job would then run — so a gang
that cannot be completed evicts nobody.  As in Volcano, the job stops
preempting as soon as it no longer starves, a task that finds no room is
passed over for the job's next one, and a pod with ``preemptionPolicy:
Never`` evicts nobody.

With ``enableTopologyAwarePreemption`` the node for each task is chosen
among candidate nodes by the least disruption its victims cause (Volcano's
topology-aware preemption) instead of by node score.
"""

from __future__ import annotations

from functools import partial

from scheduler.actions.shared.jobs import PREDICATE_ERROR_CACHE, schedulable_jobs
from scheduler.actions.shared.victims import CandidateLimits, RoomSearch, VictimIndex, in_queues, may_preempt
from scheduler.framework.args import Arg
from scheduler.framework.plugin import Action
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement


class Preempt(Action):
    name = "preempt"
    # Volcano's keys (pkg/scheduler/actions/preempt/preempt.go), with its defaults.
    arguments = {
        "predicate_error_cache": PREDICATE_ERROR_CACHE,
        "topology_aware": Arg("enableTopologyAwarePreemption", "bool", False,
                              "dry-run victims on candidate nodes and evict on the least disrupted one"),
        "workers": Arg("topologyAwarePreemptWorkerNum", "int", 16, "threads checking candidate nodes", minimum=1,
                       ignored="Scoria checks candidate nodes in the scheduling thread"),
        "min_percentage": Arg("minCandidateNodesPercentage", "int", 10, minimum=0, maximum=100,
                              help="candidate nodes to dry-run, as a share of those that could fit the task"),
        "min_absolute": Arg("minCandidateNodesAbsolute", "int", 1, minimum=0,
                            help="at least this many candidate nodes"),
        "max_absolute": Arg("maxCandidateNodesAbsolute", "int", 100, minimum=1,
                            help="at most this many candidate nodes"),
    }

    def execute(self, ssn: Session) -> None:
        by_queue = schedulable_jobs(ssn, best_effort=None)
        if not by_queue:
            return
        args = self.args
        topology = (CandidateLimits(args.min_percentage, args.min_absolute, args.max_absolute)
                    if args.topology_aware else None)
        index = VictimIndex(ssn, lambda t: t.job.queue, "preemptable")
        for name in sorted(by_queue, key=lambda n: ssn.queue_key(ssn.queues[n])):
            search = RoomSearch(ssn, "preemptable", freeable=partial(index.freeable, [name]),
                                candidate=in_queues({name}),
                                admit=lambda t: ssn.allocatable(ssn.queues[t.job.queue], t), topology=topology)
            for job in sorted(by_queue[name], key=ssn.job_key):
                if not ssn.job_starving(job):
                    continue
                stmt = Statement(ssn)
                tasks = sorted(job.pending_tasks(), key=ssn.task_key)
                for i, task in enumerate(tasks):
                    if not ssn.job_starving(job):
                        break  # Volcano re-checks after each task: a job that no longer starves takes no more
                    if not may_preempt(task):
                        continue
                    # its own job's running tasks are candidates too: the victim plugins judge them by task priority
                    # (the last task fitting without evictions into a statement without any is discarded below:
                    # it is not placed at all)
                    search.make_room(stmt, task, f"preempted by {task.pod.key} (priority {job.priority})",
                                     settle=i < len(tasks) - 1 or bool(stmt.evictions))
                if stmt.evictions and ssn.job_pipelined(job):
                    stmt.commit()
                    job.fit_error = None
                else:
                    stmt.discard()
