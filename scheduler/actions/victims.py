"""Making room for a task by evicting others: shared by preempt and reclaim.

The two actions differ only in who may be a victim (same queue and lower
priority, or another queue over its share) — the ``candidate`` filter and
the session's ``preemptable``/``reclaimable`` answer.  Everything else is
here: which nodes could possibly work (a vectorised upper bound), trying
them best-score first, evicting the fewest victims lowest-priority first,
and pipelining the task onto the node being freed.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..framework.resources import EPS
from ..framework.session import Session
from ..framework.snapshot import TaskInfo, TaskStatus
from ..framework.statement import Statement

Candidate = Callable[[TaskInfo], bool]
Select = Callable[[TaskInfo, list[TaskInfo]], list[TaskInfo]]
Admit = Callable[[TaskInfo], "str | None"]


class VictimIndex:
    """Per-node resources held by running tasks that pass a filter: an upper bound of what eviction frees."""

    def __init__(self, ssn: Session, group_of: Callable[[TaskInfo], str]):
        self.ssn = ssn
        self.group_of = group_of
        self.by_group: dict[str, np.ndarray] = {}
        for node, tasks in enumerate(ssn.nodes.tasks):
            for task in tasks.values():
                if task.status == TaskStatus.RUNNING:
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


def make_room(ssn: Session, stmt: Statement, task: TaskInfo, *, freeable: np.ndarray, candidate: Candidate,
              select: Select, reason: str, admit: Admit | None = None) -> bool:
    """Pipeline ``task`` onto a node, evicting victims there if needed; False if no node works.

    ``admit`` (the queue's allocatable check) is asked after the evictions,
    when the queue's accounting already reflects them; a refusal undoes that
    node's evictions and the next node is tried.
    """
    nodes = ssn.nodes
    future = nodes.future_idle(task)
    mask = ssn.feasible(task, future)
    if mask.any() and not (admit and admit(task)):  # earlier evictions may already have made room
        stmt.pipeline(task, ssn.best_node(task, mask))
        return True
    reachable = ssn.feasible(task, future + freeable)
    for node in _by_score(ssn, task, reachable):
        mark = stmt.mark()
        if _evict_on(ssn, stmt, task, int(node), candidate, select, reason, admit):
            stmt.pipeline(task, int(node))
            return True
        stmt.rollback(mark)
    return False


def _by_score(ssn: Session, task: TaskInfo, mask: np.ndarray) -> np.ndarray:
    cand = np.flatnonzero(mask)
    if cand.size <= 1:
        return cand
    scores = ssn.node_scores(task, cand)
    return cand if scores is None else cand[np.argsort(-scores, kind="stable")]


def _evict_on(ssn: Session, stmt: Statement, task: TaskInfo, node: int, candidate: Candidate, select: Select,
              reason: str, admit: Admit | None) -> bool:
    """Evict victims on ``node`` until the task fits there and its queue admits it."""
    nodes = ssn.nodes
    preemptees = [t for t in nodes.tasks[node].values() if t.status == TaskStatus.RUNNING and candidate(t)]
    if not preemptees:
        return False
    victims = select(task, preemptees)
    if not victims:
        return False
    avail = nodes.future_idle_at(node, task)
    if not fits(avail + sum(v.req for v in victims), task):
        return False
    # Evict the least important first and stop as soon as the task fits and is admitted.
    for victim in sorted(victims, key=ssn.task_key, reverse=True):
        stmt.evict(victim, reason)
        avail = avail + victim.req
        if fits(avail, task) and not (admit and admit(task)):
            return True
    return False
