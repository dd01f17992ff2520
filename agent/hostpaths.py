"""Where the host's ``/sys``, ``/proc`` and cgroup root are, injected rather than assumed.

In a DaemonSet the host's trees are mounted into the container (say under
``/host``); in tests they are fixture trees under ``tmp_path``.  Every
collector and the cgroup layer take a :class:`HostPaths` and never open an
absolute path of their own, so the same code runs against either.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from proto.errors import InputError


@dataclass(frozen=True)
class HostPaths:
    sys: Path = Path("/sys")
    proc: Path = Path("/proc")
    cgroup: Path = Path("/sys/fs/cgroup")

    @classmethod
    def under(cls, root: str | os.PathLike) -> HostPaths:
        """The usual layout below ``root`` (``/`` on the host, a mount point or a fixture tree)."""
        root = Path(root)
        return cls(sys=root / "sys", proc=root / "proc", cgroup=root / "sys" / "fs" / "cgroup")

    def read(self, path: str | os.PathLike) -> str | None:
        """A file's text, or None when it does not exist or cannot be read (hosts differ; that is normal)."""
        try:
            return Path(path).read_text()
        except (OSError, UnicodeDecodeError):
            return None

    def read_int(self, path: str | os.PathLike) -> int | None:
        text = self.read(path)
        if text is None:
            return None
        try:
            return int(text.strip().split()[0])
        except (ValueError, IndexError):
            return None


def parse_cpulist(text: str) -> list[int]:
    """``0-3,8,10-11`` -> [0, 1, 2, 3, 8, 10, 11]; empty text -> []; bad text raises ValueError."""
    out: list[int] = []
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            first, last = int(lo), int(hi)
            if last < first:
                raise InputError(f"bad CPU range {part!r}")
            out.extend(range(first, last + 1))
        else:
            out.append(int(part))
    return out


def format_cpulist(cpus: list[int]) -> str:
    """[0, 1, 2, 3, 8] -> ``0-3,8`` (the kernel's own form)."""
    cpus = sorted(set(cpus))
    parts, start = [], None
    for i, cpu in enumerate(cpus):
        if start is None:
            start = cpu
        if i + 1 == len(cpus) or cpus[i + 1] != cpu + 1:
            parts.append(str(start) if start == cpu else f"{start}-{cpu}")
            start = None
    return ",".join(parts)
