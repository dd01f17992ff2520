"""What a pod counts against a quota, and the minResources of a Job's PodGroup, as Volcano computes them.

Volcano writes a PodGroup's ``minResources`` in Kubernetes quota names (the quota evaluator's pod usage:
``pods``, ``count/pods``, ``cpu`` and ``requests.cpu``, ``limits.cpu``, the same for memory and
ephemeral storage, ``hugepages-*``, and ``requests.<name>`` plus ``<name>`` for an extended resource such
as ``nvidia.com/gpu``); Scoria's PodGroup reader understands those names.  Amounts here are canonical
integers (millicores, bytes, counts) until :func:`format_resources` writes them as quantities.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from proto.vocab.quantity import QuantityError, format_quantity, to_canonical
from scheduler.controllers.jobs.spec import Job, Task
from scheduler.controllers.kinds import part

_COMPUTE = ("cpu", "memory", "ephemeral-storage")


def _container_resources(container: dict, which: str) -> dict[str, int]:
    resources = part(container, "resources")
    raw = part(resources, which)
    out: dict[str, int] = {}
    for name, value in raw.items():
        try:
            out[str(name)] = to_canonical(str(name), value)
        except QuantityError:
            continue  # admission refuses such a template; a stored one is read as best it can be
    if which == "requests":  # Kubernetes defaults a missing request to the limit
        for name, amount in _container_resources(container, "limits").items():
            out.setdefault(name, amount)
    return out


def _pod_total(spec: dict, which: str) -> dict[str, int]:
    """A pod's requests (or limits): its containers' sum, at least its largest init container's, plus overhead."""
    total: dict[str, int] = {}
    for container in spec.get("containers") or ():
        if isinstance(container, dict):
            for name, amount in _container_resources(container, which).items():
                total[name] = total.get(name, 0) + amount
    for container in spec.get("initContainers") or ():
        if isinstance(container, dict):
            for name, amount in _container_resources(container, which).items():
                total[name] = max(total.get(name, 0), amount)
    for name, value in (spec.get("overhead") or {}).items():
        try:
            total[name] = total.get(name, 0) + to_canonical(name, value)
        except QuantityError:
            continue
    return total


def _native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def pod_usage(spec: dict) -> dict[str, int]:
    """What one pod of this spec counts against a quota (quota evaluator's PodUsageFunc, plus the bare names
    Volcano adds for extended resources)."""
    requests, limits = _pod_total(spec, "requests"), _pod_total(spec, "limits")
    usage = {"count/pods": 1, "pods": 1}
    for name in _COMPUTE:
        if name in requests:
            usage[name] = usage[f"requests.{name}"] = requests[name]
        if name in limits:
            usage[f"limits.{name}"] = limits[name]
    for name, amount in requests.items():
        if name.startswith("hugepages-"):
            usage[name] = usage[f"requests.{name}"] = amount
        elif not _native(name) and not name.startswith("requests."):
            usage[f"requests.{name}"] = usage[name] = amount
    return usage


def _times(usage: Mapping[str, int], count: int, into: dict[str, int]) -> None:
    if count <= 0:
        return
    for name, amount in usage.items():
        into[name] = into.get(name, 0) + amount * count


def min_resources(job: Job, priorities: Mapping[str, int]) -> dict[str, int]:
    """The PodGroup's minResources (calcPGMinResources): with a job minimum below the tasks' minimums together,
    what its first minAvailable pods need; else what the tasks' minimums and then their other replicas need,
    tasks by their pods' priority class, highest first."""
    tasks, want = job.spec.tasks, job.spec.min_available
    if want < sum(t.min_available for t in tasks):
        return first_count_resources(tasks, want, priorities)
    return group_min_resources(tasks, want, priorities)


def _by_priority(tasks: Sequence[Task], priorities: Mapping[str, int]) -> list[Task]:
    return sorted(tasks, key=lambda t: -_priority(t, priorities))  # stable: equal priorities keep spec order


def first_count_resources(tasks: Sequence[Task], count: int, priorities: Mapping[str, int]) -> dict[str, int]:
    """What the first ``count`` pods need, task by task (TasksPriority.CalcFirstCountResources)."""
    out: dict[str, int] = {}
    for task in _by_priority(tasks, priorities):
        take = min(count, task.replicas)
        _times(task_usage(task), take, out)
        count -= take
        if count <= 0:
            break
    return out


def group_min_resources(tasks: Sequence[Task], job_min: int, priorities: Mapping[str, int]) -> dict[str, int]:
    """Every task's minimum as far as ``job_min`` goes, then replicas beyond the minimums up to ``job_min``
    (TasksPriority.CalcPGMinResources)."""
    ordered = _by_priority(tasks, priorities)
    out: dict[str, int] = {}
    count = 0
    for task in ordered:
        take = min(task.min_available, job_min - count)
        _times(task_usage(task), take, out)
        count += take
        if count >= job_min:
            return out
    left = job_min - count
    for task in ordered:
        spare = task.replicas - task.min_available
        if spare == 0:
            continue
        take = min(spare, left)
        _times(task_usage(task), take, out)
        left -= take
        if left <= 0:
            break
    return out


def task_usage(task: Task) -> dict[str, int]:
    """:func:`pod_usage` of the task's template, worked out once per Task (which, like its template, is not
    changed once read: the controller keeps a Job's parsed spec while its text stays the same).  Read-only."""
    usage = task.__dict__.get(_USAGE)
    if usage is None:
        usage = pod_usage(_spec(task))
        object.__setattr__(task, _USAGE, usage)  # remembered beside the frozen fields (not one of them)
    return usage


_USAGE = "_pod_usage"


def _spec(task: Task) -> dict:
    spec = task.template.get("spec")
    return spec if isinstance(spec, dict) else {}


def _priority(task: Task, priorities: Mapping[str, int]) -> int:
    return priorities.get(str(_spec(task).get("priorityClassName") or ""), 0)


def _base(name: str) -> str:
    for prefix in ("requests.", "limits."):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def format_resources(amounts: Mapping[str, int]) -> dict[str, str]:
    """Canonical amounts as quantity strings (``150m``, ``1Gi``, ``2``), in name order."""
    out = {}
    for name in sorted(amounts):
        base = _base(name)
        out[name] = format_quantity(base, amounts[name]) if base in _COMPUTE or base.startswith("hugepages-") \
            else str(amounts[name])
    return out


def parse_resources(raw: Mapping[str, object] | None) -> dict[str, int]:
    """A minResources map back into canonical amounts (unreadable entries left out), to compare with ours."""
    out = {}
    for name, value in (raw or {}).items():
        try:
            out[str(name)] = to_canonical(_base(str(name)), value)
        except QuantityError:
            continue
    return out

