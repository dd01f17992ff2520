"""Volcano's ``batch.volcano.sh/v1alpha1`` Job and ``bus.volcano.sh/v1alpha1`` Command as typed values.

Field names are Volcano's (volcano.sh/apis batch/v1alpha1 job.go, bus/v1alpha1 commands.go).  Parsing
fills in the defaults Volcano's mutating webhook adds (mutate_job.go): queue ``default``, the scheduler
name, ``maxRetry`` 3 for the job and each task, task names ``default<i>``, a task's ``minAvailable`` as
its replicas, the job's ``minAvailable`` as the sum of its tasks', and the ``svc`` (and for ``mpi`` the
``ssh``) plugin that the distributed-framework plugins need.  The checks of the validating webhook are
in :mod:`scheduler.controllers.jobs.admission`; this module refuses only what cannot be read at all
(wrong types, unknown fields), each with its field path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from scheduler.api.manifests import ManifestError
from scheduler.controllers.jobs import keys
from scheduler.controllers.kinds import part

JOB_API = "batch.volcano.sh/v1alpha1"
COMMAND_API = "bus.volcano.sh/v1alpha1"
INT32_MAX = 2**31 - 1

_SPEC_FIELDS = {"schedulerName", "minAvailable", "volumes", "tasks", "policies", "plugins", "runningEstimate",
                "queue", "maxRetry", "ttlSecondsAfterFinished", "priorityClassName", "minSuccess", "networkTopology"}
_TASK_FIELDS = {"name", "replicas", "minAvailable", "template", "policies", "topologyPolicy", "maxRetry",
                "dependsOn", "partitionPolicy"}
_POLICY_FIELDS = {"action", "event", "events", "exitCode", "timeout"}
_VOLUME_FIELDS = {"mountPath", "volumeClaimName", "volumeClaim"}
_PARTITION_FIELDS = {"totalPartitions", "partitionSize", "networkTopology", "minPartitions"}
_TOPOLOGY_FIELDS = {"mode", "highestTierAllowed", "highestTierName"}
TOPOLOGY_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
NETWORK_TOPOLOGY_MODES = ("hard", "soft")
ITERATIONS = ("any", "all")


@dataclass(frozen=True)
class Policy:
    """A lifecycle policy: on these events (or this exit code), take this action, after ``timeout`` seconds."""

    action: str
    events: tuple[str, ...] = ()  # ``events`` then ``event``, as Volcano's getEventlist joins them
    exit_code: int | None = None
    timeout: float | None = None


@dataclass(frozen=True)
class DependsOn:
    names: tuple[str, ...]
    iteration: str = ""  # "any", "all" or unset (all)


@dataclass(frozen=True)
class PartitionPolicy:
    total_partitions: int
    partition_size: int
    min_partitions: int = 0
    network_topology: dict | None = None


@dataclass(frozen=True)
class Volume:
    mount_path: str
    claim_name: str = ""
    claim: dict | None = None  # a PersistentVolumeClaimSpec for the controller to create


@dataclass(frozen=True)
class Task:
    name: str
    replicas: int
    min_available: int  # defaulted to replicas (or minPartitions × partitionSize) as the webhook does
    template: dict
    policies: tuple[Policy, ...] = ()
    topology_policy: str = ""
    max_retry: int = keys.DEFAULT_MAX_RETRY
    depends_on: DependsOn | None = None
    partition: PartitionPolicy | None = None


@dataclass(frozen=True)
class JobSpec:
    tasks: tuple[Task, ...]
    min_available: int
    scheduler_name: str
    queue: str = keys.DEFAULT_QUEUE
    max_retry: int = keys.DEFAULT_MAX_RETRY
    policies: tuple[Policy, ...] = ()
    plugins: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (name, arguments), in name order
    volumes: tuple[Volume, ...] = ()
    ttl_seconds_after_finished: int | None = None
    priority_class_name: str = ""
    min_success: int | None = None
    network_topology: dict | None = None
    running_estimate: float | None = None

    @property
    def total_replicas(self) -> int:
        return sum(t.replicas for t in self.tasks)

    @property
    def plugin_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.plugins)

    def task(self, name: str) -> Task | None:
        return next((t for t in self.tasks if t.name == name), None)

    def task_index(self, name: str) -> int:
        return next((i for i, t in enumerate(self.tasks) if t.name == name), -1)


@dataclass
class Job:
    """A Job as the controller reads it: identity, the defaulted spec and the raw manifest."""

    namespace: str
    name: str
    uid: str
    spec: JobSpec
    doc: dict
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    created: datetime | None = None
    deleting: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def podgroup_name(self) -> str:
        """``<job>-<uid>``: the name Volcano (since 1.5) gives a Job's PodGroup."""
        return f"{self.name}-{self.uid}"


