"""Resource vectors: every resource name gets a column, fixed for one snapshot.

``cpu`` (millicores), ``memory`` (bytes) and ``pods`` are always columns 0, 1
and 2; extended resources follow in name order.  Node capacities are stored
as ``(resources, nodes)`` float64 arrays so that one resource across all
nodes is a contiguous row — the shape that makes a predicate over ten
thousand nodes a handful of vector operations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from proto.vocab.placement import VGPU_RESOURCES

CPU, MEMORY, PODS = 0, 1, 2
BASE = ("cpu", "memory", "pods")
EPS = 1e-6  # float slack when comparing sums of integer amounts


class ResourceIndex:
    """Maps resource names to vector columns."""

    def __init__(self, extra: Iterable[str] = ()):
        names = list(BASE) + sorted(set(extra) - set(BASE))
        self.names: tuple[str, ...] = tuple(names)
        self.column = {name: i for i, name in enumerate(names)}
        self.size = len(names)
        # Queues and shares ignore the pod count (no queue is limited in pods) and shared-GPU amounts,
        # which are per GPU (volcano.sh/vgpu-memory is MiB on each of vgpu-number GPUs), not cluster totals.
        self.share_mask = np.ones(self.size, dtype=bool)
        self.share_mask[PODS] = False
        for name in VGPU_RESOURCES:
            if name in self.column:
                self.share_mask[self.column[name]] = False
        self._cache: dict[tuple, np.ndarray] = {}
        self._shapes: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}

    def vector(self, amounts: Mapping[str, int] | None, *, pods: int = 0) -> np.ndarray:
        """A read-only vector for ``amounts`` (shared between equal inputs)."""
        key = (tuple(sorted(amounts.items())) if amounts else (), pods)
        vec = self._cache.get(key)
        if vec is None:
            vec = np.zeros(self.size)
            for name, amount in (amounts or {}).items():
                vec[self.column[name]] = amount
            vec[PODS] += pods
            vec.flags.writeable = False
            self._cache[key] = vec
        return vec

    def shape(self, request_key: tuple) -> tuple[np.ndarray, np.ndarray]:
        """A pod's request vector (one pod counted) and the columns it needs, shared per request."""
        entry = self._shapes.get(request_key)
        if entry is None:
            vec = self.vector(dict(request_key), pods=1)
            entry = self._shapes[request_key] = (vec, np.flatnonzero(vec))
        return entry

    def to_dict(self, vec: np.ndarray, *, skip_zero: bool = True, include_pods: bool = False) -> dict[str, int]:
        out = {}
        for i, name in enumerate(self.names):
            if i == PODS and not include_pods:
                continue
            amount = int(round(float(vec[i])))
            if amount or not skip_zero:
                out[name] = amount
        return out

    def zeros(self) -> np.ndarray:
        return np.zeros(self.size)


def less_equal(a: np.ndarray, b: np.ndarray, mask: np.ndarray | None = None) -> bool:
    """``a <= b`` in every dimension (those in ``mask``), with float slack."""
    ok = a <= b + EPS
    return bool(ok[mask].all() if mask is not None else ok.all())


def less_equal_partly(a: np.ndarray, b: np.ndarray, mask: np.ndarray | None = None) -> bool:
    """``a <= b`` in at least one dimension (of those in ``mask``)."""
    ok = a <= b + EPS
    return bool(ok[mask].any() if mask is not None else ok.any())


def dominant_share(allocated: np.ndarray, total: np.ndarray, mask: np.ndarray) -> float:
    """Largest ``allocated/total`` over the dimensions in ``mask`` with a positive total."""
    sel = mask & (total > 0)
    if not sel.any():
        return 0.0
    return float((allocated[sel] / total[sel]).max())


def dominant_shares(allocated: np.ndarray, total: np.ndarray, mask: np.ndarray) -> list[float]:
    """:func:`dominant_share` of each row of ``allocated`` (one per job), in one pass."""
    sel = mask & (total > 0)
    if not sel.any() or not len(allocated):
        return [0.0] * len(allocated)
    return (allocated[:, sel] / total[sel]).max(axis=1).tolist()
