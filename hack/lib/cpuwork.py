"""Units of pure-Python CPU work: the online service's cost per request and the offline hogs' work.

``spin(n)`` is a fixed amount of work; ``calibrate(ms)`` finds the ``n`` that takes about ``ms`` on this
machine (the benchmark's service); ``burn(ms)`` busy-loops for ``ms`` of wall-clock time (the demo's
service); ``hog`` spins for ever and counts the units it got done in a shared memory-mapped file, so
that another process can read offline throughput without talking to it.
"""

from __future__ import annotations

import mmap
import struct
import time
from collections.abc import Callable


def spin(n: int) -> int:
    """A fixed amount of pure-Python work (the online handler's and the hogs' unit)."""
    x = 0
    for i in range(n):
        x = (x + i * i) % 1000003
    return x


def timed(fn: Callable, *args) -> float:
    """Seconds ``fn(*args)`` took."""
    t = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t


def calibrate(work_ms: float) -> tuple[int, float]:
    """(iterations of ``spin`` that take about ``work_ms``, seconds one iteration takes): the best of 7 runs."""
    best = min(timed(spin, 20000) for _ in range(7)) / 20000
    return max(1, round(work_ms / 1000 / best)), best


def burn(ms: float) -> int:
    """Busy-loop for ``ms`` milliseconds of wall-clock time; how many times round the loop."""
    end = time.perf_counter() + ms / 1000
    n = 0
    while time.perf_counter() < end:
        n += 1
    return n


def hog(counter_path: str, index: int, unit: int) -> None:
    """Spin ``unit`` iterations at a time for ever, the count of units done in slot ``index`` (a native
    unsigned 64-bit integer) of the file ``counter_path``."""
    with open(counter_path, "r+b") as f:
        counters = mmap.mmap(f.fileno(), 0)
    done = 0
    while True:
        spin(unit)
        done += 1
        struct.pack_into("Q", counters, index * 8, done)