@dataclass(frozen=True)
class Command:
    namespace: str
    name: str
    action: str
    target_kind: str
    target_name: str
    target_uid: str = ""
    reason: str = ""
    message: str = ""


# -- reading ------------------------------------------------------------------------------------------------
class _Reader:
    def __init__(self, source: str, obj: str):
        self.source, self.obj = source, obj

    def fail(self, path: str, message: str) -> ManifestError:
        return ManifestError(self.source, self.obj, f"{path}: {message}" if path else message)

    def mapping(self, data: dict, path: str, key: str, *, allowed: set[str] | None = None) -> dict:
        value = data.get(key)
        if value is None:
            return {}
        where = f"{path}.{key}" if path else key
        if not isinstance(value, dict):
            raise self.fail(where, f"expected a mapping, got {type(value).__name__}")
        if allowed is not None:
            self.known(value, where, allowed)
        return value

    def known(self, value: dict, path: str, allowed: set[str]) -> None:
        for k in value:
            if k not in allowed:
                raise self.fail(f"{path}.{k}", f"unknown field; {path.rpartition('.')[2] or path} has "
                                               f"{', '.join(sorted(allowed))}")

    def items(self, data: dict, path: str, key: str) -> list:
        value = data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(f"{path}.{key}", f"expected a list, got {type(value).__name__}")
        return value

    def strings(self, data: dict, path: str, key: str, what: str) -> list[str]:
        """The list of strings at ``key`` (none when absent); an item that is no string is ``what`` expected."""
        out = []
        for i, item in enumerate(self.items(data, path, key)):
            if not isinstance(item, str):
                raise self.fail(f"{path}.{key}[{i}]", f"expected {what}, got {item!r}")
            out.append(item)
        return out

    def text(self, data: dict, path: str, key: str, default: str = "") -> str:
        value = data.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.fail(f"{path}.{key}" if path else key, f"expected a string, got {type(value).__name__} {value!r}")
        return value

    def integer(self, data: dict, path: str, key: str, default: int | None = None, *, minimum: int | None = 0,
                maximum: int = INT32_MAX) -> int | None:
        value = data.get(key)
        if value is None:
            return default
        where = f"{path}.{key}"
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(where, f"expected an integer, got {type(value).__name__} {value!r}")
        if minimum is not None and value < minimum:
            raise self.fail(where, f"must be at least {minimum}, got {value}")
        if value > maximum:
            raise self.fail(where, f"must be at most {maximum}, got {value}")
        return value


_DURATION = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """A Go duration (``90s``, ``1h30m``, ``1.5h``, ``300ms``) in seconds; ValueError when it is not one."""
    rest = text.strip()
    sign = -1.0 if rest.startswith("-") else 1.0
    rest = rest.lstrip("+-")
    if rest == "0":
        return 0.0
    if not rest:
        raise ValueError(f"invalid duration {text!r}")
    total, pos = 0.0, 0
    while pos < len(rest):
        match = _DURATION.match(rest, pos)
        if match is None or match.group(1) in ("", "."):
            raise ValueError(f"invalid duration {text!r}: expected a Go duration such as 90s, 5m or 1h30m")
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    return sign * total


