"""The pods of a Job: the manifest of a new one (Volcano's createJobPod) and what the controller reads of
an existing one (:class:`PodView`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from scheduler.controllers.jobplugins.base import pod_name
from scheduler.controllers.jobs import keys
from scheduler.controllers.jobs.spec import Job, Task
from scheduler.controllers.kinds import JOB, copy_tree, new_controller_ref, part

# copied from the Job's annotations onto its pods (createJobPod); the first two from its labels too
_FROM_JOB_ANNOTATIONS = (keys.PREEMPTABLE, keys.COOLDOWN_TIME, keys.REVOCABLE_ZONE)
_FROM_JOB_LABELS = (keys.PREEMPTABLE, keys.COOLDOWN_TIME)


def job_ref(job: Job) -> dict:
    return new_controller_ref({"apiVersion": JOB.api_version, "kind": JOB.kind,
                               "metadata": {"name": job.name, "uid": job.uid}})


def volume_claim_name(job: Job, index: int) -> str:
    """The claim a ``volumeClaim`` volume gets: ``<job>-pvc-<12 characters>``, stable for the Job (Volcano
    draws the characters at random and writes the name back into the spec)."""
    digest = hashlib.sha256(f"{job.uid}/{index}".encode()).hexdigest()
    return f"{job.name}-pvc-{digest[:12]}"


def _volume_name(job: Job, claim: str) -> str:
    return f"{job.name}-{hashlib.sha256(f'{job.uid}/{claim}'.encode()).hexdigest()[:12]}"


def new_pod(job: Job, task: Task, index: int, *, version: int, retry_count: int) -> dict:
    """A task's pod ``index`` before the plugins see it: the template with the Job's names written in."""
    template = copy_tree(task.template)
    tmeta = part(template, "metadata")
    spec = part(template, "spec")
    labels = dict(tmeta.get("labels") or {})
    notes = dict(tmeta.get("annotations") or {})
    if not spec.get("schedulerName"):
        spec["schedulerName"] = job.spec.scheduler_name
    if not spec.get("priorityClassName") and job.spec.priority_class_name:
        spec["priorityClassName"] = job.spec.priority_class_name
    _mount_volumes(job, spec)
    task_name = task.name or keys.DEFAULT_TASK_SPEC
    notes.update({
        keys.TASK_INDEX: str(index), keys.TASK_SPEC: task_name, keys.GROUP_NAME: job.podgroup_name,
        keys.JOB_NAME: job.name, keys.QUEUE_NAME: job.spec.queue, keys.JOB_VERSION: str(version),
        keys.TEMPLATE_UID: f"{job.name}-{task.name}", keys.JOB_RETRY_COUNT: str(retry_count),
    })
    if task.topology_policy:
        notes[keys.NUMA_POLICY] = task.topology_policy
    for key in _FROM_JOB_ANNOTATIONS:
        if key in job.annotations:
            notes[key] = job.annotations[key]
    if keys.JDB_MIN_AVAILABLE in job.annotations:
        notes[keys.JDB_MIN_AVAILABLE] = job.annotations[keys.JDB_MIN_AVAILABLE]
    elif keys.JDB_MAX_UNAVAILABLE in job.annotations:
        notes[keys.JDB_MAX_UNAVAILABLE] = job.annotations[keys.JDB_MAX_UNAVAILABLE]
    labels.update({keys.TASK_INDEX: str(index), keys.JOB_NAME: job.name, keys.TASK_SPEC: task_name,
                   keys.JOB_NAMESPACE: job.namespace, keys.QUEUE_NAME: job.spec.queue})
    for key in _FROM_JOB_LABELS:
        if key in job.labels:
            labels[key] = job.labels[key]
    if task.partition is not None:
        size = task.partition.partition_size
        labels[keys.PARTITION_ID] = str(index // size if size > 0 else 0)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod_name(job.name, task.name, index), "namespace": job.namespace,
                         "ownerReferences": [job_ref(job)], "labels": labels, "annotations": notes},
            "spec": spec}


def _mount_volumes(job: Job, spec: dict) -> None:
    seen: set[str] = set()
    for i, volume in enumerate(job.spec.volumes):
        claim = volume.claim_name or volume_claim_name(job, i)
        if claim in seen:
            continue
        seen.add(claim)
        name = _volume_name(job, claim)
        spec.setdefault("volumes", []).append({"name": name, "persistentVolumeClaim": {"claimName": claim}})
        for container in spec.get("containers") or ():
            container.setdefault("volumeMounts", []).append({"mountPath": volume.mount_path, "name": name})


@dataclass
class PodView:
    """What the Job controller reads of one of its pods."""

    name: str
    uid: str
    task: str
    version: int | None  # volcano.sh/job-version (None: missing or unreadable)
    phase: str
    exit_code: int  # the first container's termination exit code (0 when it has none)
    restarts: int  # restarts of all its containers and init containers
    ready: bool  # every container that reports a status is ready
    terminating: bool
    out_of_sync: bool
    partition: str
    doc: dict
    killed: bool = False  # this reconcile deleted it

    @classmethod
    def of(cls, doc: dict) -> PodView:
        metadata = doc.get("metadata") or {}
        notes = metadata.get("annotations") or {}
        status = part(doc, "status")
        statuses = [s for s in status.get("containerStatuses") or () if isinstance(s, dict)]
        inits = [s for s in status.get("initContainerStatuses") or () if isinstance(s, dict)]
        exit_code = 0
        if statuses:
            terminated = (statuses[0].get("state") or {}).get("terminated")
            if isinstance(terminated, dict) and isinstance(terminated.get("exitCode"), int):
                exit_code = terminated["exitCode"]
        try:
            version: int | None = int(notes.get(keys.JOB_VERSION, ""))
        except ValueError:
            version = None
        return cls(name=str(metadata.get("name", "")), uid=str(metadata.get("uid", "")),
                   task=notes.get(keys.TASK_SPEC) or keys.DEFAULT_TASK_SPEC, version=version,
                   phase=str(status.get("phase") or "Pending"), exit_code=exit_code,
                   restarts=sum(int(s.get("restartCount") or 0) for s in statuses + inits),
                   ready=all(bool(s.get("ready")) for s in statuses),
                   terminating=metadata.get("deletionTimestamp") is not None,
                   out_of_sync=keys.OUT_OF_SYNC in notes,
                   partition=str((metadata.get("labels") or {}).get(keys.PARTITION_ID, "")), doc=doc)
