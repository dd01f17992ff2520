"""priority: higher-priority jobs and tasks first; preemption only of lower priority.

A job's priority is its PodGroup's ``priorityClassName`` value, else the
highest priority among its pods; a pod's is ``spec.priority``, else its
class, else the global default class, else 0.
"""

from __future__ import annotations

from scheduler.framework.plugin import Plugin
from scheduler.framework.snapshot import JobInfo, TaskInfo


class Priority(Plugin):
    name = "priority"
    hooks = ("job_order", "task_order", "preemptable", "job_starving", "victim_key")

    def job_order(self, a: JobInfo, b: JobInfo) -> int:
        return (a.priority < b.priority) - (a.priority > b.priority)

    def task_order(self, a: TaskInfo, b: TaskInfo) -> int:
        return (a.priority < b.priority) - (a.priority > b.priority)

    def preemptable(self, preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        mine = preemptor.job
        out = []
        for task in candidates:
            if task.job is mine:
                if task.priority < preemptor.priority:
                    out.append(task)
            elif task.job.priority < mine.priority:
                out.append(task)
        return out

    def victim_key(self, preemptor: TaskInfo) -> tuple:
        job = preemptor.job
        # its own running tasks are judged by task priority, others' by job priority
        return (job.priority, preemptor.priority, job.uid if job.ready_num else None)

    def job_starving(self, job: JobInfo) -> bool:
        return job.pending_num > 0
