"""A queue's share of what it deserves, limits it would pass, and how to name resource amounts in a
reason: shared by proportion, capacity, drf and overcommit.

Queues share *real* resources.  Batch resources (``kubernetes.io/batch-cpu``,
``kubernetes.io/batch-memory``) are what online work leaves idle on a node at
the moment, offered to offline pods by the node's agent; they are no part of a
queue's share — an offline pod on batch resources neither uses a queue's
deserved CPU nor is held back because its queue has all of it — and only an
explicit capability on them limits a queue (:func:`limit_mask`).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from proto.vocab.qos import BATCH_RESOURCES
from proto.vocab.quantity import format_quantity
from scheduler.framework.resources import EPS, ResourceIndex


def share_mask(index: ResourceIndex) -> np.ndarray:
    """The resources a queue's share (deserved, guarantee, overuse, reclaim) and a job's dominant share are
    counted in: the index's share mask less the batch resources."""
    mask = index.share_mask.copy()
    for name in BATCH_RESOURCES:
        if name in index.column:
            mask[index.column[name]] = False
    return mask


def limit_mask(index: ResourceIndex) -> np.ndarray:
    """The resources a queue's capability may limit: every shared resource, batch ones included (a
    capability on ``kubernetes.io/batch-cpu`` is a limit the user set on it, not a share)."""
    return index.share_mask


def share(allocated: np.ndarray, deserved: np.ndarray, mask: np.ndarray) -> float:
    """Largest ``allocated/deserved`` over the masked dimensions (1 where deserved is 0 but used)."""
    return ShareOf(deserved, mask)(allocated)


class ShareOf:
    """``share(allocated, deserved, mask)`` for one ``deserved`` that no longer changes, with what it reads of
    ``deserved`` found once (a queue's share is asked again after every placement)."""

    __slots__ = ("mask", "positive", "divisor", "finite")

    def __init__(self, deserved: np.ndarray, mask: np.ndarray):
        d = deserved[mask]
        self.mask = mask
        self.positive = d > EPS
        self.divisor = np.where(self.positive, d, 1.0)
        self.finite = bool(np.isfinite(self.divisor).all())  # then no division needs silencing (no 0, no inf)

    def __call__(self, allocated: np.ndarray) -> float:
        if not self.divisor.size:
            return 0.0
        if not self.finite:  # an infinite deserved: inf/inf is NaN, as share() silently gives it
            with np.errstate(divide="ignore", invalid="ignore"):
                return self._max(allocated[self.mask])
        return self._max(allocated[self.mask])

    def _max(self, a: np.ndarray) -> float:
        return float(np.where(self.positive, a / self.divisor, np.where(a > EPS, 1.0, 0.0)).max())


def over_limit(future: np.ndarray, limit: np.ndarray, total: np.ndarray,
               cols: Iterable[int | np.integer]) -> list[int | np.integer]:
    """Columns where ``future`` exceeds ``limit``; a limit as large as the cluster is left to node fit,
    whose predicates explain it better."""
    return [c for c in cols if future[c] > limit[c] + EPS and limit[c] < total[c] - EPS]


def describe(index: ResourceIndex, vec: np.ndarray, cols: Iterable[int | np.integer]) -> str:
    return ", ".join(f"{index.names[c]} {format_quantity(index.names[c], vec[c])}" for c in cols)
