"""Node load from /proc: CPU time, memory in use, pressure stall information.

CPU usage is a rate, so :class:`CpuMeter` keeps the previous counters and
turns two readings into millicores.  Memory in use is ``MemTotal −
MemAvailable`` (page cache the kernel can drop is not "used").  PSI lines are
``some avg10=0.12 avg60=0.05 avg300=0.01 total=12345``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from agent.hostpaths import HostPaths
from proto.errors import InputError
from proto.model import Pressure

USER_HZ = 100  # /proc/stat ticks per second on every Linux architecture we run on


def read_cpu_ticks(paths: HostPaths) -> tuple[int, int]:
    """(busy, total) ticks of all CPUs since boot, from the first line of /proc/stat."""
    return _cpu_ticks(str(paths.proc / "stat"))


def _cpu_ticks(path: str) -> tuple[int, int]:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:  # a --host-root without /proc: bad input, as a malformed first line is
        raise InputError(f"{path} is missing") from None
    try:
        head = os.read(fd, 512)  # the first line is all we need; the kernel fills whole lines
    finally:
        os.close(fd)
    fields = head.split(b"\n", 1)[0].split()
    if not fields or fields[0] != b"cpu":
        raise InputError(f"{path}: first line is not the cpu total")
    values = [int(v) for v in fields[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    total = sum(values[:8])  # guest time is already counted in user
    return total - idle, total


class CpuMeter:
    """Millicores in use between successive readings (of the node, or of a cgroup)."""

    def __init__(self, read_ns: Callable[[], int], clock: Callable[[], float] = time.monotonic):
        self.read_ns = read_ns
        self.clock = clock
        self._last: tuple[int, float] | None = None

    def sample(self) -> float | None:
        """Millicores used since the previous call (None on the first call)."""
        now, used = self.clock(), self.read_ns()
        last, self._last = self._last, (used, now)
        if last is None or now <= last[1]:
            return None
        return max(0.0, (used - last[0]) / 1e6 / (now - last[1]))  # ns per s = 1e9 -> millicores = /1e6


def node_cpu_ns(paths: HostPaths) -> Callable[[], int]:
    """A counter of busy CPU time in ns for the whole node (from /proc/stat ticks, summed over CPUs)."""
    path = str(paths.proc / "stat")
    return lambda: _cpu_ticks(path)[0] * (1_000_000_000 // USER_HZ)


def read_meminfo(paths: HostPaths) -> dict[str, int]:
    """/proc/meminfo in bytes."""
    out = {}
    for line in (paths.read(paths.proc / "meminfo") or "").splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key] = int(parts[0]) * (1024 if len(parts) > 1 and parts[1] == "kB" else 1)
    return out


def memory_used(paths: HostPaths) -> tuple[int, int]:
    """(total, used) bytes; used excludes what the kernel can reclaim."""
    info = read_meminfo(paths)
    total = info.get("MemTotal", 0)
    available = info.get("MemAvailable", info.get("MemFree", 0) + info.get("Cached", 0))
    return total, max(0, total - available)


def parse_pressure(text: str | None) -> Pressure:
    """A PSI file (``some …`` / ``full …`` lines) -> Pressure; missing lines read as zero."""
    p = Pressure()
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        kind, *pairs = line.split()
        values = dict(pair.split("=", 1) for pair in pairs if "=" in pair)
        try:
            avg10, avg60 = float(values.get("avg10", 0)), float(values.get("avg60", 0))
            total = int(values.get("total", 0))
        except ValueError:
            continue
        if kind == "some":
            p.some_avg10, p.some_avg60, p.some_total_us = avg10, avg60, total
        elif kind == "full":
            p.full_avg10, p.full_avg60, p.full_total_us = avg10, avg60, total
    return p


def node_pressure(paths: HostPaths) -> tuple[Pressure, Pressure, Pressure]:
    base = paths.proc / "pressure"
    cpu, memory, io = (parse_pressure(paths.read(base / name)) for name in ("cpu", "memory", "io"))
    return cpu, memory, io


def boot_id(paths: HostPaths) -> str:
    return (paths.read(paths.proc / "sys" / "kernel" / "random" / "boot_id") or "").strip()
