"""What policies decide, as values: the executor, the evictor and the reporter carry them out.

A policy never writes a file or calls an API; it returns intents.  That keeps
every decision a pure function of (node state, profile, time) — testable with
plain data — and funnels every effect through one seam each.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CgroupWrite:
    """Set ``knob`` (see agent.cgroups.backend) of the cgroup at ``path`` to ``value`` (None: unlimited)."""

    path: str
    knob: str
    value: int | str | None
    why: str = ""


@dataclass(frozen=True, slots=True)
class Evict:
    """Evict an offline pod."""

    uid: str
    namespace: str
    name: str
    reason: str
    resource: str  # the one under pressure: "cpu" or "memory"


@dataclass(frozen=True, slots=True)
class BatchAllocatable:
    """What the node offers offline work (kubernetes.io/batch-cpu, kubernetes.io/batch-memory)."""

    cpu_millis: int
    memory_bytes: int
