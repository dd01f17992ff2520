"""Admission of Jobs and Commands, as Volcano's validating webhook and admission policy refuse them
(webhooks/admission/jobs/validate admit_job.go and util.go, installer policy/jobs-validating.yaml).

A refused object is one :class:`~scheduler.api.manifests.ManifestError` naming the source, the object
and the field (``jobs.yaml:3: Job default/train: spec.tasks[1].minAvailable: ...``).  The checks run
after the defaults are filled in (the mutating webhook runs first in Kubernetes too), and the first
problem is reported.  Each task's template is checked as the pod it becomes, by the same reader every
pod goes through.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from proto.vocab.quantity import QuantityError, to_canonical
from scheduler.api import names
from scheduler.api.manifests import ManifestError, parse_object
from scheduler.controllers.jobplugins.base import pod_name
from scheduler.controllers.jobplugins.registry import PLUGINS, ArgumentError, build
from scheduler.controllers.jobs import keys
from scheduler.controllers.jobs.spec import Command, Job, Policy, parse_command, parse_job
from scheduler.controllers.kinds import part

ROOT_QUEUE = "root"


@dataclass(frozen=True)
class QueueFacts:
    """What admission reads of a Queue: its state and how many queues name it as parent."""

    state: str = "Open"
    children: int = 0


@dataclass(frozen=True)
class AdmissionContext:
    """What admission may check a Job against; None: that reference is not checked here."""

    queues: Mapping[str, QueueFacts] | None = None
    priority_classes: Collection[str] | None = None
    scheduler_name: str = "scoria"


class _Refuse:
    def __init__(self, source: str, job: Job):
        self.source, self.obj = source, f"Job {job.namespace}/{job.name}"

    def __call__(self, path: str, message: str) -> ManifestError:
        return ManifestError(self.source, self.obj, f"{path}: {message}")


def admit_job(doc: Any, source: str, context: AdmissionContext | None = None) -> Job:
    """The Job ``doc`` describes, with its defaults, if Volcano's admission would let it in; else ManifestError."""
    context = context or AdmissionContext()
    job = parse_job(doc, source, scheduler_name=context.scheduler_name)
    refuse = _Refuse(source, job)
    _check_names(job, refuse)
    spec = job.spec
    if not spec.tasks:
        raise refuse("spec.tasks", "No task specified in job spec")
    _check_topology(spec.network_topology, "spec.networkTopology", refuse)
    seen: dict[str, int] = {}
    for i, task in enumerate(spec.tasks):
        where = f"spec.tasks[{i}]"
        if problem := names.dns1123_label(task.name):
            raise refuse(f"{where}.name", problem)
        if task.name in seen:
            raise refuse(f"{where}.name", f"duplicated task name {task.name} (also spec.tasks[{seen[task.name]}])")
        seen[task.name] = i
        if task.min_available > task.replicas:
            raise refuse(f"{where}.minAvailable", f"'minAvailable' ({task.min_available}) is greater than "
                                                  f"'replicas' ({task.replicas}) in task {task.name}")
        _check_policies(task.policies, f"{where}.policies", refuse)
        last = pod_name(job.name, task.name, max(task.replicas - 1, 0))
        if problem := names.qualified_name(last) or names.dns1123_subdomain(last):
            raise refuse(f"{where}.name", f"its pods would be named like {last!r}, which is not a valid pod name: "
                                          f"{problem}")
        _check_template(job, i, source, refuse)
        _check_partition(task, where, refuse)
    for i, task in enumerate(spec.tasks):
        for j, dep in enumerate(task.depends_on.names if task.depends_on else ()):
            if dep not in seen:
                raise refuse(f"spec.tasks[{i}].dependsOn.name[{j}]", f"the job has no task {dep!r}")
    if spec.min_available > spec.total_replicas:
        raise refuse("spec.minAvailable", f"job 'minAvailable' should not be greater than total replicas in tasks "
                                          f"({spec.min_available} > {spec.total_replicas})")
    _check_policies(spec.policies, "spec.policies", refuse)
    _check_plugins(job, refuse)
    _check_volumes(job, refuse)
    _check_queue(job, context, refuse)
    _check_priority_classes(job, context, refuse)
    if cycle := _dependency_cycle(job):
        raise refuse(f"spec.tasks[{spec.task_index(cycle[0])}].dependsOn",
                     "job has dependencies between tasks, but doesn't form a directed acyclic graph (DAG): "
                     + " -> ".join(cycle))
    return job


