"""Making room for a task by evicting others: shared by preempt and reclaim.

The two actions differ only in who may be a victim (same queue and lower
priority, or another queue over its share) — the ``candidate`` filter and
the session's ``preemptable``/``reclaimable`` answer.  Everything else is
here: which nodes could possibly work (a vectorised upper bound), trying
them best-score first, evicting the fewest victims lowest-priority first,
and pipelining the task onto the node being freed.
"""

from __future__ import annotations

from collections.abc import Callable, Container

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
        for node, tasks in enumerate(ssn.nodes.tasks):
            for task in tasks.values():
                if task.status == TaskStatus.RUNNING and ssn.evictable(task, hook):
                    group = group_of(task)
                    arr = self.by_group.get(group)
                    if arr is None:
                        arr = self.by_group[group] = np.zeros_like(ssn.nodes.alloc)
                    arr[:, node] += task.req

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

    def __init__(self, ssn: Session, hook: str, *, freeable: np.ndarray, candidate: Candidate,
                 admit: Admit | None = None):
        self.ssn = ssn
        self.hook = hook  # "preemptable" or "reclaimable": the session hook that picks victims
        self.freeable = freeable
        self.candidate = candidate
        self.select: Select = getattr(ssn, hook)
        self.admit = admit
        self._failed: dict[tuple, int] = {}

    def _shape(self, task: TaskInfo) -> tuple:
        facts = task.facts
        placement = (facts.numa_policy, task.pod.qos_class, facts.devices)
        return (id(task.req), task.sig, placement, task.job.queue, self.ssn.victim_key(task, self.hook))

    def make_room(self, stmt: Statement, task: TaskInfo, reason: str) -> bool:
        """Pipeline ``task`` onto a node, evicting victims there if needed; False if no node works.

        ``admit`` (the queue's allocatable check) is asked after the evictions,
        when the queue's accounting already reflects them; a refusal undoes that
        node's evictions and the next node is tried.
        """
        ssn, admit = self.ssn, self.admit
        fresh = not len(stmt)
        if fresh and self._failed.get(self._shape(task)) == ssn.commits:
            return False
        nodes = ssn.nodes
        future = nodes.future_idle(task)
        mask = ssn.feasible(task, future, mode="future")
        if mask.any() and not (admit and admit(task)):  # earlier evictions may already have made room
            stmt.pipeline(task, ssn.best_node(task, mask))
            return True
        reachable = ssn.feasible(task, future + self.freeable, mode="reach")
        for node in _by_score(ssn, task, reachable):
            mark = stmt.mark()
            if _evict_on(ssn, stmt, task, int(node), self.candidate, self.select, reason, admit):
                stmt.pipeline(task, int(node))
                return True
            stmt.rollback(mark)
        if fresh:
            self._failed[self._shape(task)] = ssn.commits
        return False


def _by_score(ssn: Session, task: TaskInfo, mask: np.ndarray) -> np.ndarray:
    cand = np.flatnonzero(mask)
    if cand.size <= 1:
        return cand
    scores = ssn.node_scores(task)  # the session's cached scores: a node's score depends on that node alone
    return cand if scores is None else cand[np.argsort(-scores[cand], kind="stable")]


def _evict_on(ssn: Session, stmt: Statement, task: TaskInfo, node: int, candidate: Candidate, select: Select,
              reason: str, admit: Admit | None) -> bool:
    """Evict victims on ``node`` until the task fits there and its queue admits it."""
    nodes = ssn.nodes
    preemptees = [t for t in nodes.tasks[node].values() if t.status == TaskStatus.RUNNING and candidate(t)]
    if not preemptees:
        return False
    # Plugins approve victims in the order given, each assuming the ones before it go (a queue stays
    # above its share, a gang above its minMember); so give them the eviction order — least
    # important first — and evict a prefix of what they approve.
    preemptees.sort(key=ssn.task_key, reverse=True)
    victims = select(task, preemptees)
    if not victims:
        return False
    avail = nodes.future_idle_at(node, task)
    if not fits(avail + sum(v.req for v in victims), task):
        return False
    for victim in victims:
        stmt.evict(victim, reason)
        avail = avail + victim.req
        if fits(avail, task) and ssn.fits_after_evictions(task, node) and not (admit and admit(task)):
            return True
    return False
