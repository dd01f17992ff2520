"""The kinds of object the controllers read and write, and small helpers over their manifests.

Controllers work on Kubernetes-shaped manifests (plain dicts, as JSON would hold them), whatever the
mode stores them in: the Kubernetes API, the embedded store, or the simulator's memory.  A kind is
named by apiVersion and kind, since two share the name ``Job`` (``batch/v1`` and Volcano's
``batch.volcano.sh/v1alpha1``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Kind:
    api_version: str
    kind: str
    namespaced: bool = True

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def __str__(self) -> str:
        return f"{self.kind}.{self.group}" if self.group else self.kind


JOB = Kind("batch.volcano.sh/v1alpha1", "Job")
COMMAND = Kind("bus.volcano.sh/v1alpha1", "Command")
POD = Kind("v1", "Pod")
PODGROUP = Kind("scheduling.volcano.sh/v1beta1", "PodGroup")
QUEUE = Kind("scheduling.volcano.sh/v1beta1", "Queue", namespaced=False)
PRIORITY_CLASS = Kind("scheduling.k8s.io/v1", "PriorityClass", namespaced=False)
SERVICE = Kind("v1", "Service")
CONFIGMAP = Kind("v1", "ConfigMap")
SECRET = Kind("v1", "Secret")
PVC = Kind("v1", "PersistentVolumeClaim")
NETWORK_POLICY = Kind("networking.k8s.io/v1", "NetworkPolicy")
REPLICASET = Kind("apps/v1", "ReplicaSet")
DEPLOYMENT = Kind("apps/v1", "Deployment")
STATEFULSET = Kind("apps/v1", "StatefulSet")
DAEMONSET = Kind("apps/v1", "DaemonSet")
BATCH_JOB = Kind("batch/v1", "Job")

#: objects a Volcano Job's plugins (and volumes) make and own
JOB_OWNED = (SERVICE, CONFIGMAP, SECRET, NETWORK_POLICY, PVC)
#: owners whose pods the PodGroup controller groups, and whose annotations it inherits
WORKLOAD_OWNERS = (REPLICASET, STATEFULSET, DAEMONSET, BATCH_JOB, DEPLOYMENT)
ALL_KINDS = (JOB, COMMAND, POD, PODGROUP, QUEUE, PRIORITY_CLASS, *JOB_OWNED, *WORKLOAD_OWNERS)
_BY_NAME = {(k.api_version, k.kind): k for k in ALL_KINDS}


def kind_of(obj: dict) -> Kind:
    """The kind a manifest names (a kind outside :data:`ALL_KINDS` is made on the fly)."""
    api, name = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    return _BY_NAME.get((api, name)) or Kind(api, name)


_ATOMS = frozenset({str, int, float, bool, type(None)})


def copy_tree(obj: Any) -> Any:
    """A deep copy of a manifest (plain dicts, lists and scalars, as JSON or YAML give them), several times faster
    than :func:`copy.deepcopy`: a tuple becomes a list, as in JSON; anything else inside is deep-copied.  Parts
    that were shared are copied apart."""
    cls = obj.__class__
    if cls is dict:
        return {k: v if v.__class__ in _ATOMS else copy_tree(v) for k, v in obj.items()}
    if cls is list or cls is tuple:
        return [v if v.__class__ in _ATOMS else copy_tree(v) for v in obj]
    if cls in _ATOMS:
        return obj
    return copy.deepcopy(obj)


def part(obj: object, key: str) -> dict:
    """``obj[key]`` when both are mappings, else an empty dict (a manifest's missing or malformed part)."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def meta(obj: dict) -> dict:
    return part(obj, "metadata")


def name_of(obj: dict) -> str:
    return str(meta(obj).get("name") or "")


def namespace_of(obj: dict) -> str:
    return str(meta(obj).get("namespace") or "default")


def uid_of(obj: dict) -> str:
    return str(meta(obj).get("uid") or "")


def key_of(obj: dict) -> str:
    """``namespace/name`` (or ``name`` for a cluster-scoped kind)."""
    return f"{namespace_of(obj)}/{name_of(obj)}" if kind_of(obj).namespaced else name_of(obj)


def annotations_of(obj: dict) -> dict[str, str]:
    value = meta(obj).get("annotations")
    return value if isinstance(value, dict) else {}


def labels_of(obj: dict) -> dict[str, str]:
    value = meta(obj).get("labels")
    return value if isinstance(value, dict) else {}


def controller_ref(obj: dict) -> dict | None:
    """The owner reference with ``controller: true``, if any (metav1.GetControllerOf)."""
    for ref in meta(obj).get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


def owner_uids(obj: dict) -> set[str]:
    return {str(r.get("uid")) for r in meta(obj).get("ownerReferences") or () if isinstance(r, dict) and r.get("uid")}


def new_controller_ref(owner: dict) -> dict[str, Any]:
    """What metav1.NewControllerRef makes of ``owner``: controller and blockOwnerDeletion set."""
    return {"apiVersion": owner.get("apiVersion"), "kind": owner.get("kind"), "name": name_of(owner),
            "uid": uid_of(owner), "controller": True, "blockOwnerDeletion": True}


def object_ref(obj: dict) -> dict[str, str]:
    """An event's ``regarding``/``involvedObject``: enough to find the object again."""
    ref = {"apiVersion": str(obj.get("apiVersion", "")), "kind": str(obj.get("kind", "")), "name": name_of(obj),
           "uid": uid_of(obj)}
    if kind_of(obj).namespaced:
        ref["namespace"] = namespace_of(obj)
    return ref
