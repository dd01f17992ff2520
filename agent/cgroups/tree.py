"""Creating, joining and removing cgroups of our own (the embedded runtime, tests, benchmarks).

On v1 a cgroup exists once per controller hierarchy, and a new cpuset group
is unusable until its ``cpuset.cpus``/``cpuset.mems`` are copied from its
parent; on v2 it is one directory whose controllers the parent must enable
for its children.  Removal moves any leftover processes to the parent and
removes directories bottom-up (a cgroup with children or tasks cannot go).
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

from agent.cgroups.backend import Backend

V1_CONTROLLERS = ("cpu", "cpuacct", "memory", "cpuset")


def _dirs(backend: Backend, rel: str) -> list[Path]:
    if backend.version == 2:
        return [backend.directory(rel, "")]
    return [backend.directory(rel, c) for c in V1_CONTROLLERS if backend.directory("", c).is_dir()]


def make_group(backend: Backend, rel: str) -> None:
    """Create ``rel`` (and missing parents) in every hierarchy, ready to hold processes."""
    parts = [p for p in rel.strip("/").split("/") if p]
    for depth in range(1, len(parts) + 1):
        sub = "/".join(parts[:depth])
        for d in _dirs(backend, sub):
            if not d.is_dir():
                d.mkdir()
            if backend.version == 1 and d.parent.name != "" and "cpuset" in d.parts:
                _inherit_cpuset(d)
        if backend.version == 2 and depth < len(parts):
            _enable_v2_controllers(backend.directory(sub, ""))


def _inherit_cpuset(d: Path) -> None:
    for name in ("cpuset.cpus", "cpuset.mems"):
        f = d / name
        if f.exists() and not f.read_text().strip():
            f.write_text((d.parent / name).read_text().strip())


def _enable_v2_controllers(d: Path) -> None:
    wanted = [c for c in ("cpu", "memory", "cpuset") if c in (d / "cgroup.controllers").read_text().split()]
    current = (d / "cgroup.subtree_control").read_text().split()
    missing = [c for c in wanted if c not in current]
    if missing:
        (d / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in missing))


def attach(backend: Backend, rel: str, pid: int) -> None:
    """Move process ``pid`` into ``rel`` in every hierarchy."""
    for d in _dirs(backend, rel):
        (d / "cgroup.procs").write_text(str(pid))


def pids(backend: Backend, rel: str) -> set[int]:
    out: set[int] = set()
    for d in _dirs(backend, rel):
        try:
            out.update(int(x) for x in (d / "cgroup.procs").read_text().split())
        except OSError:
            continue
    return out


def pids_below(backend: Backend, rel: str) -> set[int]:
    """Processes in ``rel`` and in every group below it, in each controller's tree."""
    out: set[int] = set()
    for d in _dirs(backend, rel):
        for procs in d.rglob("cgroup.procs") if d.is_dir() else ():
            try:
                out.update(int(x) for x in procs.read_text().split())
            except OSError:
                continue
    return out


def remove_group(backend: Backend, rel: str, *, timeout: float = 5.0) -> None:
    """Remove ``rel`` and everything below it; leftover processes are moved to the parent first."""
    for d in _dirs(backend, rel):
        if not d.is_dir():
            continue
        for sub in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True) + [d]:
            _evacuate(sub)
            _rmdir(sub, timeout)


def _evacuate(d: Path) -> None:
    try:
        procs = (d / "cgroup.procs").read_text().split()
    except OSError:
        return
    for pid in procs:
        try:
            (d.parent / "cgroup.procs").write_text(pid)
        except OSError:  # it exited meanwhile
            pass


def _rmdir(d: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.rmdir(d)
            return
        except FileNotFoundError:
            return
        except OSError as exc:  # EBUSY while the kernel is still tearing tasks out
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
