"""A pod manifest as the local runtime runs it: validated once, at the edge.

:func:`parse_pod` turns the pod JSON a START action carries into a
:class:`PodSpec` — each container's argv, environment, working directory and
resource figures — or raises :class:`SpecError` with a reason and a message
naming the pod and the field.  Pure: no files, no processes.

What runs: each container's ``command`` followed by its ``args`` (the image is
ignored, so a container needs a ``command``: without one it is a StartError).
``$(VAR)`` references in command, args and env values are expanded as the
kubelet does (``$$`` escapes; unknown references stay as written).  Env
entries are plain ``value``s, or ``valueFrom.fieldRef`` for the pod's own
metadata (name, namespace, uid, labels['k'], annotations['k']) and
``spec.nodeName``/``spec.serviceAccountName``; anything else (secrets,
config maps, resource fields, ``envFrom``) and init or ephemeral containers
are refused as Unsupported.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from agent.embedded.device_env import device_env
from agent.pods import PodInfo, pod_info
from proto.errors import InputError
from proto.vocab.qos import BATCH_CPU, BATCH_MEMORY
from proto.vocab.quantity import QuantityError, to_canonical

INVALID, UNSUPPORTED, START_ERROR = "InvalidPod", "Unsupported", "StartError"
RESTART_POLICIES = ("Always", "OnFailure", "Never")
DEFAULT_GRACE = 30
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")            # container names (DNS label)
_SAFE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,252})$")       # uid, namespace, name: safe in file names
_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
_FIELD = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")


class SpecError(InputError):
    """A pod the runtime will not run: ``reason`` (InvalidPod, Unsupported, StartError) and a message."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class ContainerSpec:
    name: str
    argv: tuple[str, ...]
    env: dict[str, str]
    working_dir: str = ""                  # "" : the runtime's default
    cpu_request: int = 0                   # millicores (defaults to the limit, as the API server does)
    cpu_limit: int | None = None           # millicores; None: no limit
    memory_limit: int | None = None        # bytes; None: no limit
    batch_cpu: int | None = None           # kubernetes.io/batch-cpu (limit, else request), millicores
    batch_memory: int | None = None        # kubernetes.io/batch-memory (limit, else request), bytes


@dataclass(frozen=True)
class PodSpec:
    uid: str
    namespace: str
    name: str
    info: PodInfo
    restart_policy: str = "Always"
    grace_seconds: float = DEFAULT_GRACE
    containers: tuple[ContainerSpec, ...] = ()
    manifest: dict = field(default_factory=dict, compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def safe_name(value: str) -> bool:
    """Whether ``value`` may name a file (uids, namespaces and names become file and directory names)."""
    return bool(_SAFE.match(value)) and ".." not in value


def load_manifest(pod_json: str) -> dict:
    """The pod JSON as a dict; SpecError (InvalidPod) if it is not a JSON object."""
    try:
        doc = json.loads(pod_json)
    except (TypeError, ValueError) as exc:
        raise SpecError(INVALID, f"pod JSON does not parse: {exc}") from None
    if not isinstance(doc, dict):
        raise SpecError(INVALID, f"pod JSON must be an object, got {type(doc).__name__}")
    return doc


def parse_pod(doc: dict, *, uid: str = "", node_name: str = "", base_env: Mapping[str, str] | None = None) -> PodSpec:
    """A runnable PodSpec from a pod manifest; ``uid``, if given, must match ``metadata.uid`` when that is set."""
    meta = _mapping(doc.get("metadata"), "metadata")
    spec = _mapping(doc.get("spec"), "spec")
    uid = _identity(meta, uid)
    namespace = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or "")
    for what, value in (("metadata.namespace", namespace), ("metadata.name", name)):
        if not safe_name(value):
            raise SpecError(INVALID, f"{what}: {value!r} is not a valid name")
    for unsupported in ("initContainers", "ephemeralContainers"):
        if spec.get(unsupported):
            raise SpecError(UNSUPPORTED, f"spec.{unsupported}: not run by the embedded runtime")
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise SpecError(INVALID, "spec.containers: a pod needs at least one container")
    policy = spec.get("restartPolicy") or "Always"
    if policy not in RESTART_POLICIES:
        raise SpecError(INVALID, f"spec.restartPolicy: must be one of {', '.join(RESTART_POLICIES)}, got {policy!r}")
    grace = spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE)
    if grace is None:
        grace = DEFAULT_GRACE
    if isinstance(grace, bool) or not isinstance(grace, (int, float)) or grace < 0:
        raise SpecError(INVALID, f"spec.terminationGracePeriodSeconds: must be a number >= 0, got {grace!r}")
    try:
        info = pod_info(doc)
        devices = device_env(info.annotations)
    except ValueError as exc:
        raise SpecError(INVALID, str(exc)) from None
    info = replace(info, uid=uid)
    own = {"SCORIA_POD_NAME": name, "SCORIA_POD_NAMESPACE": namespace, "SCORIA_POD_UID": uid}
    fields = _fields(meta, spec, uid, namespace, name, node_name)
    seen: set[str] = set()
    parsed = []
    for i, c in enumerate(containers):
        c = _mapping(c, f"spec.containers[{i}]")
        cname = str(c.get("name") or "")
        if not _LABEL.match(cname) or len(cname) > 63:
            raise SpecError(INVALID, f"spec.containers[{i}].name: {cname!r} is not a valid container name")
        if cname in seen:
            raise SpecError(INVALID, f"spec.containers[{i}].name: {cname!r} is used twice")
        seen.add(cname)
        parsed.append(_container(c, cname, dict(base_env or {}), devices, own, fields))
    return PodSpec(uid, namespace, name, info, policy, float(grace), tuple(parsed), doc)