def _check_names(job: Job, refuse: _Refuse) -> None:
    if problem := names.dns1123_subdomain(job.name) or names.qualified_name(job.name):
        raise refuse("metadata.name", problem)
    if problem := names.dns1123_label(job.namespace):
        raise refuse("metadata.namespace", problem)
    if job.uid and (problem := names.uid(job.uid)):
        raise refuse("metadata.uid", problem)


def _check_topology(topology: dict | None, where: str, refuse: _Refuse) -> None:
    if topology and topology.get("highestTierAllowed") is not None and topology.get("highestTierName"):
        raise refuse(where, "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology "
                            "simultaneously")


def _check_policies(policies: tuple[Policy, ...], where: str, refuse: _Refuse) -> None:
    """validatePolicies: events or an exit code (not both), known events and actions, no event or exit code
    twice, and ``*`` alone."""
    events: dict[str, int] = {}
    codes: dict[int, int] = {}
    for j, policy in enumerate(policies):
        path = f"{where}[{j}]"
        if policy.events and policy.exit_code is not None:
            raise refuse(path, "must not specify event and exitCode simultaneously")
        if not policy.events and policy.exit_code is None:
            raise refuse(path, "either event and exitCode should be specified")
        if policy.action not in keys.POLICY_ACTIONS:
            raise refuse(f"{path}.action", f"invalid policy action {policy.action!r}; valid actions are "
                                           f"{', '.join(keys.POLICY_ACTIONS)}")
        for event in policy.events:
            if event not in keys.POLICY_EVENTS:
                raise refuse(f"{path}.event", f"invalid policy event {event!r}; valid events are "
                                              f"{', '.join(keys.POLICY_EVENTS)}")
            if event in events:
                raise refuse(f"{path}.event", f"duplicate event {event} across different policy "
                                              f"(also {where}[{events[event]}])")
            events[event] = j
        if policy.exit_code is not None:
            if policy.exit_code == 0:
                raise refuse(f"{path}.exitCode", "0 is not a valid error code")
            if policy.exit_code in codes:
                raise refuse(f"{path}.exitCode", f"duplicate exitCode {policy.exit_code} "
                                                 f"(also {where}[{codes[policy.exit_code]}])")
            codes[policy.exit_code] = j
    if keys.ANY_EVENT in events and len(events) > 1:
        raise refuse(where, "if there's * here, no other policy should be here")


def _check_template(job: Job, index: int, source: str, refuse: _Refuse) -> None:
    """The template as the pod it becomes, read by the pod reader; its errors moved under the task's path."""
    task = job.spec.tasks[index]
    template = task.template
    tmeta = part(template, "metadata")
    where = f"spec.tasks[{index}].template"
    if not isinstance(template.get("spec"), dict):
        raise refuse(f"{where}.spec", "missing: a task's template needs spec.containers")
    doc = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {**tmeta, "name": pod_name(job.name, task.name, 0), "namespace": job.namespace},
           "spec": template["spec"]}
    try:
        parse_object(doc, source)
    except ManifestError as exc:
        detail = f"{where}.{exc.detail}" if exc.detail.startswith(("spec", "metadata")) else f"{where}: {exc.detail}"
        raise ManifestError(source, refuse.obj, detail) from None
    if task.topology_policy and task.topology_policy != "none":
        spec = template["spec"]
        for kind in ("containers", "initContainers"):
            for k, container in enumerate(spec.get(kind) or ()):
                resources = container.get("resources") or {}
                cpu = (resources.get("requests") or {}).get("cpu") or (resources.get("limits") or {}).get("cpu")
                if not _whole_cpus(cpu):
                    raise refuse(f"{where}.spec.{kind}[{k}].resources.requests.cpu",
                                 f"the cpu request isn't an integer (topologyPolicy {task.topology_policy} needs "
                                 "whole CPUs)")


