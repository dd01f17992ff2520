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

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from agent.embedded.device_env import device_env
from agent.embedded.podnet import PodAddress
from agent.embedded.volumes import CONFIG_ERROR, Volume, VolumeError, VolumeMount, parse_mounts, parse_volumes
from agent.pods import PodInfo, pod_info
from proto.errors import InputError
from proto.vocab.podcontext import CONFIGMAPS, HOSTS, NETWORK, SECRETS, context_of
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
    mounts: tuple[VolumeMount, ...] = ()


Names = tuple[tuple[str, tuple[str, ...]], ...]  # (address, names), as /etc/hosts lists them


@dataclass(frozen=True)
class Network:
    """The pod's network identity: on the host's network or its own, its names and the names it resolves."""

    host_network: bool = True
    hostname: str = ""                     # spec.hostname, else the pod name
    subdomain: str = ""
    address: PodAddress | None = None      # from the START's context (None: none given; host network)
    hosts: Names = ()                      # the namespace's pods and Services
    aliases: Names = ()                    # spec.hostAliases


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
    network: Network = field(default_factory=Network)
    volumes: dict[str, Volume] = field(default_factory=dict, compare=False)

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
    context = context_of(doc)
    refs = _References(_objects(context, CONFIGMAPS), _objects(context, SECRETS))
    network = _network(spec, name, context)
    fields = _fields(meta, spec, uid, namespace, name, node_name)
    if network.address is not None:
        ip = network.address.gateway if network.host_network else network.address.ip
        fields.update({"status.podIP": ip, "status.podIPs": ip, "status.hostIP": network.address.gateway})
    try:
        volumes = parse_volumes(spec, refs.config_maps, refs.secrets)
    except VolumeError as exc:
        raise SpecError(exc.reason, exc.message) from None
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
        try:
            mounts = parse_mounts(c, volumes, f"container {cname}")
        except VolumeError as exc:
            raise SpecError(exc.reason, exc.message) from None
        parsed.append(replace(_container(c, cname, dict(base_env or {}), devices, own, fields, refs), mounts=mounts))
    return PodSpec(uid, namespace, name, info, policy, float(grace), tuple(parsed), doc, network, volumes)


@dataclass(frozen=True)
class _References:
    config_maps: dict[str, dict]
    secrets: dict[str, dict]


def _objects(context: dict, section: str) -> dict[str, dict]:
    value = context.get(section)
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, dict)}


def _network(spec: dict, name: str, context: dict) -> Network:
    """What the pod is on the network: ``hostNetwork``, its names, its address (context), what it resolves."""
    host_network = spec.get("hostNetwork", False)
    if not isinstance(host_network, bool):
        raise SpecError(INVALID, f"spec.hostNetwork: must be true or false, got {host_network!r}")
    hostname, subdomain = spec.get("hostname") or name, spec.get("subdomain") or ""
    for what, value in (("spec.hostname", hostname), ("spec.subdomain", subdomain)):
        if not isinstance(value, str) or (value and (not _LABEL.match(value) or len(value) > 63)):
            raise SpecError(INVALID, f"{what}: {value!r} is not a DNS-1123 label")
    address = None
    if context.get(NETWORK) is not None:
        try:
            address = PodAddress.parse(context[NETWORK])
        except ValueError as exc:
            raise SpecError(INVALID, str(exc)) from None
    return Network(host_network, hostname, subdomain, address, _names(context.get(HOSTS), "scoria.hosts"),
                   _aliases(spec.get("hostAliases")))


def _names(value: object, where: str) -> Names:
    if value is None:
        return ()
    out = []
    if isinstance(value, list):
        for entry in value:
            if (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                    and isinstance(entry[1], list) and all(isinstance(n, str) for n in entry[1])):
                out.append((entry[0], tuple(entry[1])))
                continue
            break
        else:
            return _checked(tuple(out), where)
    raise SpecError(INVALID, f"{where}: expected a list of [address, [names]]")


def _aliases(value: object) -> Names:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise SpecError(INVALID, "spec.hostAliases: must be a list")
    out = []
    for k, entry in enumerate(value):
        entry = _mapping(entry, f"spec.hostAliases[{k}]")
        ip, names = entry.get("ip"), entry.get("hostnames") or []
        if not isinstance(ip, str) or not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise SpecError(INVALID, f"spec.hostAliases[{k}]: needs an ip and a list of hostnames")
        out.append((ip, tuple(names)))
    return _checked(tuple(out), "spec.hostAliases")


_HOSTS_WORD = re.compile(r"^[A-Za-z0-9:._-]{1,253}$")


def _checked(names: Names, where: str) -> Names:
    """Addresses and names a hosts file can hold (no spaces, newlines or comments smuggled in)."""
    for ip, hosts in names:
        for word in (ip, *hosts):
            if not _HOSTS_WORD.match(word):
                raise SpecError(INVALID, f"{where}: {word[:60]!r} cannot be written into a hosts file")
    return names


