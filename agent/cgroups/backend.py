"""Reading and writing cgroup knobs, the same way on cgroup v1 and v2.

Policies speak of logical *knobs* (``cpu.quota``, ``cpu.idle``, ``memory.limit``…);
a :class:`Backend` maps each to the version's file and value format:

=============  ==========================================  ======================================
knob           cgroup v1 (per-controller hierarchies)      cgroup v2 (unified)
=============  ==========================================  ======================================
cpu.idle       cpu/cpu.idle                                cpu.idle
cpu.shares     cpu/cpu.shares (2..262144)                  cpu.weight (1..10000, converted)
cpu.quota      cpu/cpu.cfs_quota_us (-1 = none)            cpu.max ``quota period`` / ``max period``
cpu.burst      cpu/cpu.cfs_burst_us                        cpu.max.burst
memory.limit   memory/memory.limit_in_bytes (-1 = none)    memory.max (``max`` = none)
memory.min     —                                           memory.min
memory.low     —                                           memory.low
memory.high    —                                           memory.high
cpuset.cpus    cpuset/cpuset.cpus                          cpuset.cpus
cpuset.mems    cpuset/cpuset.mems                          cpuset.mems
=============  ==========================================  ======================================

Values are canonical integers (CPU in millicores, memory in bytes, ``None``
for "no limit") or, for cpusets, the kernel's list format (``0-3,8``): a write
takes that text or an iterable of ids, and a read gives the normalised text, so
``0,1,2,3`` and ``0-3`` compare equal.  On v1 the cpuset files need the
``cpuset`` hierarchy; a new v1 cpuset group starts with empty lists
(:func:`agent.cgroups.tree.make_group` copies its parent's).  v1 knobs go through cgroupspy's nodes
and controllers; v2 is plain files; the usage counters read every second are
plain reads of paths joined once, on both.  A cgroup is named by its path relative to
the hierarchy root (``kubepods/besteffort/pod…``).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import SupportsInt

from cgroupspy.nodes import Node

from agent.hostpaths import HostPaths, format_cpulist, parse_cpulist
from proto.errors import InputError

PERIOD_US = 100_000
CPUSET_KNOBS = ("cpuset.cpus", "cpuset.mems")
_UNLIMITED_V1 = 9223372036854771712  # what v1 memory.limit_in_bytes reads when unlimited

# A knob's canonical value: a number (millicores, bytes, shares, a 0/1 flag), None (no limit), or a
# cpuset (the kernel's list text, or the ids).  A read gives a number, None, or a cpuset's list text.
KnobValue = int | str | Iterable[int] | None
KnobReading = int | str | None


class KnobUnsupported(Exception):
    """The knob does not exist on this cgroup version or kernel."""


@dataclass(frozen=True)
class KnobFile:
    controller: str  # v1 hierarchy ("cpu", "memory", "cpuset"); "" on v2
    filename: str


def encode_cpuset(value: str | Iterable[int]) -> str:
    """``"0-3,8"``, ``"0,1,2,3"`` or ``[0, 1, 2, 3]`` -> the kernel's form (``0-3``); ValueError if not a list."""
    ids = parse_cpulist(value) if isinstance(value, str) else [int(v) for v in value]
    if any(i < 0 for i in ids):
        raise ValueError(f"cpuset ids must be non-negative, got {value!r}")
    return format_cpulist(ids)


def _number(value: KnobValue) -> int:
    """A numeric knob's value as an int (``int()``'s TypeError for a list or None)."""
    if isinstance(value, (str, SupportsInt)):
        return int(value)
    raise TypeError(f"expected a number, got {value!r}")


def _cpuset(value: KnobValue) -> str | Iterable[int]:
    """A cpuset knob's value (the TypeError :func:`encode_cpuset` gives for a number or None)."""
    if isinstance(value, (str, Iterable)):
        return value
    raise TypeError(f"expected a cpu or memory node list, got {value!r}")