def format_duration(seconds: float) -> str:
    """Seconds as Go's time.Duration prints them (``1h2m3s``, ``4m0s``, ``0s``); whole seconds only."""
    whole = int(round(seconds))
    sign, whole = ("-", -whole) if whole < 0 else ("", whole)
    if whole == 0:
        return "0s"
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{sign}{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{sign}{minutes}m{secs}s"
    return f"{sign}{secs}s"


def _policies(r: _Reader, data: dict, path: str) -> tuple[Policy, ...]:
    out = []
    for i, raw in enumerate(r.items(data, path, "policies")):
        where = f"{path}.policies[{i}]"
        if not isinstance(raw, dict):
            raise r.fail(where, f"expected a policy (a mapping), got {type(raw).__name__}")
        r.known(raw, where, _POLICY_FIELDS)
        events = r.strings(raw, where, "events", "an event name")
        event = r.text(raw, where, "event")
        if event:
            events.append(event)
        timeout = None
        if raw.get("timeout") is not None:
            text = r.text(raw, where, "timeout")
            try:
                timeout = parse_duration(text)
            except ValueError as exc:
                raise r.fail(f"{where}.timeout", str(exc)) from None
        exit_code = r.integer(raw, where, "exitCode", minimum=-(2**31))
        out.append(Policy(action=r.text(raw, where, "action"), events=tuple(dict.fromkeys(events)),
                          exit_code=exit_code, timeout=timeout))
    return tuple(out)


def _network_topology(r: _Reader, data: dict, path: str) -> dict | None:
    raw = r.mapping(data, path, "networkTopology", allowed=_TOPOLOGY_FIELDS)
    if not raw:
        return None
    where = f"{path}.networkTopology"
    mode = r.text(raw, where, "mode")
    if mode and mode not in NETWORK_TOPOLOGY_MODES:
        raise r.fail(f"{where}.mode", f"must be hard or soft, got {mode!r}")
    r.integer(raw, where, "highestTierAllowed")
    r.text(raw, where, "highestTierName")
    return dict(raw)


def _task(r: _Reader, raw: Any, index: int) -> Task:
    where = f"spec.tasks[{index}]"
    if not isinstance(raw, dict):
        raise r.fail(where, f"expected a task (a mapping), got {type(raw).__name__}")
    r.known(raw, where, _TASK_FIELDS)
    name = r.text(raw, where, "name") or f"{keys.DEFAULT_TASK_SPEC}{index}"
    replicas = r.integer(raw, where, "replicas", 0) or 0
    template = r.mapping(raw, where, "template")
    depends_on = None
    deps = r.mapping(raw, where, "dependsOn", allowed={"name", "iteration"})
    if deps:
        dwhere = f"{where}.dependsOn"
        names = r.strings(deps, dwhere, "name", "a task name")
        iteration = r.text(deps, dwhere, "iteration")
        if iteration and iteration not in ITERATIONS:
            raise r.fail(f"{dwhere}.iteration", f"must be any or all, got {iteration!r}")
        depends_on = DependsOn(tuple(names), iteration)
    partition = None
    part = r.mapping(raw, where, "partitionPolicy", allowed=_PARTITION_FIELDS)
    if part:
        pwhere = f"{where}.partitionPolicy"
        for required in ("totalPartitions", "partitionSize"):
            if part.get(required) is None:
                raise r.fail(f"{pwhere}.{required}", "required")
        partition = PartitionPolicy(
            total_partitions=r.integer(part, pwhere, "totalPartitions", minimum=1) or 0,
            partition_size=r.integer(part, pwhere, "partitionSize", minimum=1) or 0,
            min_partitions=r.integer(part, pwhere, "minPartitions", 0) or 0,
            network_topology=_network_topology(r, part, pwhere))
    min_available = r.integer(raw, where, "minAvailable")
    if min_available is None:  # the webhook's default
        if partition is not None and partition.min_partitions > 0:
            min_available = partition.min_partitions * partition.partition_size
        else:
            min_available = replicas
    topology = r.text(raw, where, "topologyPolicy")
    if topology and topology not in TOPOLOGY_POLICIES:
        raise r.fail(f"{where}.topologyPolicy", f"must be one of {', '.join(TOPOLOGY_POLICIES)}, got {topology!r}")
    return Task(name=name, replicas=replicas, min_available=min_available, template=template,
                policies=_policies(r, raw, where), topology_policy=topology,
                max_retry=r.integer(raw, where, "maxRetry", 0) or keys.DEFAULT_MAX_RETRY,
                depends_on=depends_on, partition=partition)


def _plugins(r: _Reader, spec: dict) -> dict[str, tuple[str, ...]]:
    plugins: dict[str, tuple[str, ...]] = {}
    for name, args in r.mapping(spec, "spec", "plugins").items():
        where = f"spec.plugins.{name}"
        if args is None:
            args = []
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise r.fail(where, f"expected a list of argument strings, got {args!r}")
        plugins[str(name)] = tuple(args)
    # the webhook's patchDefaultPlugins: the distributed-framework plugins need svc, and mpi needs ssh
    if plugins.keys() & {"tensorflow", "mpi", "pytorch", "ray"}:
        plugins.setdefault("svc", ())
    if "mpi" in plugins:
        plugins.setdefault("ssh", ())
    return plugins


def _volumes(r: _Reader, spec: dict) -> tuple[Volume, ...]:
    out = []
    for i, raw in enumerate(r.items(spec, "spec", "volumes")):
        where = f"spec.volumes[{i}]"
        if not isinstance(raw, dict):
            raise r.fail(where, "expected a volume (a mapping)")
        r.known(raw, where, _VOLUME_FIELDS)
        claim = raw.get("volumeClaim")
        if claim is not None and not isinstance(claim, dict):
            raise r.fail(f"{where}.volumeClaim", "expected a PersistentVolumeClaim spec (a mapping)")
        out.append(Volume(r.text(raw, where, "mountPath"), r.text(raw, where, "volumeClaimName"), claim))
    return tuple(out)


def parse_time(value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    stamp = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


def _metadata(r: _Reader, doc: dict) -> dict:
    metadata = doc.get("metadata")
    if not isinstance(metadata, dict):
        raise r.fail("metadata", "missing")
    if not isinstance(metadata.get("name"), str) or not metadata["name"]:
        raise r.fail("metadata.name", "missing")
    return metadata


def _kind(r: _Reader, doc: dict, api: str, kind: str) -> None:
    if doc.get("kind") != kind:
        raise r.fail("kind", f"expected {kind}, got {doc.get('kind')!r}")
    if doc.get("apiVersion") != api:
        raise r.fail("apiVersion", f"{kind} must have apiVersion {api}, got {doc.get('apiVersion')!r}")


def job_id(doc: Any) -> str:
    metadata = doc.get("metadata") if isinstance(doc, dict) else None
    metadata = metadata if isinstance(metadata, dict) else {}
    name = metadata.get("name") if isinstance(metadata.get("name"), str) else "<unnamed>"
    ns = metadata.get("namespace") if isinstance(metadata.get("namespace"), str) else "default"
    return f"Job {ns or 'default'}/{name}"


def parse_job(doc: Any, source: str, *, scheduler_name: str = "scoria", known: JobSpec | None = None) -> Job:
    """A Job manifest as a :class:`Job` with Volcano's defaults filled in; ManifestError naming the field.
    ``known``: what an earlier call made of this very spec (with this ``scheduler_name``), taken as it is."""
    r = _Reader(source, job_id(doc))
    if not isinstance(doc, dict):
        raise r.fail("", f"expected a Job (a mapping), got {type(doc).__name__}")
    _kind(r, doc, JOB_API, "Job")
    metadata = _metadata(r, doc)
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        raise r.fail("spec", "missing: a Job needs spec.tasks")
    job_spec = known if known is not None else _job_spec(r, spec, scheduler_name)
    labels = part(metadata, "labels")
    notes = part(metadata, "annotations")
    try:
        created = parse_time(metadata.get("creationTimestamp"))
    except ValueError:
        raise r.fail("metadata.creationTimestamp", "expected an RFC 3339 time") from None
    return Job(namespace=str(metadata.get("namespace") or "default"), name=metadata["name"],
               uid=str(metadata.get("uid") or ""), spec=job_spec, doc=doc,
               labels={str(k): str(v) for k, v in labels.items()},
               annotations={str(k): str(v) for k, v in notes.items()}, created=created,
               deleting=metadata.get("deletionTimestamp") is not None)


def _job_spec(r: _Reader, spec: dict, scheduler_name: str) -> JobSpec:
    r.known(spec, "spec", _SPEC_FIELDS)
    tasks = tuple(_task(r, raw, i) for i, raw in enumerate(r.items(spec, "spec", "tasks")))
    min_available = r.integer(spec, "spec", "minAvailable", 0) or sum(t.min_available for t in tasks)
    ttl = r.integer(spec, "spec", "ttlSecondsAfterFinished")
    estimate = None
    if spec.get("runningEstimate") is not None:
        try:
            estimate = parse_duration(r.text(spec, "spec", "runningEstimate"))
        except ValueError as exc:
            raise r.fail("spec.runningEstimate", str(exc)) from None
    return JobSpec(
        tasks=tasks, min_available=min_available,
        scheduler_name=r.text(spec, "spec", "schedulerName") or scheduler_name,
        queue=r.text(spec, "spec", "queue") or keys.DEFAULT_QUEUE,
        max_retry=r.integer(spec, "spec", "maxRetry", 0) or keys.DEFAULT_MAX_RETRY,
        policies=_policies(r, spec, "spec"), plugins=tuple(sorted(_plugins(r, spec).items())),
        volumes=_volumes(r, spec), ttl_seconds_after_finished=ttl,
        priority_class_name=r.text(spec, "spec", "priorityClassName"),
        min_success=r.integer(spec, "spec", "minSuccess", minimum=1),
        network_topology=_network_topology(r, spec, "spec"), running_estimate=estimate)


def parse_command(doc: Any, source: str) -> Command:
    """A Command manifest; ManifestError naming the field (what it may ask is checked in admission)."""
    metadata = doc.get("metadata") if isinstance(doc, dict) else None
    metadata = metadata if isinstance(metadata, dict) else {}
    name = metadata.get("name") if isinstance(metadata.get("name"), str) else "<unnamed>"
    r = _Reader(source, f"Command {metadata.get('namespace') or 'default'}/{name}")
    if not isinstance(doc, dict):
        raise r.fail("", f"expected a Command (a mapping), got {type(doc).__name__}")
    _kind(r, doc, COMMAND_API, "Command")
    _metadata(r, doc)
    target = doc.get("target")
    if not isinstance(target, dict):
        raise r.fail("target", "missing: a Command names its target Job (an owner reference)")
    return Command(namespace=str(metadata.get("namespace") or "default"), name=str(name),
                   action=r.text(doc, "", "action"), target_kind=r.text(target, "target", "kind"),
                   target_name=r.text(target, "target", "name"), target_uid=r.text(target, "target", "uid"),
                   reason=r.text(doc, "", "reason"), message=r.text(doc, "", "message"))
