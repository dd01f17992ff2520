"""A queue's share of what it deserves, limits it would pass, and how to name resource amounts in a
reason: shared by proportion, capacity and overcommit."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from proto.vocab.quantity import format_quantity
from scheduler.framework.resources import EPS, ResourceIndex


def share(allocated: np.ndarray, deserved: np.ndarray, mask: np.ndarray) -> float:
    """Largest ``allocated/deserved`` over the masked dimensions (1 where deserved is 0 but used)."""
    d, a = deserved[mask], allocated[mask]
    if not d.size:
        return 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        values = np.where(d > EPS, a / np.where(d > EPS, d, 1.0), np.where(a > EPS, 1.0, 0.0))
    return float(values.max())


def over_limit(future: np.ndarray, limit: np.ndarray, total: np.ndarray,
               cols: Iterable[int | np.integer]) -> list[int | np.integer]:
    """Columns where ``future`` exceeds ``limit``; a limit as large as the cluster is left to node fit,
    whose predicates explain it better."""
    return [c for c in cols if future[c] > limit[c] + EPS and limit[c] < total[c] - EPS]


def describe(index: ResourceIndex, vec: np.ndarray, cols: Iterable[int | np.integer]) -> str:
    return ", ".join(f"{index.names[c]} {format_quantity(index.names[c], vec[c])}" for c in cols)
