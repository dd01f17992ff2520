"""What a Job plugin is, and what plugins share: Go-style flag arguments, the objects a plugin may
make for its Job, and the names every plugin derives from a Job (pod names, host names).

A plugin declares its flags (name, type, default) as Volcano's plugin does on its ``flag.FlagSet``;
its arguments (``spec.plugins.<name>: ["--port=5000"]``) are parsed with Go's flag rules.  Volcano
only logs an argument it cannot parse and goes on with the defaults; Scoria refuses the Job at
apply instead, naming the argument (an unnoticed typo would silently change the job's wiring).

Hooks, as Volcano's PluginInterface: :meth:`JobPlugin.on_pod_create` edits each new pod's manifest;
:meth:`JobPlugin.add_objects` runs when the job starts (OnJobAdd), :meth:`JobPlugin.delete_objects`
when it is killed (OnJobDelete), :meth:`JobPlugin.on_job_update` on every later sync (OnJobUpdate).
The ``plugin-<name>`` bookkeeping in ``status.controlledResources`` is the controller's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from proto.errors import InputError
from scheduler.controllers.jobs import keys
from scheduler.controllers.jobs.spec import Job, Task
from scheduler.controllers.kinds import Kind


@dataclass(frozen=True)
class Flag:
    type: type  # str, int or bool
    default: Any
    help: str


class ArgumentError(InputError):
    """A plugin argument that is not one of the plugin's flags, or not of the flag's type."""


_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def _convert(name: str, flag: Flag, text: str) -> Any:
    if flag.type is bool:
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ArgumentError(f"invalid boolean value {text!r} for flag -{name}")
    if flag.type is int:
        try:
            return int(text, 0)
        except ValueError:
            raise ArgumentError(f"invalid value {text!r} for flag -{name}: expected an integer") from None
    return text


def parse_flags(flags: dict[str, Flag], arguments: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """Go's flag.FlagSet.Parse over ``arguments``: ``-name``, ``--name``, ``--name=value``, ``--name value``
    (not for booleans); ``--`` ends the flags.  Unknown flags and stray arguments are refused."""
    values = {name: flag.default for name, flag in flags.items()}
    args = list(arguments)
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            if i < len(args):
                raise ArgumentError(f"unexpected argument {args[i]!r} after '--' (it is not a flag)")
            break
        if len(arg) < 2 or not arg.startswith("-") or arg.startswith("---"):
            raise ArgumentError(f"argument {arg!r} is not a flag (expected --name or --name=value)")
        body = arg.lstrip("-")
        name, has_value, value = body.partition("=")
        if not name or name.startswith("="):
            raise ArgumentError(f"bad flag syntax: {arg}")
        flag = flags.get(name)
        if flag is None:
            known = ", ".join(f"--{n}" for n in sorted(flags)) or "none"
            raise ArgumentError(f"flag provided but not defined: -{name} (this plugin's flags: {known})")
        if not has_value and flag.type is not bool:
            if i >= len(args):
                raise ArgumentError(f"flag needs an argument: -{name}")
            value, i = args[i], i + 1
        values[name] = True if (flag.type is bool and not has_value) else _convert(name, flag, value)
    return values


class JobObjects(Protocol):
    """The objects of one Job that a plugin may read, create, update and delete (in the Job's namespace)."""

    namespace: str

    def get(self, kind: Kind, name: str) -> dict | None: ...

    def create(self, obj: dict) -> None:
        """Create ``obj`` unless an object of its kind and name exists (owned by the Job)."""
        ...

    def create_or_update(self, obj: dict, same: Callable[[dict, dict], bool]) -> None:
        """Create ``obj``, or update the existing one unless ``same(existing, obj)``."""
        ...

    def delete(self, kind: Kind, name: str) -> None: ...

    def key_pair(self) -> tuple[str, str]:
        """A new RSA key pair: (private key PEM, public key in authorized_keys form)."""
        ...


class JobPlugin:
    """One Job plugin.  Subclasses set ``name`` and ``flags`` and override the hooks they use."""

    name: ClassVar[str] = ""
    flags: ClassVar[dict[str, Flag]] = {}

    def __init__(self, arguments: tuple[str, ...] | list[str] = ()) -> None:
        self.arguments = tuple(arguments)
        self.args = parse_flags(self.flags, self.arguments)

    def validate(self, job: Job) -> tuple[str, str] | None:
        """A problem with the Job this plugin cannot work with: (field path, message); None when fine."""
        return None

    def on_pod_create(self, pod: dict, job: Job) -> None:
        """Edit a new pod's manifest before it is created."""

    def add_objects(self, job: Job, objects: JobObjects) -> None:
        """Make what the Job needs (Volcano's OnJobAdd, past its once-only check)."""

    def delete_objects(self, job: Job, objects: JobObjects) -> None:
        """Remove what :meth:`add_objects` made (Volcano's OnJobDelete, past its check)."""

    def on_job_update(self, job: Job, objects: JobObjects) -> None:
        """Bring what the Job needs up to date with its spec (Volcano's OnJobUpdate)."""


# -- names every plugin derives ------------------------------------------------------------------------------
def pod_name(job_name: str, task_name: str, index: int) -> str:
    """``<job>-<task>-<index>`` (jobhelpers.MakePodName)."""
    return f"{job_name}-{task_name}-{index}"


def task_key(pod: dict) -> str:
    """A pod's task (its ``volcano.sh/task-spec`` annotation, ``default`` when none)."""
    notes = (pod.get("metadata") or {}).get("annotations") or {}
    return notes.get(keys.TASK_SPEC) or keys.DEFAULT_TASK_SPEC


def pod_index(pod: dict) -> str:
    """The index at the end of a pod's name (jobhelpers.GetPodIndexUnderTask), "" when there is none."""
    parts = str((pod.get("metadata") or {}).get("name", "")).split("-")
    return parts[-1] if len(parts) >= 3 else ""


def host_of(task: Task, job_name: str, index: int) -> tuple[str, str]:
    """(hostname, subdomain) of a task's pod: the template's, else the pod name and the job name."""
    spec = task.template.get("spec") or {}
    return (spec.get("hostname") or pod_name(job_name, task.name, index)), (spec.get("subdomain") or job_name)


def domain_name(task: Task, job_name: str, index: int) -> str:
    """``hostname.subdomain`` (jobhelpers.MakeDomainName): the name other pods reach it by."""
    hostname, subdomain = host_of(task, job_name, index)
    return f"{hostname}.{subdomain}"


def task_hosts(task: Task, job_name: str) -> list[str]:
    """Every pod's domain name; only one when the template fixes the hostname (svc GenerateHosts)."""
    hosts = []
    for i in range(task.replicas):
        hosts.append(domain_name(task, job_name, i))
        if (task.template.get("spec") or {}).get("hostname"):
            break
    return hosts


def containers(pod: dict, *, init: bool = True) -> list[dict]:
    """The pod's containers, then (with ``init``) its init containers, as the manifest holds them."""
    spec = pod.setdefault("spec", {})
    out = list(spec.get("containers") or [])
    if init:
        out += list(spec.get("initContainers") or [])
    return out


def add_env(container: dict, *entries: dict) -> None:
    container.setdefault("env", []).extend(entries)


def open_port(container: dict, port: int, name: str) -> None:
    """Add a container port unless the container already exposes that port number."""
    ports = container.setdefault("ports", [])
    if not any(p.get("containerPort") == port for p in ports if isinstance(p, dict)):
        ports.append({"name": name, "containerPort": port})
