"""Kubernetes QoS classes and Volcano QoS levels: which pods are online and which offline.

Shared by the scheduler (offline pods fit against batch allocatable) and the
agent (offline pods are suppressed and evicted), so both sides draw the line
in the same place.  The level is the pod annotation ``volcano.sh/qos-level``
(LC, HLS, LS online; BE offline) when set; otherwise pods requesting
``kubernetes.io/batch-cpu``/``batch-memory`` and BestEffort pods are offline,
Guaranteed pods LC and Burstable pods LS.
"""

from __future__ import annotations

import logging
from typing import Any

from proto.errors import InputError
from proto.model import QosLevel
from proto.vocab.quantity import to_canonical

log = logging.getLogger(__name__)

QOS_LEVEL_ANNOTATION = "volcano.sh/qos-level"
BATCH_CPU = "kubernetes.io/batch-cpu"        # millicores
BATCH_MEMORY = "kubernetes.io/batch-memory"  # bytes
BATCH_RESOURCES = (BATCH_CPU, BATCH_MEMORY)


def parse_qos_level(annotations: dict[str, str]) -> QosLevel | None:
    """The annotated level, None when unset; ValueError for a value that is not one of the four."""
    text = (annotations.get(QOS_LEVEL_ANNOTATION) or "").strip().upper()
    if not text:
        return None
    if text not in ("LC", "HLS", "LS", "BE"):
        raise InputError(f"{QOS_LEVEL_ANNOTATION}: must be one of LC, HLS, LS, BE, got {text!r}")
    return QosLevel[text]


def qos_level(annotations: dict[str, str], qos_class: str, batch: bool) -> QosLevel:
    """A pod's level; an unreadable annotation is logged and the level derived as if it were unset."""
    try:
        level = parse_qos_level(annotations)
    except ValueError as exc:
        log.warning("ignoring %s", exc)
        level = None
    if level is not None:
        return level
    if batch or qos_class == "BestEffort":
        return QosLevel.BE
    return QosLevel.LC if qos_class == "Guaranteed" else QosLevel.LS


def qos_class(containers: list[Any]) -> str:
    """Kubernetes' rule: no requests or limits anywhere -> BestEffort; requests == limits everywhere -> Guaranteed.

    ``containers`` are container manifests (dicts); a missing request defaults
    to the limit, as the API server does.
    """
    any_set, guaranteed = False, bool(containers)
    for c in containers:
        res = (c.get("resources") if isinstance(c, dict) else None) or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        for name in ("cpu", "memory"):
            if req.get(name) is not None or lim.get(name) is not None:
                any_set = True
            if lim.get(name) is None or (req.get(name) is not None and
                                          to_canonical(name, req[name]) != to_canonical(name, lim[name])):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"