def _identity(meta: dict, uid: str) -> str:
    own = str(meta.get("uid") or "")
    if own and uid and own != uid:
        raise SpecError(INVALID, f"metadata.uid {own!r} is not the pod_uid {uid!r} the action names")
    uid = own or uid
    if not safe_name(uid):
        raise SpecError(INVALID, f"metadata.uid: {uid!r} is not a valid uid")
    return uid


def _container(c: dict, name: str, env: dict[str, str], devices: dict[str, str], own: dict[str, str],
               fields: dict[str, str], refs: _References) -> ContainerSpec:
    where = f"container {name}"
    command = _strings(c.get("command"), f"{where}: command")
    args = _strings(c.get("args"), f"{where}: args")
    for k, source in enumerate(c.get("envFrom") or []):
        env.update(_env_from(_mapping(source, f"{where}: envFrom[{k}]"), f"{where}: envFrom[{k}]", refs))
    for k, entry in enumerate(c.get("env") or []):
        entry = _mapping(entry, f"{where}: env[{k}]")
        var = entry.get("name")
        if not isinstance(var, str) or not var:
            raise SpecError(INVALID, f"{where}: env[{k}].name must be a non-empty string")
        env[var] = _env_value(entry, f"{where}: env {var}", env, fields, refs)
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


def _env_value(entry: dict, where: str, env: dict[str, str], fields: dict[str, str], refs: _References) -> str:
    if "valueFrom" not in entry or entry.get("valueFrom") is None:
        value = entry.get("value", "")
        if not isinstance(value, str):
            raise SpecError(INVALID, f"{where}: value must be a string, got {value!r}")
        return expand(value, env)
    source = entry["valueFrom"]
    for kind, table, name_key, binary in (("configMapKeyRef", refs.config_maps, "name", False),
                                          ("secretKeyRef", refs.secrets, "name", True)):
        ref = source.get(kind) if isinstance(source, dict) else None
        if isinstance(ref, dict):
            value = _key_ref(ref, table, name_key, binary, f"{where}: valueFrom.{kind}")
            return "" if value is None else value
    ref = source.get("fieldRef") if isinstance(source, dict) else None
    path = ref.get("fieldPath") if isinstance(ref, dict) else None
    if not isinstance(path, str):
        kinds = ", ".join(sorted(source)) if isinstance(source, dict) else repr(source)
        raise SpecError(UNSUPPORTED, f"{where}: valueFrom {kinds} is not supported by the embedded runtime "
                                     "(plain values, fieldRef, configMapKeyRef and secretKeyRef are)")
    if path not in fields:
        raise SpecError(UNSUPPORTED, f"{where}: fieldRef {path!r} is not supported by the embedded runtime")
    return fields[path]


def _key_ref(ref: dict, table: dict[str, dict], name_key: str, binary: bool, where: str) -> str | None:
    """One key of a ConfigMap (``data``, ``binaryData``) or Secret (``data``, base64); None when optional and
    missing; SpecError (CreateContainerConfigError) when missing and required."""
    name, key = str(ref.get(name_key) or ""), str(ref.get("key") or "")
    values = _values(table.get(name), binary, where) if name in table else None
    if values is None or key not in values:
        if ref.get("optional"):
            return None
        what = "secret" if binary else "configmap"
        raise SpecError(CONFIG_ERROR, f"{where}: {what} {name!r} not found" if values is None else
                        f"{where}: key {key!r} not found in {what} {name!r}")
    return values[key]


def _values(obj: dict | None, binary: bool, where: str) -> dict[str, str]:
    """A ConfigMap's or Secret's keys as text (base64 decoded); bytes that are not UTF-8 are refused."""
    out: dict[str, str] = {}
    if obj is None:
        return out
    sections = (("data", True),) if binary else (("data", False), ("binaryData", True))
    for section, encoded in sections:
        for key, value in (obj.get(section) or {}).items():
            try:
                out[str(key)] = base64.b64decode(str(value), validate=True).decode() if encoded else str(value)
            except (binascii.Error, ValueError):
                raise SpecError(INVALID, f"{where}: {section}.{key} is not base64 of UTF-8 text") from None
    return out


def _env_from(source: dict, where: str, refs: _References) -> dict[str, str]:
    prefix = source.get("prefix") or ""
    if not isinstance(prefix, str):
        raise SpecError(INVALID, f"{where}: prefix must be a string")
    for kind, table, binary in (("configMapRef", refs.config_maps, False), ("secretRef", refs.secrets, True)):
        ref = source.get(kind)
        if isinstance(ref, dict):
            name = str(ref.get("name") or "")
            if name not in table:
                if ref.get("optional"):
                    return {}
                raise SpecError(CONFIG_ERROR, f"{where}: {kind} {name!r} not found")
            return {prefix + k: v for k, v in _values(table[name], binary, f"{where}: {kind} {name}").items()}
    raise SpecError(INVALID, f"{where}: needs configMapRef or secretRef")


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
