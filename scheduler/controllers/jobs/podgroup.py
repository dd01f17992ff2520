"""A Job's PodGroup: the one it should have (createOrUpdatePodGroup) and what to change in the one it has
(shouldUpdateExistingPodGroup)."""

from __future__ import annotations

import copy
from collections.abc import Mapping

from scheduler.controllers.jobs import keys
from scheduler.controllers.jobs.pods import job_ref
from scheduler.controllers.jobs.quota import format_resources, min_resources, parse_resources
from scheduler.controllers.jobs.spec import Job, Task
from scheduler.controllers.kinds import PODGROUP


def min_task_member(task: Task) -> int:
    """getMinTaskMember: the task's minAvailable (always set once defaulted)."""
    return task.min_available


def _sub_group_policies(job: Job) -> list[dict]:
    """spec.subGroupPolicy: one entry per task with a partitionPolicy (getSubGroupPolicy)."""
    out = []
    for task in job.spec.tasks:
        if task.partition is None:
            continue
        policy = {"name": task.name, "subGroupSize": task.partition.partition_size,
                  "minSubGroups": task.partition.min_partitions,
                  "labelSelector": {"matchLabels": {keys.TASK_SPEC: task.name}},
                  "matchLabelKeys": [keys.PARTITION_ID]}
        if task.partition.network_topology:
            policy["networkTopology"] = dict(task.partition.network_topology)
        out.append(policy)
    return out


def _network_topology(job: Job) -> dict | None:
    raw = job.spec.network_topology
    if not raw:
        return None
    out = {"mode": raw.get("mode", "")}
    if raw.get("highestTierAllowed") is not None:
        out["highestTierAllowed"] = raw["highestTierAllowed"]
    elif raw.get("highestTierName"):
        out["highestTierName"] = raw["highestTierName"]
    return out


def desired_podgroup(job: Job, priorities: Mapping[str, int]) -> dict:
    spec: dict = {"minMember": job.spec.min_available,
                  "minTaskMember": {t.name: min_task_member(t) for t in job.spec.tasks},
                  "queue": job.spec.queue, "minResources": format_resources(min_resources(job, priorities))}
    if job.spec.priority_class_name:
        spec["priorityClassName"] = job.spec.priority_class_name
    topology = _network_topology(job)
    if topology is not None:
        spec["networkTopology"] = topology
    subgroups = _sub_group_policies(job)
    if subgroups:
        spec["subGroupPolicy"] = subgroups
    metadata: dict = {"name": job.podgroup_name, "namespace": job.namespace, "ownerReferences": [job_ref(job)]}
    if job.annotations:
        metadata["annotations"] = dict(job.annotations)
    if job.labels:
        metadata["labels"] = dict(job.labels)
    return {"apiVersion": PODGROUP.api_version, "kind": PODGROUP.kind, "metadata": metadata, "spec": spec}


def podgroup_update(existing: dict, job: Job, priorities: Mapping[str, int]) -> dict | None:
    """``existing`` with the fields the Job governs brought up to date; None when nothing changes.

    As Volcano: priorityClassName, minMember, minResources (compared as amounts), each task's
    minTaskMember (entries of tasks the Job no longer has are left) and subGroupPolicy.
    """
    want = desired_podgroup(job, priorities)["spec"]
    if not _changes(existing.get("spec"), job, want):
        return None  # the usual case: no copy made
    updated = copy.deepcopy(existing)
    spec = updated.setdefault("spec", {})
    changed = False
    if (spec.get("priorityClassName") or "") != job.spec.priority_class_name:
        spec["priorityClassName"] = job.spec.priority_class_name
        changed = True
    if spec.get("minMember") != want["minMember"] or \
            parse_resources(spec.get("minResources")) != parse_resources(want["minResources"]):
        spec["minMember"], spec["minResources"] = want["minMember"], want["minResources"]
        changed = True
    members = spec.get("minTaskMember")
    if not isinstance(members, dict):
        members = spec["minTaskMember"] = {}
        changed = True
    for task, count in want["minTaskMember"].items():
        if members.get(task) != count:
            members[task] = count
            changed = True
    subgroups = want.get("subGroupPolicy", [])
    if (spec.get("subGroupPolicy") or []) != subgroups:
        if subgroups:
            spec["subGroupPolicy"] = subgroups
        else:
            spec.pop("subGroupPolicy", None)
        changed = True
    return updated if changed else None


def _changes(spec: object, job: Job, want: dict) -> bool:
    """Would :func:`podgroup_update` change anything in a PodGroup with this ``spec``?"""
    if not isinstance(spec, dict):
        return True
    if (spec.get("priorityClassName") or "") != job.spec.priority_class_name:
        return True
    if spec.get("minMember") != want["minMember"] or \
            parse_resources(spec.get("minResources")) != parse_resources(want["minResources"]):
        return True
    members = spec.get("minTaskMember")
    if not isinstance(members, dict) or any(members.get(task) != count for task, count in want["minTaskMember"].items()):
        return True
    return (spec.get("subGroupPolicy") or []) != want.get("subGroupPolicy", [])
