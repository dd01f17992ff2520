"""Pressure stall information as a wake-up source and as a counter.

A *PSI trigger* is a line written to a pressure file (``/proc/pressure/cpu``, or a cgroup v2 group's
``cpu.pressure``) and kept open: ``some <stall µs> <window µs>``.  The kernel then marks the file
``POLLPRI`` whenever tasks stalled at least that long within the window, so a loop can block in
``poll()`` instead of sampling counters.  What the kernel allows decides how useful it is:

* with ``CAP_SYS_RESOURCE`` the window may be 500 ms to 10 s and the kernel checks the trigger every
  window/10 — at best every 50 ms, so a trigger wakes the agent within 50 ms of a stall, not sooner;
* without it (an agent that drops every capability, as the shipped DaemonSet does, or this project's
  development VM) only windows of whole multiples of 2 s are allowed, checked every 2 s: too coarse to
  react to anything, so :func:`open_trigger` declines them unless asked (tests).

cgroup v1 keeps PSI at the node only (``/proc/pressure/*``), where offline tasks waiting for a CPU count
too; cgroup v2 keeps it per group, so the online parent's ``cpu.pressure`` is online work's own stall.
:func:`stall_counter` reads a group's cumulative ``some`` stall for the fast loop, which turns it into
a share of each window.
"""

from __future__ import annotations

import errno
import os
import select
from collections.abc import Callable
from pathlib import Path

from agent.cgroups.backend import Backend

FINEST_WINDOW_US = 500_000      # the kernel's smallest window (privileged)
UNPRIVILEGED_WINDOW_US = 2_000_000  # without CAP_SYS_RESOURCE: multiples of this only
DEFAULT_STALL_US = 5_000         # 5 ms of stall within the window wakes the loop


class StallTrigger:
    """An armed PSI trigger: ``fired()`` or a waiter that blocks until it fires."""

    def __init__(self, fd: int, path: Path, stall_us: int, window_us: int):
        self.fd, self.path, self.stall_us, self.window_us = fd, path, stall_us, window_us

    def __repr__(self) -> str:
        return f"PSI trigger {self.path} (some {self.stall_us} µs in {self.window_us} µs)"

    def waiter(self) -> Callable[[float], bool]:
        """A function that waits up to ``timeout`` seconds; True if the trigger fired meanwhile."""
        poller = select.poll()
        poller.register(self.fd, select.POLLPRI)

        def wait(timeout: float) -> bool:
            events = poller.poll(max(0, int(timeout * 1000)))
            if any(ev & (select.POLLERR | select.POLLNVAL) for _, ev in events):
                raise OSError(errno.EIO, f"{self.path}: the PSI trigger was dropped")
            return bool(events)
        return wait

    def fired(self) -> bool:
        return self.waiter()(0)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def arm(path: Path, stall_us: int, window_us: int) -> StallTrigger:
    """A trigger on ``path``; OSError as the kernel refuses it (EINVAL: a window it does not allow here,
    ENOENT: no such file, EOPNOTSUPP: PSI off)."""
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if os.fstat(fd).st_size:  # the kernel's pseudo-files are empty to stat; a fixture file is not
            raise OSError(errno.EINVAL, "not a kernel pressure file", str(path))
        # the kernel reads the line up to its last byte, which it overwrites with NUL: end it with one
        os.write(fd, f"some {stall_us} {window_us}\0".encode())
    except OSError:
        os.close(fd)
        raise
    return StallTrigger(fd, path, stall_us, window_us)


def open_trigger(path: Path, *, stall_us: int = DEFAULT_STALL_US, window_us: int = FINEST_WINDOW_US,
                 coarsest_us: int = 1_000_000) -> StallTrigger | None:
    """A trigger on ``path`` with ``window_us``, or the finest the kernel allows here up to ``coarsest_us``;
    None where there is none that fine (no file, PSI off, no ``CAP_SYS_RESOURCE`` for a short window)."""
    windows = sorted({window_us, UNPRIVILEGED_WINDOW_US})
    for window in (w for w in windows if w <= coarsest_us):
        try:
            return arm(path, min(stall_us, window), window)
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.ENOENT, errno.EOPNOTSUPP, errno.EACCES, errno.EPERM):
                raise
    return None


def stall_counter(backend: Backend, cgroup: str) -> Callable[[], int] | None:
    """A reader of the group's cumulative CPU ``some`` stall, in ns, where the kernel keeps one for it."""
    try:
        path = str(backend.pressure_path(cgroup, "cpu"))
    except KeyError:
        return None
    try:
        some_total_us(path)
    except (OSError, ValueError):
        return None
    return lambda: some_total_us(path) * 1000


def some_total_us(path: str) -> int:
    """The ``some`` line's ``total=`` of a pressure file (µs of stall since boot, or since the group was made)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.read(fd, 256)
    finally:
        os.close(fd)
    at = data.find(b"total=")
    if at < 0:
        raise ValueError(f"{path}: no total=")
    end = data.find(b"\n", at)
    return int(data[at + 6:end if end >= 0 else len(data)])
