"""What an update may change in an object that exists, as kube-apiserver decides it.

``apply`` of an object that exists is an update.  kube-apiserver refuses a pod update that changes
more than a few fields (``ValidatePodUpdate`` in ``pkg/apis/core/validation``): a pod may change its
metadata (labels, annotations, owner references, finalizers), its containers' and init containers'
images, ``activeDeadlineSeconds`` (set, or lowered, never removed), its tolerations (only additions; a
``NoExecute`` toleration's ``tolerationSeconds`` only lowered), its scheduling gates (only removals) and,
while it is gated, its ``nodeSelector`` (only additions).  Everything else — commands, resources, the
restart policy, volumes — is fixed for the pod's life: such a change is refused naming the first field
that differs.  A PriorityClass keeps its ``value`` and ``preemptionPolicy``.

Pure functions over manifests (dicts): :func:`pod_update_problem` and :func:`update_problem` return the
reason an update is refused, or None.
"""

from __future__ import annotations

import copy
from typing import Any

POD_MUTABLE = ("metadata (labels, annotations), spec.containers[*].image, spec.initContainers[*].image, "
               "spec.activeDeadlineSeconds (set or lowered), spec.tolerations (additions), spec.schedulingGates "
               "(removals) and, while gated, spec.nodeSelector (additions)")
# server-set metadata that an applied manifest never changes (kept from the stored object when absent)
SERVER_METADATA = ("uid", "creationTimestamp", "resourceVersion", "generation", "managedFields", "selfLink")


def update_problem(kind: str, old: dict, new: dict) -> str | None:
    """Why ``new`` may not replace ``old`` (manifests of the same ``kind`` and name), or None."""
    if kind == "Pod":
        return pod_update_problem(old, new)
    if kind == "PriorityClass":
        for key in ("value", "preemptionPolicy"):
            if old.get(key) != new.get(key):
                return f"{key}: field is immutable (PriorityClass {key} cannot change; delete it and apply it again)"
    return None


def pod_update_problem(old: dict, new: dict) -> str | None:
    """kube-apiserver's rule for pod updates: None when only mutable fields changed, else the first field
    that may not change and what may."""
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    munged = copy.deepcopy(old_spec)
    for key in ("containers", "initContainers"):  # images may change: take the new ones where containers match
        olds, news = munged.get(key) or [], new_spec.get(key) or []
        if isinstance(olds, list) and isinstance(news, list) and len(olds) == len(news):
            for o, n in zip(olds, news, strict=True):
                if isinstance(o, dict) and isinstance(n, dict):
                    if "image" in n:
                        o["image"] = n["image"]
                    else:
                        o.pop("image", None)
    if problem := _deadline(old_spec, new_spec):
        return problem
    _take(munged, new_spec, "activeDeadlineSeconds")
    if problem := _tolerations(old_spec.get("tolerations") or [], new_spec.get("tolerations") or []):
        return problem
    _take(munged, new_spec, "tolerations")
    old_gates, new_gates = _names(old_spec.get("schedulingGates")), _names(new_spec.get("schedulingGates"))
    if not new_gates <= old_gates:
        added = sorted(new_gates - old_gates)[0]
        return (f"spec.schedulingGates: gate {added!r} cannot be added to a pod that exists (gates may only be "
                "removed)")
    _take(munged, new_spec, "schedulingGates")
    if old_gates:  # a gated pod may narrow where it goes: nodeSelector entries added, none changed
        old_sel, new_sel = old_spec.get("nodeSelector") or {}, new_spec.get("nodeSelector") or {}
        if isinstance(old_sel, dict) and isinstance(new_sel, dict) and all(
                new_sel.get(k) == v for k, v in old_sel.items()):
            _take(munged, new_spec, "nodeSelector")
    path = first_difference(munged, new_spec, "spec")
    if path is None:
        return None
    return (f"{path}: field is immutable: a pod may change only {POD_MUTABLE}; delete the pod and apply it "
            "again")


def _take(munged: dict, new_spec: dict, key: str) -> None:
    if key in new_spec:
        munged[key] = copy.deepcopy(new_spec[key])
    else:
        munged.pop(key, None)


def _names(gates: Any) -> set[str]:
    return {str(g.get("name")) for g in gates if isinstance(g, dict)} if isinstance(gates, list) else set()


def _deadline(old_spec: dict, new_spec: dict) -> str | None:
    old, new = old_spec.get("activeDeadlineSeconds"), new_spec.get("activeDeadlineSeconds")
    if old is None or old == new:
        return None
    if new is None:
        return "spec.activeDeadlineSeconds: cannot be removed once set (it may only be lowered)"
    if isinstance(old, int) and isinstance(new, int) and new > old:
        return f"spec.activeDeadlineSeconds: may only be lowered ({old} to {new} is a rise)"
    return None


def _tolerations(old: Any, new: Any) -> str | None:
    """Every old toleration must stay; a NoExecute one's tolerationSeconds may only be lowered."""
    if not isinstance(old, list) or not isinstance(new, list):
        return None

    def ident(t: Any) -> Any:
        return {k: v for k, v in t.items() if k != "tolerationSeconds"} if isinstance(t, dict) else t
    for i, t in enumerate(old):
        if t in new:
            continue
        same = [n for n in new if ident(n) == ident(t)]
        seconds = t.get("tolerationSeconds") if isinstance(t, dict) else None
        lowered = [n for n in same if isinstance(n.get("tolerationSeconds"), int) and isinstance(seconds, int)
                   and n["tolerationSeconds"] <= seconds]
        if lowered and isinstance(t, dict) and t.get("effect") == "NoExecute":
            continue
        return (f"spec.tolerations[{i}]: existing tolerations cannot be removed or changed (only added; a NoExecute "
                "toleration's tolerationSeconds only lowered)")
    return None


def first_difference(a: Any, b: Any, path: str) -> str | None:
    """The path of the first place where ``a`` and ``b`` differ (keys in sorted order), or None."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                return f"{path}.{key}"
            found = first_difference(a[key], b[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return f"{path}[{min(len(a), len(b))}]" if len(a) != len(b) else None
    return None if a == b and type(a) is type(b) else path
