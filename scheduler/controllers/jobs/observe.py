"""What changed since the controller last looked: the requests Volcano's informer handlers would have queued.

Volcano's Job controller is driven by watch events (a pod added, updated from one phase to another,
deleted; a Job's spec changed; a PodGroup's phase changed; a Command created).  Scoria's controller
reconciles from what exists, so it keeps, per Job, a :class:`JobMemory` of what it saw last time and
derives the same requests from the difference (:func:`requests_since`).  With no memory (a new Job, or
a restarted controller) every pod reads as just added, as after an informer's initial list.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from scheduler.controllers.jobs import keys
from scheduler.controllers.jobs.pods import PodView
from scheduler.controllers.jobs.policies import Delayed, Request
from scheduler.controllers.jobs.spec import Job, JobSpec


@dataclass(frozen=True)
class PodMemo:
    uid: str
    phase: str
    restarts: int
    ready: bool
    terminating: bool
    out_of_sync: bool
    task: str
    version: int | None
    partition: str = ""

    @classmethod
    def of(cls, pod: PodView) -> PodMemo:
        return cls(pod.uid, pod.phase, pod.restarts, pod.ready, pod.terminating, pod.out_of_sync, pod.task,
                   pod.version, pod.partition)


@dataclass
class JobMemory:
    """What the controller saw of one Job (by uid) at its last reconcile."""

    uid: str
    spec: str = ""  # the spec as JSON
    scale: tuple = ()  # minAvailable and each task's replicas: a change is a JobUpdated event
    phase: str = ""
    pods: dict[str, PodMemo] = field(default_factory=dict)
    killed: set[str] = field(default_factory=set)  # uids of pods this controller deleted
    podgroup_phase: str | None = None
    podgroup_condition: str = ""  # the latest true condition's type and message, for PodGroupPending events
    delayed: dict[str, Delayed] = field(default_factory=dict)  # by pod name ("" for a job-level event)
    refused: str = ""  # why the Job was not admitted (reported once)
    parsed: JobSpec | None = None  # ``spec`` with its defaults, as read then (not read again while it is the same)


def spec_json(job: Job | dict) -> str:
    """The Job's spec (of a :class:`Job` or its manifest) as it was written: the controller's check that nothing
    changed since it admitted it."""
    doc = job.doc if isinstance(job, Job) else job
    return json.dumps(doc.get("spec"), sort_keys=True, default=str)


def scale_of(job: Job) -> tuple:
    return (job.spec.min_available, tuple(t.replicas for t in job.spec.tasks))


def task_completed(job: Job, pods: dict[str, PodView], task: str) -> bool:
    """Every replica of ``task`` succeeded (jobCache.TaskCompleted)."""
    spec = job.spec.task(task)
    if spec is None or spec.replicas <= 0:
        return False
    return sum(1 for p in pods.values() if p.task == task and p.phase == "Succeeded") >= spec.replicas


def task_failed(job: Job, pods: dict[str, PodView], task: str) -> bool:
    """The restarts of the task's pending and running pods reached its maxRetry (jobCache.TaskFailed)."""
    spec = job.spec.task(task)
    if spec is None or spec.replicas == 0 or spec.max_retry == -1:
        return False
    limit = spec.max_retry or keys.DEFAULT_MAX_RETRY
    restarts = sum(p.restarts for p in pods.values() if p.task == task and p.phase in ("Running", "Pending"))
    return restarts >= limit


def _pod_request(pod: PodView | PodMemo, name: str, event: str, job_uid: str, exit_code: int = 0) -> Request:
    return Request(event=event, task=pod.task, pod=name, pod_uid=pod.uid, partition=pod.partition,
                   exit_code=exit_code, version=pod.version, job_uid=job_uid)


def _updated(job: Job, pods: dict[str, PodView], pod: PodView, old: PodMemo) -> Request:
    """updatePod: the event a pod's change means."""
    event, exit_code = keys.OUT_OF_SYNC_EVENT, 0
    if pod.phase == "Failed":
        if old.phase != "Failed":
            event, exit_code = keys.POD_FAILED, pod.exit_code
    elif pod.phase == "Succeeded":
        if old.phase != "Succeeded" and task_completed(job, pods, pod.task):
            event = keys.TASK_COMPLETED
    elif pod.phase in ("Running", "Pending"):
        if old.phase != pod.phase:  # the phase's event wins over TaskFailed (looked at only when it stayed)
            event = keys.POD_RUNNING if pod.phase == "Running" else keys.POD_PENDING
        elif task_failed(job, pods, pod.task):
            event = keys.TASK_FAILED
    if pod.out_of_sync:
        event = keys.OUT_OF_SYNC_EVENT
    return _pod_request(pod, pod.name, event, job.uid, exit_code)


def requests_since(job: Job, memory: JobMemory | None, pods: dict[str, PodView],
                   podgroup_phase: str | None, *, spec_text: str | None = None) -> list[Request]:
    """The requests the changes since ``memory`` mean, in a fixed order: the Job, its pods by name, its PodGroup
    (``spec_text``: :func:`spec_json` of the Job, when the caller has it)."""
    out: list[Request] = []
    if memory is None:
        out.append(Request(event=keys.OUT_OF_SYNC_EVENT))
    elif memory.spec != (spec_json(job) if spec_text is None else spec_text):
        out.append(Request(event=keys.JOB_UPDATED if memory.scale != scale_of(job) else keys.OUT_OF_SYNC_EVENT))
    elif memory.phase != (job.doc.get("status") or {}).get("state", {}).get("phase", ""):
        out.append(Request(event=keys.OUT_OF_SYNC_EVENT))  # someone else changed the phase
    seen = memory.pods if memory is not None else {}
    killed = memory.killed if memory is not None else set()
    for name in sorted(set(seen) | set(pods)):
        old, pod = seen.get(name), pods.get(name)
        if pod is not None and pod.version is None:
            continue  # Volcano skips a pod without a readable job version
        if old is not None and (pod is None or pod.uid != old.uid):  # deleted (perhaps made again since)
            gone = keys.OUT_OF_SYNC_EVENT if (old.out_of_sync or old.uid in killed) else keys.POD_EVICTED
            out.append(_pod_request(old, name, gone, job.uid))
            old = None
        if pod is None:
            continue
        if old is None:
            out.append(_pod_request(pod, name, keys.OUT_OF_SYNC_EVENT if pod.out_of_sync else keys.POD_PENDING,
                                    job.uid))
        elif PodMemo.of(pod) != old:
            out.append(_updated(job, pods, pod, old))
    if memory is not None and memory.podgroup_phase is not None and podgroup_phase is not None \
            and podgroup_phase != memory.podgroup_phase:
        out.append(Request(event=keys.JOB_UNKNOWN if podgroup_phase == "Unknown" else ""))
    return out