def _identity(meta: dict, uid: str) -> str:
    own = str(meta.get("uid") or "")
    if own and uid and own != uid:
        raise SpecError(INVALID, f"metadata.uid {own!r} is not the pod_uid {uid!r} the action names")
    uid = own or uid
    if not safe_name(uid):
        raise SpecError(INVALID, f"metadata.uid: {uid!r} is not a valid uid")
    return uid


def _container(c: dict, name: str, env: dict[str, str], devices: dict[str, str], own: dict[str, str],
               fields: dict[str, str]) -> ContainerSpec:
    where = f"container {name}"
    command = _strings(c.get("command"), f"{where}: command")
    args = _strings(c.get("args"), f"{where}: args")
    if c.get("envFrom"):
        raise SpecError(UNSUPPORTED, f"{where}: envFrom is not supported by the embedded runtime")
    for k, entry in enumerate(c.get("env") or []):
        entry = _mapping(entry, f"{where}: env[{k}]")
        var = entry.get("name")
        if not isinstance(var, str) or not var:
            raise SpecError(INVALID, f"{where}: env[{k}].name must be a non-empty string")
        env[var] = _env_value(entry, f"{where}: env {var}", env, fields)
    env.update(devices)
    env.update(own)
    if not command:
        raise SpecError(START_ERROR, f"{where}: no command; the embedded runtime ignores images, so every "
                                     "container needs `command` (and optional `args`)")
    argv = tuple(expand(a, env) for a in command + args)
    working_dir = c.get("workingDir") or ""
    if not isinstance(working_dir, str):
        raise SpecError(INVALID, f"{where}: workingDir must be a string")
    res = _mapping(c.get("resources"), f"{where}: resources")
    requests = _mapping(res.get("requests"), f"{where}: resources.requests")
    limits = _mapping(res.get("limits"), f"{where}: resources.limits")
    cpu_limit = _quantity(limits, "cpu", where)
    cpu_request = _quantity(requests, "cpu", where)
    batch_cpu = _quantity(limits, BATCH_CPU, where)
    batch_memory = _quantity(limits, BATCH_MEMORY, where)
    return ContainerSpec(
        name, argv, env, working_dir,
        cpu_request=cpu_request if cpu_request is not None else (cpu_limit or 0),
        cpu_limit=cpu_limit, memory_limit=_quantity(limits, "memory", where),
        batch_cpu=batch_cpu if batch_cpu is not None else _quantity(requests, BATCH_CPU, where),
        batch_memory=batch_memory if batch_memory is not None else _quantity(requests, BATCH_MEMORY, where))


def _env_value(entry: dict, where: str, env: dict[str, str], fields: dict[str, str]) -> str:
    if "valueFrom" not in entry or entry.get("valueFrom") is None:
        value = entry.get("value", "")
        if not isinstance(value, str):
            raise SpecError(INVALID, f"{where}: value must be a string, got {value!r}")
        return expand(value, env)
    source = entry["valueFrom"]
    ref = source.get("fieldRef") if isinstance(source, dict) else None
    path = ref.get("fieldPath") if isinstance(ref, dict) else None
    if not isinstance(path, str):
        kinds = ", ".join(sorted(source)) if isinstance(source, dict) else repr(source)
        raise SpecError(UNSUPPORTED, f"{where}: valueFrom {kinds} is not supported by the embedded runtime "
                                     "(plain values and fieldRef to the pod's metadata only)")
    if path not in fields:
        raise SpecError(UNSUPPORTED, f"{where}: fieldRef {path!r} is not supported by the embedded runtime")
    return fields[path]


def _fields(meta: dict, spec: dict, uid: str, namespace: str, name: str, node_name: str) -> dict[str, str]:
    """The downward API's fieldRef paths the runtime can answer."""
    out = {"metadata.name": name, "metadata.namespace": namespace, "metadata.uid": uid,
           "spec.nodeName": str(spec.get("nodeName") or node_name),
           "spec.serviceAccountName": str(spec.get("serviceAccountName") or "default")}
    for kind in ("labels", "annotations"):
        for k, v in (meta.get(kind) or {}).items():
            out[f"metadata.{kind}['{k}']"] = str(v)
    return _Fields(out)


class _Fields(dict[str, str]):
    """fieldRef paths; a label or annotation the pod lacks reads as "" (as the downward API gives it)."""

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or bool(isinstance(key, str) and _FIELD.match(key))

    def __getitem__(self, key: str) -> str:
        return dict.get(self, key, "")


def expand(text: str, env: Mapping[str, str]) -> str:
    """The kubelet's ``$(VAR)`` expansion: defined variables replaced, ``$$`` -> ``$``, others left alone."""
    def one(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))
    return _REF.sub(one, text)


def _strings(value: object, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpecError(INVALID, f"{where}: must be a list of strings")
    return list(value)


def _mapping(value: object, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError(INVALID, f"{where}: must be an object, got {type(value).__name__}")
    return value


def _quantity(values: dict, resource: str, where: str) -> int | None:
    if values.get(resource) is None:
        return None
    try:
        return to_canonical(resource, values[resource])
    except QuantityError as exc:
        raise SpecError(INVALID, f"{where}: {resource}: {exc}") from None