def _whole_cpus(value: Any) -> bool:
    if value is None:
        return False
    try:
        millis = to_canonical("cpu", value)
    except QuantityError:
        return False
    return millis > 0 and millis % 1000 == 0


def _check_partition(task: Any, where: str, refuse: _Refuse) -> None:
    part = task.partition
    if part is None:
        return
    path = f"{where}.partitionPolicy"
    if task.replicas != part.total_partitions * part.partition_size:
        raise refuse(f"{where}.replicas", f"'Replicas' ({task.replicas}) are not equal to "
                                          f"TotalPartitions*PartitionSize ({part.total_partitions * part.partition_size})")
    if part.min_partitions > 0 and part.min_partitions * part.partition_size != task.min_available:
        raise refuse(f"{where}.minAvailable", "'MinAvailable' is not equal to MinPartitions*PartitionSize")
    _check_topology(part.network_topology, f"{path}.networkTopology", refuse)


def _check_plugins(job: Job, refuse: _Refuse) -> None:
    for name, arguments in job.spec.plugins:
        where = f"spec.plugins.{name}"
        if name not in PLUGINS:
            raise refuse(where, f"unable to find job plugin: {name} (known: {', '.join(sorted(PLUGINS))})")
        try:
            plugin = build(name, arguments)
        except ArgumentError as exc:
            raise refuse(where, str(exc)) from None
        if problem := plugin.validate(job):
            raise refuse(*problem)


def _check_volumes(job: Job, refuse: _Refuse) -> None:
    """validateIO: a mount path each, no path twice, a claim name or a claim to create (not both)."""
    paths: set[str] = set()
    for i, volume in enumerate(job.spec.volumes):
        where = f"spec.volumes[{i}]"
        if not volume.mount_path:
            raise refuse(f"{where}.mountPath", "mountPath is required")
        if volume.mount_path in paths:
            raise refuse(f"{where}.mountPath", f"duplicated mountPath: {volume.mount_path}")
        paths.add(volume.mount_path)
        if volume.claim is None and not volume.claim_name:
            raise refuse(where, "either volumeClaim or volumeClaimName must be specified")
        if volume.claim_name:
            if volume.claim is not None:
                raise refuse(where, "conflict: name an existing claim with volumeClaimName, or give a volumeClaim "
                                    "to create, not both")
            if problem := names.dns1123_subdomain(volume.claim_name):
                raise refuse(f"{where}.volumeClaimName", f"invalid VolumeClaimName: {problem}")


def _check_queue(job: Job, context: AdmissionContext, refuse: _Refuse) -> None:
    if context.queues is None:
        return
    name = job.spec.queue
    queue = context.queues.get(name)
    if queue is None:
        raise refuse("spec.queue", f"unable to find job queue {name!r}")
    if queue.state != "Open":
        raise refuse("spec.queue", f"can only submit job to queue with state `Open`, queue `{name}` status is "
                                   f"`{queue.state}`")
    if name == ROOT_QUEUE:
        raise refuse("spec.queue", "can not submit job to root queue")
    if queue.children:
        raise refuse("spec.queue", f"can only submit job to leaf queue, queue `{name}` has {queue.children} "
                                   "child queues")