def shares_to_weight(shares: int) -> int:
    """The kernel's own mapping from v1 shares (2..262144) to v2 weight (1..10000)."""
    return 1 + ((max(2, min(shares, 262144)) - 2) * 9999) // 262142


class Backend:
    version: int = 0

    def __init__(self, paths: HostPaths):
        self.paths = paths
        self._cgroup_root = str(paths.cgroup)
        self._counter_paths: dict[tuple[str, str], str] = {}

    # -- interface ------------------------------------------------------------------------------
    def file(self, knob: str) -> KnobFile:
        raise NotImplementedError

    def encode(self, knob: str, value: KnobValue) -> str:
        raise NotImplementedError

    def decode(self, knob: str, text: str) -> KnobReading:
        raise NotImplementedError

    def directory(self, cgroup: str, controller: str) -> Path:
        raise NotImplementedError

    def supports(self, knob: str, cgroup: str = "") -> bool:
        try:
            return self.path(cgroup, knob).exists()
        except KnobUnsupported:
            return False

    # -- shared ---------------------------------------------------------------------------------
    def path(self, cgroup: str, knob: str) -> Path:
        f = self.file(knob)
        return self.directory(cgroup, f.controller) / f.filename

    def exists(self, cgroup: str, controller: str = "cpu") -> bool:
        return self.directory(cgroup, controller).is_dir()

    def read(self, cgroup: str, knob: str) -> KnobReading:
        """The knob's value, canonical; FileNotFoundError if the cgroup (or knob) is gone."""
        f = self.file(knob)
        return self.decode(knob, self._read(cgroup, f))

    def write(self, cgroup: str, knob: str, value: KnobValue) -> None:
        f = self.file(knob)
        self._write(cgroup, f, self.encode(knob, value))

    def _read(self, cgroup: str, f: KnobFile) -> str:
        return (self.directory(cgroup, f.controller) / f.filename).read_text().strip()

    def _write(self, cgroup: str, f: KnobFile, text: str) -> None:
        path = self.directory(cgroup, f.controller) / f.filename
        if not path.parent.is_dir():
            raise FileNotFoundError(errno.ENOENT, "cgroup is gone", str(path.parent))
        with open(path, "w") as fh:
            fh.write(text)

    # -- usage counters -------------------------------------------------------------------------
    # Read every second for every pod (and the CPU ones 40 times a second for two parents), so
    # they skip cgroupspy and pathlib: the file paths are joined once and kept, and each read is
    # one open/read/close.  A missing file raises FileNotFoundError (the cgroup left).
    COUNTERS: dict[str, tuple[str, str]] = {}   # counter -> (controller, file)
    INACTIVE_FILE: tuple[bytes, ...] = (b"inactive_file",)  # memory.stat keys of reclaimable page cache, preferred first
    _MAX_CACHED_PATHS = 16384

    def _counter_path(self, cgroup: str, counter: str) -> str:
        key = (cgroup, counter)
        path = self._counter_paths.get(key)
        if path is None:
            if len(self._counter_paths) >= self._MAX_CACHED_PATHS:  # pods come and go: start over now and then
                self._counter_paths.clear()
            controller, filename = self.COUNTERS[counter]
            path = self._counter_paths[key] = os.path.join(self._cgroup_root, controller, cgroup, filename)
        return path

    def cpu_usage_ns(self, cgroup: str) -> int:
        """CPU time the cgroup's tasks used, in ns, since it was made."""
        return self._cpu_ns(_read_bytes(self._counter_path(cgroup, "cpu")), cgroup)

    def memory_usage(self, cgroup: str) -> int:
        """Working set in bytes: usage less reclaimable page cache (inactive file pages)."""
        usage = int(_read_bytes(self._counter_path(cgroup, "memory")))
        try:
            stat = _read_bytes(self._counter_path(cgroup, "memory.stat"))
        except OSError:
            return usage
        for key in self.INACTIVE_FILE:
            value = _stat_value(stat, key)
            if value is not None:
                return max(0, usage - value)
        return usage

    def _cpu_ns(self, data: bytes, cgroup: str) -> int:
        raise NotImplementedError

    def pressure(self, cgroup: str, resource: str) -> str | None:
        """The cgroup's PSI file text (``cpu``/``memory``/``io``), if the kernel keeps one."""
        raise NotImplementedError


