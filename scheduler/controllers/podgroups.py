"""PodGroups for plain workloads, as Volcano's podgroup controller makes them (pkg/controllers/podgroup).

A pod this scheduler places, with no ``scheduling.k8s.io/group-name`` annotation and a controller owner
(a ReplicaSet, hence a Deployment; a StatefulSet; a batch Job; any other controller), joins one PodGroup
per owner: ``podgroup-<owner uid>``, owned as the pod is, ``minMember`` 1 (or the owner's
``scheduling.volcano.sh/group-min-member``), ``minResources`` what that many such pods use, the pod's
``priorityClassName``, the queue of its ``scheduling.volcano.sh/queue-name`` annotation, and the
``volcano.sh/*`` annotations of its owners (inherit-owner-annotations, on by default).  The pod is then
annotated with the group's name.  A ReplicaSet or StatefulSet scaled to zero loses its group.

A pod with no owner keeps Scoria's implicit group of one (Volcano would make ``podgroup-<pod uid>``;
the scheduling is the same).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.controllers.jobs import keys
from scheduler.controllers.jobs.quota import format_resources, pod_usage
from scheduler.controllers.kinds import (
    BATCH_JOB,
    DAEMONSET,
    JOB,
    POD,
    PODGROUP,
    REPLICASET,
    STATEFULSET,
    Kind,
    annotations_of,
    controller_ref,
    labels_of,
    meta,
    name_of,
    namespace_of,
    new_controller_ref,
    uid_of,
)
from scheduler.controllers.writes import Annotate, Create, Delete, Effect


@dataclass(frozen=True)
class PodGroupSettings:
    scheduler_names: frozenset[str] = field(default_factory=lambda: frozenset({"scoria"}))
    unnamed_is_ours: bool = True  # a pod naming no scheduler is this scheduler's (the simulator's reading)
    inherit_owner_annotations: bool = True


def group_name(pod: dict) -> str:
    """``podgroup-<uid>`` of the pod's controller owner (helpers.GeneratePodgroupName), else of the pod."""
    ref = controller_ref(pod)
    return keys.PODGROUP_PREFIX + (str(ref.get("uid")) if ref is not None else uid_of(pod))


def _ours(pod: dict, settings: PodGroupSettings) -> bool:
    name = str((pod.get("spec") or {}).get("schedulerName") or "")
    return name in settings.scheduler_names or (not name and settings.unnamed_is_ours)


_INHERITED_FROM = (REPLICASET, DAEMONSET, STATEFULSET, BATCH_JOB)  # the owner kinds Volcano looks up, by kind name


def _owner_annotations(pod: dict, owners: Mapping[Kind, list[dict]]) -> dict[str, str]:
    """The annotations of the pod's owners, the first owner's winning (getAnnotationsFromUpperRes: an owner is
    found by its kind and name in the pod's namespace)."""
    out: dict[str, str] = {}
    ns = namespace_of(pod)
    for ref in meta(pod).get("ownerReferences") or ():
        for kind in _INHERITED_FROM:
            objects = owners.get(kind, [])
            if ref.get("kind") != kind.kind:
                continue
            for owner in objects:
                if namespace_of(owner) == ns and name_of(owner) == ref.get("name"):
                    for k, v in annotations_of(owner).items():
                        out.setdefault(k, v)
    return out


def _owner_references(pod: dict) -> list[dict]:
    """The pod's owners when one is its controller, else the pod itself (newPGOwnerReferences)."""
    if controller_ref(pod) is not None:
        return [dict(r) for r in meta(pod).get("ownerReferences") or ()]
    return [new_controller_ref({"apiVersion": "v1", "kind": "Pod", "metadata": meta(pod)})]


def _min_member(annotations: Mapping[str, str]) -> int:
    try:
        value = int(annotations.get(keys.GROUP_MIN_MEMBER, "1"))
    except ValueError:
        return 1  # Volcano logs and keeps 1
    return value if value >= 0 else 1


def build_podgroup(pod: dict, name: str, owners: Mapping[Kind, list[dict]], settings: PodGroupSettings) -> dict:
    """The PodGroup Volcano builds for ``pod`` (buildPodGroupFromPod)."""
    inherited = _owner_annotations(pod, owners) if settings.inherit_owner_annotations else {}
    min_member = _min_member(inherited)
    spec = pod.get("spec") or {}
    usage = {k: v * min_member for k, v in pod_usage(spec).items()} if min_member else {}
    notes = {k: v for k, v in inherited.items() if k.startswith(keys.INHERITED_PREFIX)}
    pod_notes, pod_labels = annotations_of(pod), labels_of(pod)
    for key in (keys.PREEMPTABLE, keys.COOLDOWN_TIME, keys.REVOCABLE_ZONE):
        if key in pod_notes:
            notes[key] = pod_notes[key]
    if keys.JDB_MIN_AVAILABLE in pod_notes:
        notes[keys.JDB_MIN_AVAILABLE] = pod_notes[keys.JDB_MIN_AVAILABLE]
    elif keys.JDB_MAX_UNAVAILABLE in pod_notes:
        notes[keys.JDB_MAX_UNAVAILABLE] = pod_notes[keys.JDB_MAX_UNAVAILABLE]
    labels = {k: pod_labels[k] for k in (keys.PREEMPTABLE, keys.COOLDOWN_TIME) if k in pod_labels}
    metadata: dict = {"name": name, "namespace": namespace_of(pod), "ownerReferences": _owner_references(pod)}
    if notes:
        metadata["annotations"] = notes
    if labels:
        metadata["labels"] = labels
    group_spec: dict = {"minMember": min_member, "minResources": format_resources(usage),
                        "queue": pod_notes.get(keys.SCHEDULING_QUEUE_NAME) or keys.DEFAULT_QUEUE}
    if spec.get("priorityClassName"):
        group_spec["priorityClassName"] = spec["priorityClassName"]
    return {"apiVersion": PODGROUP.api_version, "kind": PODGROUP.kind, "metadata": metadata, "spec": group_spec,
            "status": {"phase": "Pending"}}


def plain_pod_effects(pods: list[dict], groups: Mapping[tuple[str, str], dict], owners: Mapping[Kind, list[dict]],
                      settings: PodGroupSettings) -> list[Effect]:
    """What the PodGroup controller does for ``pods``: create missing groups, annotate pods, drop groups of
    owners scaled to zero."""
    effects: list[Effect] = []
    made = set(groups)
    for pod in sorted(pods, key=lambda p: (namespace_of(p), name_of(p))):
        if not _ours(pod, settings) or annotations_of(pod).get(keys.GROUP_NAME):
            continue
        ref = controller_ref(pod)
        if ref is None or (ref.get("kind") == JOB.kind and ref.get("apiVersion") == JOB.api_version):
            continue
        ns, name = namespace_of(pod), group_name(pod)
        if (ns, name) not in made:
            effects.append(Create(build_podgroup(pod, name, owners, settings)))
            made.add((ns, name))
        effects.append(Annotate(POD, ns, name_of(pod), {keys.GROUP_NAME: name}))
    for kind in (REPLICASET, STATEFULSET):
        for owner in owners.get(kind, ()):
            replicas = (owner.get("spec") or {}).get("replicas")
            name = keys.PODGROUP_PREFIX + uid_of(owner)
            if replicas == 0 and (namespace_of(owner), name) in groups:
                effects.append(Delete(PODGROUP, namespace_of(owner), name))
    return effects