def _check_priority_classes(job: Job, context: AdmissionContext, refuse: _Refuse) -> None:
    known = context.priority_classes
    if known is None:
        return
    if job.spec.priority_class_name and job.spec.priority_class_name not in known:
        raise refuse("spec.priorityClassName", f"PriorityClass {job.spec.priority_class_name!r} is not defined")
    for i, task in enumerate(job.spec.tasks):
        name = part(task.template, "spec").get("priorityClassName")
        if name and name not in known:
            raise refuse(f"spec.tasks[{i}].template.spec.priorityClassName", f"PriorityClass {name!r} is not defined")


def _dependency_cycle(job: Job) -> list[str] | None:
    """A cycle of dependsOn edges as task names (first repeated at the end), or None when they form a DAG."""
    edges = {t.name: list(t.depends_on.names) if t.depends_on else [] for t in job.spec.tasks}
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        path.append(name)
        for dep in edges.get(name, ()):
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep]
            if state.get(dep) is None and (found := visit(dep)):
                return found
        path.pop()
        state[name] = 2
        return None

    for task in job.spec.tasks:
        if state.get(task.name) is None and (cycle := visit(task.name)):
            return cycle
    return None


def admit_command(doc: Any, source: str) -> Command:
    """A Command naming a Job and an action a policy could name (vcctl's suspend is AbortJob, resume ResumeJob)."""
    command = parse_command(doc, source)
    obj = f"Command {command.namespace}/{command.name}"
    if problem := names.dns1123_subdomain(command.name):
        raise ManifestError(source, obj, f"metadata.name: {problem}")
    if command.action not in keys.POLICY_ACTIONS:
        raise ManifestError(source, obj, f"action: {command.action or 'missing'}; a Command's action is one of "
                                         f"{', '.join(keys.POLICY_ACTIONS)}")
    if command.target_kind != "Job":
        raise ManifestError(source, obj, f"target.kind: the target must be a Job, got {command.target_kind!r}")
    if not command.target_name:
        raise ManifestError(source, obj, "target.name: missing")
    return command


_UPDATE_MESSAGE = ("job updates may not change fields other than `minAvailable`, `tasks[*].replicas` (and "
                   "`tasks[*].minAvailable`) under spec and `priorityClassName`")
_SPEC_JSON = {"scheduler_name": "schedulerName", "queue": "queue", "max_retry": "maxRetry", "policies": "policies",
              "plugins": "plugins", "volumes": "volumes", "ttl_seconds_after_finished": "ttlSecondsAfterFinished",
              "min_success": "minSuccess", "network_topology": "networkTopology", "running_estimate": "runningEstimate"}
_TASK_JSON = {"name": "name", "template": "template", "policies": "policies", "topology_policy": "topologyPolicy",
              "max_retry": "maxRetry", "depends_on": "dependsOn", "partition": "partitionPolicy"}


def admit_job_update(old_doc: Any, new_doc: Any, source: str, context: AdmissionContext | None = None) -> Job:
    """A change to an existing Job, as validateJobUpdate and the admission policy allow it: the new Job must be
    valid, keep its tasks (no task added or removed) and change only the job's minAvailable and
    priorityClassName and each task's replicas and minAvailable (scaling)."""
    context = context or AdmissionContext()
    new = admit_job(new_doc, source, context)
    old = parse_job(old_doc, source, scheduler_name=context.scheduler_name)
    refuse = _Refuse(source, new)
    if len(old.spec.tasks) != len(new.spec.tasks):
        raise refuse("spec.tasks", "job updates may not add or remove tasks")
    for i, (was, now) in enumerate(zip(old.spec.tasks, new.spec.tasks, strict=True)):
        for attr, name in _TASK_JSON.items():
            if getattr(was, attr) != getattr(now, attr):
                raise refuse(f"spec.tasks[{i}].{name}", _UPDATE_MESSAGE)
    for attr, name in _SPEC_JSON.items():
        if getattr(old.spec, attr) != getattr(new.spec, attr):
            raise refuse(f"spec.{name}", _UPDATE_MESSAGE)
    return new