class V1Backend(Backend):
    """cgroup v1: one hierarchy per controller, driven through cgroupspy's controllers."""

    version = 1
    FILES = {
        "cpu.idle": KnobFile("cpu", "cpu.idle"),
        "cpu.shares": KnobFile("cpu", "cpu.shares"),
        "cpu.quota": KnobFile("cpu", "cpu.cfs_quota_us"),
        "cpu.burst": KnobFile("cpu", "cpu.cfs_burst_us"),
        "memory.limit": KnobFile("memory", "memory.limit_in_bytes"),
        "cpuset.cpus": KnobFile("cpuset", "cpuset.cpus"),
        "cpuset.mems": KnobFile("cpuset", "cpuset.mems"),
    }

    def __init__(self, paths: HostPaths):
        super().__init__(paths)
        self._roots: dict[str, Node] = {}
        self._nodes: dict[tuple[str, str], Node] = {}

    def file(self, knob: str) -> KnobFile:
        try:
            return self.FILES[knob]
        except KeyError:
            raise KnobUnsupported(f"{knob} does not exist on cgroup v1") from None

    def directory(self, cgroup: str, controller: str) -> Path:
        return self.paths.cgroup / controller / cgroup

    def _node(self, cgroup: str, controller: str) -> Node:
        """A cgroupspy node for ``controller``/``cgroup`` (built directly: no scan of the whole tree; kept)."""
        key = (controller, cgroup)
        node = self._nodes.get(key)
        if node is not None:
            return node
        root = self._roots.get(controller)
        if root is None:
            root = self._roots[controller] = Node(str(self.paths.cgroup).encode())
        node = Node(controller.encode(), parent=root)
        for part in [p for p in cgroup.split("/") if p]:
            node = Node(part.encode(), parent=node)
        if len(self._nodes) >= self._MAX_CACHED_PATHS:
            self._nodes.clear()
        self._nodes[key] = node
        return node

    def _read(self, cgroup: str, f: KnobFile) -> str:
        return self._node(cgroup, f.controller).controller.get_property(f.filename.encode())

    def _write(self, cgroup: str, f: KnobFile, text: str) -> None:
        node = self._node(cgroup, f.controller)
        if not os.path.isdir(node.full_path):
            raise FileNotFoundError(errno.ENOENT, "cgroup is gone", node.full_path.decode())
        node.controller.set_property(f.filename.encode(), text)

    def encode(self, knob: str, value: KnobValue) -> str:
        if knob == "cpu.quota":
            return "-1" if value is None else str(max(1000, _number(value) * PERIOD_US // 1000))
        if knob == "memory.limit":
            return "-1" if value is None else str(_number(value))
        if knob == "cpu.shares":
            return str(max(2, _number(value)))
        if knob in CPUSET_KNOBS:
            return encode_cpuset(_cpuset(value))
        return str(value)

    def decode(self, knob: str, text: str) -> KnobReading:
        if knob == "cpu.quota":
            us = int(text)
            return None if us < 0 else us * 1000 // PERIOD_US
        if knob == "memory.limit":
            v = int(text)
            return None if v < 0 or v >= _UNLIMITED_V1 else v
        if knob in CPUSET_KNOBS:
            return encode_cpuset(text)
        return int(text)

    COUNTERS = {"cpu": ("cpuacct", "cpuacct.usage"), "memory": ("memory", "memory.usage_in_bytes"),
                "memory.stat": ("memory", "memory.stat")}
    INACTIVE_FILE = (b"total_inactive_file", b"inactive_file")  # total_*: the cgroup and its children

    def _cpu_ns(self, data: bytes, cgroup: str) -> int:
        return int(data)

    def pressure(self, cgroup: str, resource: str) -> str | None:
        controller = {"cpu": "cpuacct", "memory": "memory", "io": "blkio"}[resource]
        return self.paths.read(self.directory(cgroup, controller) / f"{resource}.pressure")


class V2Backend(Backend):
    """cgroup v2: one unified hierarchy, plain files."""

    version = 2
    FILES = {
        "cpu.idle": "cpu.idle", "cpu.shares": "cpu.weight", "cpu.quota": "cpu.max", "cpu.burst": "cpu.max.burst",
        "memory.limit": "memory.max", "memory.min": "memory.min", "memory.low": "memory.low",
        "memory.high": "memory.high", "cpuset.cpus": "cpuset.cpus", "cpuset.mems": "cpuset.mems",
    }

    def file(self, knob: str) -> KnobFile:
        try:
            return KnobFile("", self.FILES[knob])
        except KeyError:
            raise KnobUnsupported(f"{knob} does not exist on cgroup v2") from None

    def directory(self, cgroup: str, controller: str) -> Path:
        return self.paths.cgroup / cgroup

    def encode(self, knob: str, value: KnobValue) -> str:
        if knob == "cpu.quota":
            return f"max {PERIOD_US}" if value is None else f"{max(1000, _number(value) * PERIOD_US // 1000)} {PERIOD_US}"
        if knob == "cpu.shares":
            return str(shares_to_weight(_number(value)))
        if knob in ("memory.limit", "memory.high"):
            return "max" if value is None else str(_number(value))
        if knob == "cpu.burst":
            return str(_number(value))
        if knob in CPUSET_KNOBS:
            return encode_cpuset(_cpuset(value))
        return str(value)

    def decode(self, knob: str, text: str) -> KnobReading:
        if knob == "cpu.quota":
            quota, _, period = text.partition(" ")
            return None if quota == "max" else int(quota) * 1000 // int(period or PERIOD_US)
        if knob in ("memory.limit", "memory.high"):
            return None if text == "max" else int(text)
        if knob in CPUSET_KNOBS:
            return encode_cpuset(text)
        if knob == "cpu.shares":  # canonical unit is v1 shares; weights map back onto their band
            return 2 + (int(text) - 1) * 262142 // 9999
        return int(text)

    COUNTERS = {"cpu": ("", "cpu.stat"), "memory": ("", "memory.current"), "memory.stat": ("", "memory.stat")}

    def _cpu_ns(self, data: bytes, cgroup: str) -> int:
        value = _stat_value(data, b"usage_usec")
        if value is None:
            raise ValueError(f"{cgroup}/cpu.stat has no usage_usec")
        return value * 1000

    def pressure(self, cgroup: str, resource: str) -> str | None:
        return self.paths.read(self.directory(cgroup, "") / f"{resource}.pressure")


def _read_bytes(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 65536)
    finally:
        os.close(fd)


def _stat_value(data: bytes, key: bytes) -> int | None:
    """The value of ``key`` in a ``key value`` per line file (cpu.stat, memory.stat), or None."""
    at = 0 if data.startswith(key + b" ") else data.find(b"\n" + key + b" ")
    if at < 0:
        return None
    start = data.index(b" ", at + 1) + 1
    end = data.find(b"\n", start)
    return int(data[start:end if end >= 0 else len(data)])


def detect_backend(paths: HostPaths) -> Backend:
    """v2 when the root is the unified hierarchy (it has cgroup.controllers), else v1; InputError when neither is
    there (a --host-root or --cgroup-root without cgroups)."""
    if (paths.cgroup / "cgroup.controllers").exists():
        return V2Backend(paths)
    if (paths.cgroup / "cpu").exists() or (paths.cgroup / "cpu,cpuacct").exists():
        return V1Backend(paths)
    raise InputError(f"no cgroup hierarchy found under {paths.cgroup}")
