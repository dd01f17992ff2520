"""Tentative placement: record allocations, pipelines and evictions, then commit or discard.

This is what makes a gang all-or-nothing: an action allocates the job's
tasks one by one inside a statement, asks the session whether the job is
ready, and either commits (binds and evictions go to the effects) or
discards (every change is undone in reverse order, plugins included).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.framework.snapshot import TaskInfo, TaskStatus

if TYPE_CHECKING:
    from scheduler.framework.session import Session

ALLOCATE, PIPELINE, EVICT = "allocate", "pipeline", "evict"


class Statement:
    def __init__(self, ssn: Session):
        self.ssn = ssn
        # (ALLOCATE or PIPELINE, task, node) or (EVICT, task, (status before, reason))
        self.ops: list[tuple[str, TaskInfo, int | tuple[TaskStatus, str]]] = []

    def allocate(self, task: TaskInfo, node: int) -> None:
        self.ssn._allocate(task, node)
        self.ops.append((ALLOCATE, task, node))

    def pipeline(self, task: TaskInfo, node: int) -> None:
        self.ssn._pipeline(task, node)
        self.ops.append((PIPELINE, task, node))

    def evict(self, task: TaskInfo, reason: str) -> None:
        previous = self.ssn._evict(task)
        self.ops.append((EVICT, task, (previous, reason)))

    def discard(self) -> None:
        self.rollback(0)

    def mark(self) -> int:
        """A point to roll back to (for trying one placement inside a larger statement)."""
        return len(self.ops)

    def rollback(self, mark: int) -> None:
        """Undo every operation after ``mark``, newest first."""
        while len(self.ops) > mark:
            kind, task, extra = self.ops.pop()
            if kind == ALLOCATE:
                self.ssn._unallocate(task)
            elif kind == PIPELINE:
                self.ssn._unpipeline(task)
            else:
                assert isinstance(extra, tuple)
                self.ssn._unevict(task, extra[0])

    def commit(self) -> None:
        if self.ops:
            self.ssn.commits += 1
        for kind, task, extra in self.ops:
            if kind == ALLOCATE and task.status == TaskStatus.ALLOCATED:
                self.ssn._commit_bind(task)
            elif kind == PIPELINE and task.status == TaskStatus.PIPELINED:
                self.ssn._commit_pipeline(task)
            elif kind == EVICT:
                assert isinstance(extra, tuple)
                self.ssn._commit_evict(task, extra[1])
        self.ops.clear()

    @property
    def evictions(self) -> int:
        return sum(1 for kind, _, _ in self.ops if kind == EVICT)

    @property
    def allocated(self) -> int:
        return sum(1 for kind, _, _ in self.ops if kind in (ALLOCATE, PIPELINE))

    def __len__(self) -> int:
        return len(self.ops)
