"""Making room for a task by evicting others: shared by preempt and reclaim.

The two actions differ only in who may be a victim (same queue and lower
priority, or another queue over its share) — the ``candidate`` filter and
the session's ``preemptable``/``reclaimable`` answer.  Everything else is
here: which nodes could possibly work (a vectorised upper bound), trying
them best-score first, evicting the fewest victims lowest-priority first,
and pipelining the task onto the node being freed.  With topology-aware
preemption (:class:`CandidateLimits`) candidate nodes are dry-run instead and
the least disruptive one is chosen.

Whatever the plugins say, a pod that says ``volcano.sh/preemptable: "false"``
is never a victim and a pod with ``preemptionPolicy: Never`` evicts nobody:
these are the pod's own statements, and Volcano checks them in its actions
(the victim filters of ``preempt.go`` and ``reclaim.go``,
``taskEligibleToPreempt``), not in a plugin.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from dataclasses import dataclass
from datetime import datetime
from functools import cmp_to_key
from typing import Any

import numpy as np

from scheduler.framework.resources import EPS
from scheduler.framework.session import Session
from scheduler.framework.snapshot import TaskInfo, TaskStatus
from scheduler.framework.statement import Statement

Candidate = Callable[[TaskInfo], bool]
Select = Callable[[TaskInfo, list[TaskInfo]], list[TaskInfo]]
Admit = Callable[[TaskInfo], "str | None"]


def in_queues(queues: Container[str]) -> Candidate:
    """A candidate filter: running tasks of ``queues``."""
    return lambda v: v.job.queue in queues


def may_be_victim(task: TaskInfo) -> bool:
    """Running, and its pod does not say ``volcano.sh/preemptable: "false"`` (annotation or label)."""
    return task.status == TaskStatus.RUNNING and task.pod.preemptable


def may_preempt(task: TaskInfo) -> bool:
    """Whether ``task`` may have others evicted for it: not with ``preemptionPolicy: Never``."""
    return task.pod.preemption_policy != "Never"


@dataclass(frozen=True)
class CandidateLimits:
    """Topology-aware preemption: how many candidate nodes to dry-run (Volcano's calculateNumCandidates)."""

    percentage: int = 10  # of the nodes where the task could fit after evictions
    minimum: int = 1
    maximum: int = 100

    def count(self, nodes: int) -> int:
        n = max(nodes * self.percentage // 100, self.minimum)
        return min(n, self.maximum, nodes)


class VictimIndex:
    """Per-node resources of running tasks that could be victims: an upper bound of what eviction frees.

    Grouped by queue; only tasks the plugins call ``evictable`` under ``hook``
    count, so nodes full of protected work (gangs at minMember, critical pods)
    are never searched.
    """

    def __init__(self, ssn: Session, group_of: Callable[[TaskInfo], str], hook: str):
        self.ssn = ssn
        self.group_of = group_of
        self.by_group: dict[str, np.ndarray] = {}
        self.counted: set[str] = set()
        for node, tasks in enumerate(ssn.nodes.tasks):
            for task in tasks.values():
                if may_be_victim(task) and ssn.evictable(task, hook):
                    group = group_of(task)
                    arr = self.by_group.get(group)
                    if arr is None:
                        arr = self.by_group[group] = np.zeros_like(ssn.nodes.alloc)
                    arr[:, node] += task.req
                    self.counted.add(task.uid)
        # A victim evicted in this session frees its resources into the node's future idle: it must stop
        # counting here too, or every later preemptor sees that node as reachable again and re-searches it.
        ssn.eviction_listeners.append(self._moved)

    def _moved(self, task: TaskInfo, sign: int) -> None:
        if task.uid in self.counted:
            self.by_group[self.group_of(task)][:, task.node] -= sign * task.req

    def freeable(self, groups: list[str]) -> np.ndarray:
        out = np.zeros_like(self.ssn.nodes.alloc)
        for group in groups:
            arr = self.by_group.get(group)
            if arr is not None:
                out += arr
        return out


def fits(avail: np.ndarray, task: TaskInfo) -> bool:
    cols = task.cols
    return bool((avail[cols] + EPS >= task.req[cols]).all())


class RoomSearch:
    """One action's search for room: who may be evicted, why, and which task shapes already failed.

    A shape (request, constraints, queue, and what the victim plugins read of
    the preemptor: ``Session.victim_key``) that found no room, tried
    from an empty statement, finds none again until a statement commits —
    discarded statements leave the cluster as it was — so later tasks of that
    shape are refused at once instead of re-scanning every node.
    """

    def __init__(self, ssn: Session, hook: str, *, freeable: Callable[[], np.ndarray], candidate: Candidate,
                 admit: Admit | None = None, topology: CandidateLimits | None = None):
        self.ssn = ssn
        self.hook = hook  # "preemptable" or "reclaimable": the session hook that picks victims
        self.freeable = freeable  # what evicting its candidates could still free, per node, as of now
        self.candidate = candidate
        self.select: Select = getattr(ssn, hook)
        self.admit = admit
        self.topology = topology  # set: dry-run candidate nodes and take the least disruptive
        self._failed: dict[tuple, int] = {}

    def _shape(self, task: TaskInfo) -> tuple:
        facts, pod = task.facts, task.pod
        placement: tuple = (facts.numa_policy, pod.qos_class, facts.devices, pod.host_ports)
        if pod.pod_affinity is not None or pod.spread_constraints or self.ssn.snapshot.pod_affinity:
            # inter-pod terms and spread read the pod's labels and namespace (placed pods' anti-affinity too)
            placement += (pod.pod_affinity, pod.spread_constraints, pod.namespace, tuple(sorted(pod.labels.items())))
        return (id(task.req), task.sig, placement, task.job.queue, self.ssn.victim_key(task, self.hook))

    def make_room(self, stmt: Statement, task: TaskInfo, reason: str, *, settle: bool = True) -> bool:
        """Pipeline ``task`` onto a node, evicting victims there if needed; False if no node works.

        ``admit`` (the queue's allocatable check) is asked after the evictions,
        when the queue's accounting already reflects them; a refusal undoes that
        node's evictions and the next node is tried.  ``settle=False``: the caller
        will undo a statement that evicts nobody (the actions discard those), so
        a task that fits without evictions is only reported (True), not placed.
        """
        ssn, admit = self.ssn, self.admit
        if not may_preempt(task):
            return False
        fresh = not len(stmt)
        if fresh and self._failed.get(self._shape(task)) == ssn.commits:
            return False
        nodes = ssn.nodes
        future = nodes.future_idle(task)
        mask = ssn.feasible(task, future, mode="future")
        if mask.any() and not (admit and admit(task)):  # earlier evictions may already have made room
            if settle:
                stmt.pipeline(task, ssn.best_node(task, mask))
            return True
        reachable = ssn.feasible(task, future + self.freeable(), mode="reach")
        if self.topology is not None:
            if self._least_disruptive(stmt, task, reachable, reason):
                return True
        else:
            for node in _by_score(ssn, task, reachable):
                mark = stmt.mark()
                found = _evict_on(ssn, stmt, task, int(node), self.candidate, self.select, reason, admit)
                if found is not None:
                    victims, constrained = found
                    if constrained:  # more victims than resources needed went: spare those not needed
                        _reprieve(ssn, stmt, task, int(node), mark, victims, reason, admit)
                    stmt.pipeline(task, int(node))
                    return True
                stmt.rollback(mark)
        if fresh:
            self._failed[self._shape(task)] = ssn.commits
        return False

    def _least_disruptive(self, stmt: Statement, task: TaskInfo, reachable: np.ndarray, reason: str) -> bool:
        """Volcano's topology-aware preemption: dry-run victim selection on candidate nodes, then evict on the
        one whose victims disrupt least (:func:`disruption`).

        Candidates are taken in node order until :class:`CandidateLimits` says
        enough (Volcano starts at a random node and checks them in parallel;
        here the search is deterministic).
        """
        assert self.topology is not None
        nodes = np.flatnonzero(reachable)
        want = self.topology.count(int(nodes.size))
        found: list[tuple[int, list[TaskInfo]]] = []
        for node in nodes.tolist():
            victims = self._dry_run(stmt, task, node)
            if victims:
                found.append((node, victims))
                if len(found) >= want:
                    break
        if not found:
            return False
        best, chosen = min(found, key=lambda nv: disruption(nv[1], self.ssn.now))
        for victim in chosen:
            stmt.evict(victim, reason)
        stmt.pipeline(task, best)
        return True

    def _dry_run(self, stmt: Statement, task: TaskInfo, node: int) -> list[TaskInfo] | None:
        """The victims ``node`` needs for ``task`` (Volcano's SelectVictimsOnNode), leaving ``stmt`` as it was.

        Victims go least important first until the task fits; then, most
        important first, each is spared if the task still fits without it.
        """
        mark = stmt.mark()
        found = _evict_on(self.ssn, stmt, task, node, self.candidate, self.select, "", self.admit)
        if found is None:
            stmt.rollback(mark)
            return None
        kept = _reprieve(self.ssn, stmt, task, node, mark, found[0], "", self.admit)
        stmt.rollback(mark)
        return kept


def disruption(victims: list[TaskInfo], now: datetime) -> tuple:
    """How much evicting ``victims`` disrupts, smaller first (Volcano's pickOneNodeForPreemption, whose
    PDB criterion it leaves out too): the highest victim priority, the sum of priorities, the number of
    victims, then the latest start among the highest-priority victims preferred."""
    top = max(v.priority for v in victims)
    started = min(_started(v, now) for v in victims if v.priority == top)
    return (top, sum(v.priority + 2**31 for v in victims), len(victims), -started)


def _started(task: TaskInfo, now: datetime) -> float:
    """When the task's pod started, as Unix seconds: bound by this scheduler, else created, else now."""
    pod = task.pod
    if pod.bound_at is not None:
        return pod.bound_at
    return (pod.created or now).timestamp()


def _by_score(ssn: Session, task: TaskInfo, mask: np.ndarray) -> np.ndarray:
    cand = np.flatnonzero(mask)
    if cand.size <= 1:
        return cand
    scores = ssn.node_scores(task)  # the session's cached scores: a node's score depends on that node alone
    return cand if scores is None else cand[np.argsort(-scores[cand], kind="stable")]


def _room(ssn: Session, task: TaskInfo, node: int, admit: Admit | None) -> bool:
    """Does ``task`` fit on ``node`` once the evictions so far finish — resources, and every predicate that
    counts placements (host ports, spread, inter-pod terms, NUMA, devices) — and does its queue admit it?"""
    return (fits(ssn.nodes.future_idle_at(node, task), task) and ssn.fits_after_evictions(task, node)
            and not (admit and admit(task)))


def _reprieve(ssn: Session, stmt: Statement, task: TaskInfo, node: int, mark: int, victims: list[TaskInfo],
              reason: str, admit: Admit | None) -> list[TaskInfo]:
    """Spare the victims ``task`` does not need (kube-scheduler's reprieve in SelectVictimsOnNode).

    ``victims``, in eviction order, are evicted after ``mark`` and the task
    has room (:func:`_room`); most important first, each is kept if the task
    still has room without it.  Leaves ``stmt`` with the rest evicted, and
    returns them.
    """
    kept = victims
    holds_kept = True  # whether the statement's evictions after mark are exactly ``kept``
    for spared in reversed(victims):
        trial = [v for v in kept if v is not spared]
        stmt.rollback(mark)
        for victim in trial:
            stmt.evict(victim, reason)
        holds_kept = _room(ssn, task, node, admit)
        if holds_kept:
            kept = trial
    if not holds_kept:
        stmt.rollback(mark)
        for victim in kept:
            stmt.evict(victim, reason)
    return kept


def eviction_order(ssn: Session, preemptor: TaskInfo) -> Callable[[TaskInfo], Any]:
    """A sort key putting victims in Volcano's order (BuildVictimsPriorityQueue), first to go first:
    by queue (``Session.compare_victim_queues``: orphaned tasks first), then within a queue the job
    served last, then within a job the task placed last."""
    home = ssn.queues.get(preemptor.job.queue)

    def compare(a: TaskInfo, b: TaskInfo) -> int:
        if a.job is b.job:
            return -ssn.compare_tasks(a, b)
        qa, qb = ssn.queues.get(a.job.queue), ssn.queues.get(b.job.queue)
        if qa is None or qb is None:
            return (qb is None) - (qa is None)
        if qa is not qb and home is not None:
            r = ssn.compare_victim_queues(qa, qb, home)
            if r:
                return r
        return -ssn.compare_jobs(a.job, b.job) or -ssn.compare_tasks(a, b)

    return cmp_to_key(compare)


def _evict_on(ssn: Session, stmt: Statement, task: TaskInfo, node: int, candidate: Candidate, select: Select,
              reason: str, admit: Admit | None) -> tuple[list[TaskInfo], bool] | None:
    """Evict victims on ``node`` until the task has room there (:func:`_room`: resources and every
    constraint once they are gone) and its queue admits it; None if they never do.

    Returns the victims and whether some went only for a constraint — the
    resources and the queue were satisfied earlier, but a placed pod's
    anti-affinity, a spread count or a held port still refused the node — when
    sparing those not needed (:func:`_reprieve`) may keep some.
    """
    nodes = ssn.nodes
    preemptees = [t for t in nodes.tasks[node].values() if may_be_victim(t) and candidate(t)]
    if not preemptees:
        return None
    # Plugins approve victims in the order given, each assuming the ones before it go (a queue stays
    # above its share, a gang above its minMember); so give them the eviction order — least
    # important first — and evict a prefix of what they approve.
    preemptees.sort(key=eviction_order(ssn, task))
    victims = select(task, preemptees)
    if not victims:
        return None
    avail = nodes.future_idle_at(node, task)
    if not fits(avail + sum(v.req for v in victims), task):
        return None
    constrained = False
    for i, victim in enumerate(victims):
        stmt.evict(victim, reason)
        avail = avail + victim.req
        if fits(avail, task) and not (admit and admit(task)):
            if ssn.fits_after_evictions(task, node):
                return victims[:i + 1], constrained
            constrained = True
    return None
