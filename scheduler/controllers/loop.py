"""The controller loop: one reconcile of every Volcano Job and every plain workload pod, through a host.

:meth:`ControllerLoop.reconcile` lists what the host holds, asks the Job controller for each Job (in
namespace/name order) and the PodGroup controller for the plain pods, applies their effects in order,
and keeps each Job's memory for the next time.  It is deterministic and idempotent: a second reconcile
with nothing changed in between writes nothing.  A mode calls it whenever objects may have changed
(after a watch event, an apply, a scheduling cycle) and at :attr:`ReconcileResult.wake_at` at the latest.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from scheduler.controllers.host import Host
from scheduler.controllers.jobs.controller import Observed, Settings, decide
from scheduler.controllers.jobs.observe import JobMemory
from scheduler.controllers.kinds import (
    COMMAND,
    JOB,
    JOB_OWNED,
    POD,
    PODGROUP,
    PRIORITY_CLASS,
    WORKLOAD_OWNERS,
    Kind,
    controller_ref,
    meta,
    name_of,
    namespace_of,
    part,
    uid_of,
)
from scheduler.controllers.podgroups import PodGroupSettings, plain_pod_effects
from scheduler.controllers.writes import Delete, apply_effects

log = logging.getLogger(__name__)


@dataclass
class ReconcileResult:
    writes: int = 0
    failures: list[str] = field(default_factory=list)  # effects a host refused (retried next time)
    wake_at: float | None = None  # Unix seconds: reconcile again by then


@dataclass
class ControllerLoop:
    settings: Settings = field(default_factory=Settings)
    podgroups: PodGroupSettings = field(default_factory=PodGroupSettings)
    memory: dict[str, JobMemory] = field(default_factory=dict)  # by namespace/name
    # what each Job's last decision saw (resource versions) and when it wanted to look again: a Job whose objects
    # are as they were, with nothing due, is not decided again (the decision would be the same, writing nothing)
    seen: dict[str, tuple[tuple, float | None]] = field(default_factory=dict)

    def reconcile(self, host: Host, now: datetime) -> ReconcileResult:
        result = ReconcileResult()
        jobs = sorted(host.list(JOB), key=lambda j: (namespace_of(j), name_of(j)))
        pods = host.list(POD)
        groups = {(namespace_of(g), name_of(g)): g for g in host.list(PODGROUP)}
        by_owner: dict[str, list[dict]] = defaultdict(list)
        for pod in pods:
            ref = controller_ref(pod)
            if ref is not None and ref.get("kind") == JOB.kind and ref.get("apiVersion") == JOB.api_version:
                by_owner[str(ref.get("uid"))].append(pod)
        commands: dict[tuple[str, str], list[dict]] = defaultdict(list)
        for cmd in host.list(COMMAND):
            target = part(cmd, "target")
            commands[(namespace_of(cmd), str(target.get("name", "")))].append(cmd)
        objects: dict[str, dict[tuple[Kind, str], dict]] = defaultdict(dict)
        for kind in JOB_OWNED:
            for obj in host.list(kind):
                objects[namespace_of(obj)][(kind, name_of(obj))] = obj
        priorities = {name_of(p): int(p.get("value") or 0) for p in host.list(PRIORITY_CLASS)}
        live: set[str] = set()
        for job in jobs:
            ns, name, uid = namespace_of(job), name_of(job), uid_of(job)
            key = f"{ns}/{name}"
            live.add(key)
            mine = commands.pop((ns, name), [])
            group = groups.get((ns, f"{name}-{uid}")) or groups.get((ns, name))  # Volcano < 1.5 named it after the job
            observed = Observed(job=job, pods=by_owner.get(uid, []), podgroup=group, commands=mine,
                                objects=objects[ns], priorities=priorities)
            mark = _fingerprint(observed)
            last = self.seen.get(key)
            if mark is not None and last is not None and last[0] == mark and key in self.memory \
                    and (last[1] is None or last[1] > now.timestamp()):
                result.wake_at = _earliest(result.wake_at, last[1])
                continue
            outcome = decide(observed, self.memory.get(key), now, self.settings)
            applied = apply_effects(host, outcome.effects)
            result.writes += applied.writes
            if applied.failed:
                result.failures.append(f"Job {key}: {applied.failed}")
                log.warning("Job %s: %s (retried at the next reconcile)", key, applied.failed)
                self.memory.pop(key, None)  # look again from scratch: what was applied is seen as new
                self.seen.pop(key, None)
                result.wake_at = _earliest(result.wake_at, now.timestamp() + 1.0)
                continue
            self.memory[key] = outcome.memory
            self.seen[key] = (mark, outcome.wake_at) if mark is not None else ((), outcome.wake_at)
            result.wake_at = _earliest(result.wake_at, outcome.wake_at)
        for key in [k for k in self.memory if k not in live]:
            del self.memory[key]
            self.seen.pop(key, None)
        for (ns, _), stale in sorted(commands.items()):  # Commands for Jobs that do not exist
            for cmd in stale:
                applied = apply_effects(host, [Delete(COMMAND, ns, name_of(cmd))])
                result.writes += applied.writes
        owners = {kind: host.list(kind) for kind in WORKLOAD_OWNERS}
        effects = plain_pod_effects(pods, groups, owners, self.podgroups)
        applied = apply_effects(host, effects)
        result.writes += applied.writes
        if applied.failed:
            result.failures.append(applied.failed)
            result.wake_at = _earliest(result.wake_at, now.timestamp() + 1.0)
        return result


def _version(obj: dict) -> str | None:
    return meta(obj).get("resourceVersion") or None


def _fingerprint(observed: Observed) -> tuple | None:
    """The resource versions of what a Job's decision reads (None when the host gives none)."""
    parts: list = [_version(observed.job)]
    parts += sorted((name_of(p), uid_of(p), _version(p)) for p in observed.pods)
    parts.append(_version(observed.podgroup) if observed.podgroup is not None else "")
    parts.append(tuple(sorted(name_of(c) for c in observed.commands)))
    parts.append(tuple(sorted(observed.priorities.items())))
    if parts[0] is None or any(p[2] is None for p in parts[1:-3]) or parts[-3] is None:
        return None
    return tuple(parts)


def _earliest(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else min(a, b)
