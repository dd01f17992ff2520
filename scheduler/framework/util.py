"""Small shared helpers: a priority queue ordered by a comparison function; counting predicate refusals."""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

import numpy as np

T = TypeVar("T")


class _Entry(Generic[T]):
    __slots__ = ("item", "seq", "cmp")

    def __init__(self, item: T, seq: int, cmp: Callable[[T, T], int]):
        self.item, self.seq, self.cmp = item, seq, cmp

    def __lt__(self, other: _Entry[T]) -> bool:
        r = self.cmp(self.item, other.item)
        return r < 0 if r else self.seq < other.seq


class PriorityQueue(Generic[T]):
    """Pops the item that ``cmp`` orders first; ties pop in insertion order.

    The comparison runs when items are pushed and popped, so an item whose
    rank changed (a queue's share after an allocation) must be popped and
    pushed again — which is exactly how the actions use it.
    """

    def __init__(self, cmp: Callable[[T, T], int], items: Iterable[T] = ()):
        self._cmp = cmp
        self._seq = itertools.count()
        self._heap = [_Entry(item, next(self._seq), cmp) for item in items]
        heapq.heapify(self._heap)

    def push(self, item: T) -> None:
        heapq.heappush(self._heap, _Entry(item, next(self._seq), self._cmp))

    def pop(self) -> T:
        return heapq.heappop(self._heap).item

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)

    def items(self) -> list[T]:
        return [e.item for e in self._heap]


def count_reason(reasons: Counter, label: str, mask: np.ndarray) -> None:
    """Add the nodes in ``mask`` under ``label`` (for ``predicate_reasons``); nothing when there are none."""
    n = int(np.count_nonzero(mask))
    if n:
        reasons[label] += n
