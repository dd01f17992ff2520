"""Turn Kubernetes-style manifests (dicts from YAML or the API) into objects.

Every problem is a :class:`ManifestError` that names the source, the object
and the field: ``cluster.yaml#3: Pod team-a/web-0: spec.containers[0].resources.requests.cpu:
invalid quantity '5x'``.  Validation happens here, at the edge, so the rest of
the scheduler can trust what it holds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from proto.errors import InputError
from proto.vocab.placement import (
    PREEMPTABLE_ANNOTATION,
    device_requests,
    expected_duration,
    numa_policy,
    preemptable,
)
from proto.vocab.qos import parse_qos_level, qos_class
from proto.vocab.quantity import QuantityError, to_canonical
from scheduler.api import names
from scheduler.api.hierarchy import HIERARCHY_ANNOTATION, queue_hierarchy
from scheduler.api.objects import (
    DEFAULT_MAX_PODS,
    DEFAULT_QUEUE,
    NAMESPACE_NAME_LABEL,
    QUEUE_NAME_ANNOTATION,
    Condition,
    HostPort,
    LabelSelector,
    Namespace,
    Node,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PodGroup,
    PriorityClass,
    Queue,
    QueueAffinity,
    Requirement,
    SelectorTerm,
    SpreadConstraint,
    Taint,
    Toleration,
)

SCHEDULING_GROUP = "scheduling.volcano.sh"
KINDS = {
    "Namespace": ("v1",),
    "Node": ("v1",),
    "Pod": ("v1",),
    "PriorityClass": ("scheduling.k8s.io/v1", "scheduling.k8s.io/v1beta1"),
    "PodGroup": (f"{SCHEDULING_GROUP}/v1beta1",),
    "Queue": (f"{SCHEDULING_GROUP}/v1beta1",),
}
NAMESPACED = {"Pod", "PodGroup"}
NAMED_IN_NAMESPACE = NAMESPACED | {"Job", "Command"}  # how object_id names them (Volcano's Job and Command too)
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
QUEUE_STATES = ("Open", "Closed", "Closing", "Unknown")
PODGROUP_PHASES = ("Pending", "Inqueue", "Running", "Unknown", "Completed")
POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
RESTART_POLICIES = ("Always", "OnFailure", "Never")
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
PORT_PROTOCOLS = ("TCP", "UDP", "SCTP")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_ONE_LINE = re.compile(r"\s*\n\s*")
INT32 = (-(2**31), 2**31 - 1)  # spec.priority and PriorityClass value are int32 in Kubernetes
INT64_MAX = 2**63 - 1


# One object as JSON, at most: a pod travels to its node's agent inside one gRPC message, which gRPC limits to
# 4 MiB by default (the agent's stream and the scheduler's use that default); at a quarter of it a START
# fits beside the QoS profile and the others in its directive.  Kubernetes (etcd) stops at 1.5 MiB.
MAX_OBJECT_BYTES = 2**20
GRPC_MESSAGE_BYTES = 4 * 2**20


class ManifestError(InputError):
    """A manifest that cannot be used; the message says where and why."""

    def __init__(self, source: str, obj: str, message: str):
        message = _ONE_LINE.sub(" ", message)  # a library's multi-line message (protobuf's) stays one line
        self.source, self.obj, self.detail = source, obj, message
        super().__init__(f"{source}: {obj}: {message}" if obj else f"{source}: {message}")


class _Fields:
    """Typed access to a manifest with paths for error messages."""

    def __init__(self, source: str, obj: str):
        self.source, self.obj = source, obj

    def fail(self, path: str, message: str) -> ManifestError:
        return ManifestError(self.source, self.obj, f"{path}: {message}" if path else message)

    def get(self, data: Any, path: str, key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
        if data is None:
            return default
        value = data.get(key)
        if value is None:
            return default
        if value.__class__ is kind:  # the usual case, quickly (a bool is never taken for an int here)
            return value
        if isinstance(value, bool) and kind in (int, float, (int, float)):
            raise self.fail(_join(path, key), f"expected a number, got {value!r}")
        if not isinstance(value, kind):
            raise self.fail(_join(path, key), f"expected {_kind_name(kind)}, got {type(value).__name__} {value!r}")
        return value

    def mapping(self, data: Any, path: str, key: str) -> dict:
        return self.get(data, path, key, dict, {})

    def strings(self, data: Any, path: str, key: str, *, keys: Callable[[str], str | None] | None = None,
                values: Callable[[str], str | None] | None = None) -> dict[str, str]:
        """A mapping of strings (scalars read as Kubernetes reads them), each key and value checked if asked."""
        raw = self.mapping(data, path, key)
        out = {}
        for k, v in raw.items():
            if not isinstance(k, str):
                raise self.fail(_join(path, key), f"keys must be strings, got {type(k).__name__} {k!r}")
            if isinstance(v, str):
                text = v
            elif isinstance(v, (dict, list)) or v is None:
                raise self.fail(_entry(path, key, k), "expected a string value")
            else:
                text = _scalar_text(v)
            if keys is not None and (problem := keys(k)):
                raise self.fail(_join(path, key), f"key {problem}")
            if values is not None and (problem := values(text)):
                raise self.fail(_entry(path, key, k), problem)
            out[k] = text
        return out

    def labels(self, data: Any, path: str, key: str) -> dict[str, str]:
        """Labels (and node selectors): qualified-name keys, label values."""
        return self.strings(data, path, key, keys=names.qualified_name, values=names.label_value)

    def annotations(self, data: Any, path: str, key: str) -> dict[str, str]:
        """Annotations: qualified-name keys, any values, at most 256 KiB in all (as Kubernetes)."""
        out = self.strings(data, path, key, keys=names.qualified_name)
        size = sum(len(k.encode()) + len(v.encode()) for k, v in out.items())
        if size > names.ANNOTATIONS_MAX_BYTES:
            raise self.fail(_join(path, key), f"annotations are {size:,} bytes; they may total at most "
                                              f"{names.ANNOTATIONS_MAX_BYTES:,}")
        return out

    def text(self, value: Any, path: str) -> str:
        """A scalar as text (Kubernetes' string fields: ``true``, ``5``, ``""`` for null); lists and maps refused."""
        if isinstance(value, (dict, list)):
            raise self.fail(path, f"expected a string, got {type(value).__name__}")
        return _scalar_text(value)

    def resources(self, data: Any, path: str, key: str) -> dict[str, int]:
        raw = self.mapping(data, path, key)
        out = {}
        for name, value in raw.items():
            if not isinstance(name, str) or (problem := names.qualified_name(name)):
                raise self.fail(_join(path, key), f"invalid resource name: {problem or repr(name)}")
            try:
                out[name] = to_canonical(name, value)
            except QuantityError as exc:
                raise self.fail(_join(path, f"{key}.{name}"), str(exc)) from None
        return out

    def time(self, data: Any, path: str, key: str) -> datetime | None:
        value = data.get(key) if data else None
        if value is None:
            return None
        if isinstance(value, datetime):
            return value if value.tzinfo else value.replace(tzinfo=UTC)
        try:
            stamp = datetime.fromisoformat(str(value))
        except ValueError:
            raise self.fail(_join(path, key), f"invalid timestamp {value!r}: expected RFC 3339") from None
        return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _entry(path: str, key: str, k: str) -> str:
    """Where entry ``k`` of the mapping ``key`` is (a long key shortened, so that the message stays short)."""
    return _join(path, f"{key}.{k}" if len(k) <= 100 else f"{key}.{k[:60]}…")


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {dict: "a mapping", list: "a list", str: "a string", int: "an integer", bool: "true or false"}
    if isinstance(kind, tuple):
        return " or ".join(names.get(k, k.__name__) for k in kind)
    return names.get(kind, kind.__name__)


def _scalar_text(value: Any) -> str:
    """YAML scalars as Kubernetes sees them in string fields: true/false, numbers, '' for null."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def object_id(doc: dict) -> str:
    """``Kind namespace/name`` (or ``Kind name``) as far as the document says."""
    kind = doc.get("kind", "?") if isinstance(doc, dict) else "?"
    kind = kind if isinstance(kind, str) and len(kind) <= 100 else "?"
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    name, ns = meta.get("name"), meta.get("namespace")
    name = name if isinstance(name, str) else "<unnamed>"
    name = name if len(name) <= 100 else name[:60] + "…"  # a huge name is refused; the message stays one line
    ns = ns if isinstance(ns, str) and len(ns) <= 100 else None
    if kind in NAMED_IN_NAMESPACE:
        return f"{kind} {ns or 'default'}/{name}"
    return f"{kind} {name}"


def object_json(doc: Any, source: str, obj: str) -> str:
    """``doc`` as the JSON text it is stored and sent as; ManifestError if JSON cannot hold it or it is too large."""
    try:
        text = json.dumps(doc, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ManifestError(source, obj, f"cannot be stored as JSON ({exc})") from None
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_OBJECT_BYTES:
        raise ManifestError(source, obj, f"the object is {size:,} bytes as JSON; at most {MAX_OBJECT_BYTES:,} "
                                         f"(1 MiB) are accepted, so that a pod fits in the {GRPC_MESSAGE_BYTES // 2**20} "
                                         "MiB gRPC message that takes it to its node")
    return text


def parse_object(doc: Any, source: str) -> Node | Pod | PodGroup | Queue | PriorityClass | Namespace:
    """Validate one manifest and return the object it describes."""
    if not isinstance(doc, dict):
        raise ManifestError(source, "", f"expected a Kubernetes object (a mapping), got {type(doc).__name__}")
    obj = object_id(doc)
    f = _Fields(source, obj)
    kind = doc.get("kind")
    if kind is None or kind == "":
        raise f.fail("kind", "missing")
    if not isinstance(kind, str):
        raise f.fail("kind", f"expected a string, got {type(kind).__name__}")
    if kind not in KINDS:
        raise f.fail("kind", f"unknown kind {kind!r}; the scheduler reads {', '.join(sorted(KINDS))}")
    api = doc.get("apiVersion")
    if api not in KINDS[kind]:
        raise f.fail("apiVersion", f"{kind} must have apiVersion {' or '.join(KINDS[kind])}, got {api!r}")
    meta = f.get(doc, "", "metadata", dict)
    if meta is None:
        raise f.fail("metadata", "missing")
    name = f.get(meta, "metadata", "name", str)
    if not name:
        raise f.fail("metadata.name", "missing")
    if problem := (names.dns1123_label(name) if kind == "Namespace" else names.dns1123_subdomain(name)):
        raise f.fail("metadata.name", problem)
    if kind in NAMESPACED:
        namespace = f.get(meta, "metadata", "namespace", str)
        if namespace and (problem := names.dns1123_label(namespace)):
            raise f.fail("metadata.namespace", problem)
    return _PARSERS[kind](doc, f, meta)


def _node(doc: dict, f: _Fields, meta: dict) -> Node:
    spec = f.mapping(doc, "", "spec")
    status = f.mapping(doc, "", "status")
    allocatable = f.resources(status, "status", "allocatable") or f.resources(status, "status", "capacity")
    if not allocatable:
        raise f.fail("status.allocatable", "missing: a node needs its allocatable (or capacity) resources")
    allocatable.setdefault("pods", DEFAULT_MAX_PODS)
    taints = []
    for i, raw in enumerate(f.get(spec, "spec", "taints", list, [])):
        path = f"spec.taints[{i}]"
        if not isinstance(raw, dict) or f.text(raw.get("key"), f"{path}.key") == "":
            raise f.fail(path, "a taint needs a key")
        effect = raw.get("effect", "")
        if effect not in TAINT_EFFECTS:
            raise f.fail(f"{path}.effect", f"must be one of {', '.join(TAINT_EFFECTS)}, got {effect!r}")
        taints.append(Taint(f.text(raw["key"], f"{path}.key"), f.text(raw.get("value"), f"{path}.value"), effect))
    return Node(
        name=meta["name"], allocatable=allocatable, labels=f.labels(meta, "metadata", "labels"),
        annotations=f.annotations(meta, "metadata", "annotations"), taints=tuple(taints),
        unschedulable=bool(f.get(spec, "spec", "unschedulable", bool, False)),
    )


def _pod(doc: dict, f: _Fields, meta: dict) -> Pod:
    spec = f.mapping(doc, "", "spec")
    status = f.mapping(doc, "", "status")
    containers = f.get(spec, "spec", "containers", list, [])
    if not containers:
        raise f.fail("spec.containers", "a pod needs at least one container")
    requests = _sum_requests(f, containers, "spec.containers")
    for name, amount in _max_requests(f, f.get(spec, "spec", "initContainers", list, []),
                                      "spec.initContainers").items():
        requests[name] = max(requests.get(name, 0), amount)
    for name, amount in f.resources(spec, "spec", "overhead").items():
        requests[name] = requests.get(name, 0) + amount
    affinity = f.mapping(f.mapping(spec, "spec", "affinity"), "spec.affinity", "nodeAffinity")
    path = "spec.affinity.nodeAffinity"
    required = f.mapping(affinity, path, "requiredDuringSchedulingIgnoredDuringExecution")
    terms = None
    if required:
        rpath = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
        raw_terms = f.get(required, rpath, "nodeSelectorTerms", list, [])
        if not raw_terms:
            raise f.fail(f"{rpath}.nodeSelectorTerms", "must hold at least one term")
        terms = tuple(_term(f, t, f"{rpath}.nodeSelectorTerms[{i}]") for i, t in enumerate(raw_terms))
    preferred = []
    for i, raw in enumerate(f.get(affinity, path, "preferredDuringSchedulingIgnoredDuringExecution", list, [])):
        ppath = f"{path}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        if not isinstance(raw, dict):
            raise f.fail(ppath, "expected a mapping with weight and preference")
        weight = f.get(raw, ppath, "weight", int, 0)
        if not 1 <= weight <= 100:
            raise f.fail(f"{ppath}.weight", f"must be 1-100, got {weight}")
        preferred.append((weight, _term(f, f.mapping(raw, ppath, "preference"), f"{ppath}.preference")))
    phase = f.get(status, "status", "phase", str, "Pending")
    if phase not in POD_PHASES:
        raise f.fail("status.phase", f"must be one of {', '.join(POD_PHASES)}, got {phase!r}")
    annotations = f.annotations(meta, "metadata", "annotations")
    labels = f.labels(meta, "metadata", "labels")
    node_name = f.get(spec, "spec", "nodeName", str, "")
    may_preempt = _preemptable(f, annotations, labels, bound=bool(node_name))
    preemption_policy = f.get(spec, "spec", "preemptionPolicy", str, "PreemptLowerPriority")
    if preemption_policy not in PREEMPTION_POLICIES:
        raise f.fail("spec.preemptionPolicy", f"must be one of {', '.join(PREEMPTION_POLICIES)}, "
                                              f"got {preemption_policy!r}")
    claims = _resource_claims(f, spec)
    if not node_name:  # what a bound pod asked of the scheduler no longer matters: it must still be counted
        _check_scheduling_requests(f, annotations, requests)
    _check_container_names(f, spec)
    namespace = meta.get("namespace") or "default"
    uid = f.get(meta, "metadata", "uid", str, "")
    if uid and (problem := names.uid(uid)):
        raise f.fail("metadata.uid", problem)
    grace = f.get(spec, "spec", "terminationGracePeriodSeconds", int)
    if grace is not None and not 0 <= grace <= INT64_MAX:
        raise f.fail("spec.terminationGracePeriodSeconds", f"must be an integer from 0 to {INT64_MAX}, got {grace}")
    policy = f.get(spec, "spec", "restartPolicy", str)
    if policy is not None and policy not in RESTART_POLICIES:
        raise f.fail("spec.restartPolicy", f"must be one of {', '.join(RESTART_POLICIES)}, got {policy!r}")
    priority = f.get(spec, "spec", "priority", int)
    if priority is not None and not INT32[0] <= priority <= INT32[1]:
        raise f.fail("spec.priority", f"must be a 32-bit integer, got {priority}")
    return Pod(
        namespace=namespace, name=meta["name"], uid=uid or f"{namespace}/{meta['name']}",
        requests=requests, labels=labels, annotations=annotations,
        node_selector=f.labels(spec, "spec", "nodeSelector"), affinity_terms=terms,
        preferred_terms=tuple(preferred), tolerations=_tolerations(f, spec),
        priority_class_name=f.get(spec, "spec", "priorityClassName", str, ""),
        priority=priority, scheduler_name=f.get(spec, "spec", "schedulerName", str, ""),
        node_name=node_name, phase=phase,
        created=f.time(meta, "metadata", "creationTimestamp"),
        terminating=meta.get("deletionTimestamp") is not None,
        qos_class=_qos_class(f, containers),
        nominated_node=f.get(status, "status", "nominatedNodeName", str, ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        preemptable=may_preempt, preemption_policy=preemption_policy, resource_claims=claims,
        spread_constraints=_spread_constraints(f, f.get(spec, "spec", "topologySpreadConstraints", list, []),
                                               "spec.topologySpreadConstraints"),
        pod_affinity=_pod_affinity(f, spec, namespace, labels),
        scheduling_gates=_scheduling_gates(f, spec), host_ports=_host_ports(f, spec),
    )


_LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def _pod_affinity(f: _Fields, spec: dict, namespace: str, labels: dict[str, str]) -> PodAffinity | None:
    """``spec.affinity.podAffinity`` and ``podAntiAffinity``; None when neither has a term."""
    affinity = f.mapping(spec, "spec", "affinity")
    if affinity.get("podAffinity") is None and affinity.get("podAntiAffinity") is None:
        return None  # the usual case, without building the paths below
    parts: dict[str, tuple[PodAffinityTerm, ...]] = {}
    for kind, prefix in (("podAffinity", ""), ("podAntiAffinity", "anti_")):
        path = f"spec.affinity.{kind}"
        raw = f.mapping(affinity, "spec.affinity", kind)
        rkey, pkey = "requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"
        parts[f"{prefix}required"] = tuple(
            _pod_affinity_term(f, t, f"{path}.{rkey}[{i}]", namespace, labels, 0)
            for i, t in enumerate(f.get(raw, path, rkey, list, [])))
        preferred = []
        for i, item in enumerate(f.get(raw, path, pkey, list, [])):
            ppath = f"{path}.{pkey}[{i}]"
            if not isinstance(item, dict):
                raise f.fail(ppath, "expected a mapping with weight and podAffinityTerm")
            weight = f.get(item, ppath, "weight", int, 0)
            if not 1 <= weight <= 100:
                raise f.fail(f"{ppath}.weight", f"must be 1-100, got {weight}")
            term = f.get(item, ppath, "podAffinityTerm", dict)
            if term is None:
                raise f.fail(f"{ppath}.podAffinityTerm", "required")
            preferred.append(_pod_affinity_term(f, term, f"{ppath}.podAffinityTerm", namespace, labels, weight))
        parts[f"{prefix}preferred"] = tuple(preferred)
    if not any(parts.values()):
        return None
    return PodAffinity(**parts)


def _pod_affinity_term(f: _Fields, raw: Any, path: str, namespace: str, labels: dict[str, str],
                       weight: int) -> PodAffinityTerm:
    """One term, resolved against its pod: namespaces, and matchLabelKeys/mismatchLabelKeys merged into the
    selector as the API server merges them.  A ``namespaceSelector`` of ``{}`` selects every namespace; any
    other is kept and matched against the labels of each pod's Namespace, the pods of the listed
    ``namespaces`` falling under the term too; with neither the term looks at its pod's own namespace."""
    if not isinstance(raw, dict):
        raise f.fail(path, "expected a pod affinity term (a mapping)")
    key = f.get(raw, path, "topologyKey", str, "")
    if not key:
        raise f.fail(f"{path}.topologyKey", "required: a node label key")
    if problem := names.qualified_name(key):
        raise f.fail(f"{path}.topologyKey", problem)
    selector = _label_selector(f, raw, path, "labelSelector")
    for field_name, op in (("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn")):
        keys = f.get(raw, path, field_name, list, [])
        if keys and selector is None:
            raise f.fail(f"{path}.{field_name}", "needs a labelSelector")
        for i, label in enumerate(keys):
            if not isinstance(label, str) or (problem := names.qualified_name(label)):
                raise f.fail(f"{path}.{field_name}[{i}]", problem or f"expected a label key, got {label!r}")
            if label in labels and selector is not None:
                selector = (*selector, Requirement(label, op, (labels[label],)))
    listed = f.get(raw, path, "namespaces", list, [])
    for i, ns in enumerate(listed):
        if not isinstance(ns, str) or not ns:
            raise f.fail(f"{path}.namespaces[{i}]", f"expected a namespace name, got {ns!r}")
    ns_selector = _label_selector(f, raw, path, "namespaceSelector")
    namespaces: tuple[str, ...] | None
    if ns_selector is not None and not ns_selector:  # {}: every namespace
        namespaces, ns_selector = None, None
    elif listed or ns_selector is not None:
        namespaces = tuple(sorted(set(listed)))
    else:
        namespaces = (namespace,)
    return PodAffinityTerm(key, selector, namespaces, weight, ns_selector)


def _label_selector(f: _Fields, raw: dict, path: str, key: str) -> tuple[Requirement, ...] | None:
    """A metav1.LabelSelector as requirements (matchLabels as In); None when unset.  Keys must be label keys
    and values label values, as the API server validates a pod's affinity selectors."""
    selector = f.get(raw, path, key, dict)
    if selector is None:
        return None
    spath = f"{path}.{key}"
    reqs = [Requirement(k, "In", (v,)) for k, v in sorted(f.labels(selector, spath, "matchLabels").items())]
    for i, expr in enumerate(f.get(selector, spath, "matchExpressions", list, [])):
        epath = f"{spath}.matchExpressions[{i}]"
        if isinstance(expr, dict) and expr.get("operator") in ("Gt", "Lt"):
            raise f.fail(f"{epath}.operator", f"must be one of {', '.join(_LABEL_OPERATORS)}, "
                                              f"got {expr['operator']!r}")
        req = _requirement(f, expr, epath, False)
        if problem := names.qualified_name(req.key):
            raise f.fail(f"{epath}.key", problem)
        for j, value in enumerate(req.values):
            if problem := names.label_value(value):
                raise f.fail(f"{epath}.values[{j}]", f"{value!r}: {problem}")
        reqs.append(req)
    return tuple(reqs)


def _preemptable(f: _Fields, annotations: dict[str, str], labels: dict[str, str], *, bound: bool) -> bool:
    """``volcano.sh/preemptable`` as Volcano reads it (GetPodPreemptable): the annotation, else the label, else true.

    A value other than true/false refuses a pending pod; a bound pod must still be
    counted, so there it reads as false, as Volcano reads a value it cannot parse.
    """
    for path, values in (("metadata.annotations", annotations), ("metadata.labels", labels)):
        raw = values.get(PREEMPTABLE_ANNOTATION, "")
        text = raw.strip().lower()
        if not text:
            continue
        if text in ("true", "false"):
            return text == "true"
        if bound:
            return False
        raise f.fail(f"{path}[{PREEMPTABLE_ANNOTATION}]", f'must be "true" or "false", got {raw!r}')
    return True


def _resource_claims(f: _Fields, spec: dict) -> tuple[str, ...]:
    """The names of ``spec.resourceClaims`` (dynamic resource allocation)."""
    out = []
    for i, claim in enumerate(f.get(spec, "spec", "resourceClaims", list, [])):
        path = f"spec.resourceClaims[{i}]"
        if not isinstance(claim, dict):
            raise f.fail(path, "expected a mapping with a name")
        name = f.get(claim, path, "name", str, "")
        if not name:
            raise f.fail(f"{path}.name", "must be set")
        out.append(name)
    return tuple(out)


def _scheduling_gates(f: _Fields, spec: dict) -> tuple[str, ...]:
    """The names of ``spec.schedulingGates``: qualified names, each once (the API server's rules)."""
    out: list[str] = []
    for i, gate in enumerate(f.get(spec, "spec", "schedulingGates", list, [])):
        path = f"spec.schedulingGates[{i}]"
        if not isinstance(gate, dict):
            raise f.fail(path, "expected a mapping with a name")
        name = f.get(gate, path, "name", str, "")
        if problem := names.qualified_name(name):
            raise f.fail(f"{path}.name", problem)
        if name in out:
            raise f.fail(f"{path}.name", f"{name!r} is listed twice")
        out.append(name)
    return tuple(out)


def _host_ports(f: _Fields, spec: dict) -> tuple[HostPort, ...]:
    """``ports[].hostPort`` of the containers and of sidecar init containers (``restartPolicy: Always``),
    the ports kube-scheduler's NodePorts counts; protocol defaults to TCP and hostIP to 0.0.0.0."""
    out: list[HostPort] = []
    for key in ("initContainers", "containers"):
        for i, container in enumerate(f.get(spec, "spec", key, list, [])):
            cpath = f"spec.{key}[{i}]"
            if key == "initContainers" and f.get(container, cpath, "restartPolicy", str, "") != "Always":
                continue  # a plain init container has exited before the pod's other containers bind anything
            for j, raw in enumerate(f.get(container, cpath, "ports", list, [])):
                path = f"{cpath}.ports[{j}]"
                if not isinstance(raw, dict):
                    raise f.fail(path, "expected a mapping")
                port = f.get(raw, path, "hostPort", int, 0)
                if port == 0:
                    continue
                if not 1 <= port <= 65535:
                    raise f.fail(f"{path}.hostPort", f"must be 1-65535, got {port}")
                protocol = f.get(raw, path, "protocol", str, "TCP")
                if protocol not in PORT_PROTOCOLS:
                    raise f.fail(f"{path}.protocol", f"must be one of {', '.join(PORT_PROTOCOLS)}, got {protocol!r}")
                ip = f.get(raw, path, "hostIP", str, "") or "0.0.0.0"
                out.append(HostPort(port, protocol, ip))
    return tuple(out)


def _check_container_names(f: _Fields, spec: dict) -> None:
    seen: dict[str, str] = {}
    for key in ("initContainers", "containers"):
        for i, c in enumerate(f.get(spec, "spec", key, list, [])):
            name, where = c["name"], f"spec.{key}[{i}].name"
            if name in seen:
                raise f.fail(where, f"{name!r} is used twice (also {seen[name]})")
            seen[name] = where


def _check_scheduling_requests(f: _Fields, annotations: dict[str, str], requests: dict[str, int]) -> None:
    """Refuse annotations and device requests the scheduler could only guess at."""
    for check in (parse_qos_level, numa_policy, expected_duration, preemptable):
        try:
            check(annotations)
        except ValueError as exc:
            raise f.fail("metadata.annotations", str(exc)) from None
    try:
        device_requests(requests)
    except ValueError as exc:
        raise f.fail("spec.containers[*].resources", str(exc)) from None


def _qos_class(f: _Fields, containers: list) -> str:
    try:
        return qos_class(containers)
    except QuantityError as exc:  # already reported with its path by the request parsing; here for safety
        raise f.fail("spec.containers", str(exc)) from None


def _container_requests(f: _Fields, container: Any, path: str) -> dict[str, int]:
    if not isinstance(container, dict):
        raise f.fail(path, "expected a container (a mapping)")
    _check_container(f, container, path)
    resources = f.mapping(container, path, "resources")
    requests = f.resources(resources, f"{path}.resources", "requests")
    # Kubernetes defaults a missing request to the limit.
    for name, amount in f.resources(resources, f"{path}.resources", "limits").items():
        requests.setdefault(name, amount)
    return requests


def _check_container(f: _Fields, container: dict, path: str) -> None:
    """Its name (a DNS label) and its environment variables' names, as Kubernetes checks them: a name the
    runtime cannot set (``A=B``, a NUL) would otherwise fail only when the pod starts, again and again."""
    name = f.get(container, path, "name", str, "")
    if not name:
        raise f.fail(f"{path}.name", "missing: every container needs a name")
    if problem := names.dns1123_label(name):
        raise f.fail(f"{path}.name", problem)
    for i, entry in enumerate(f.get(container, path, "env", list, [])):
        where = f"{path}.env[{i}]"
        if not isinstance(entry, dict):
            raise f.fail(where, "expected an environment variable (a mapping with name and value)")
        var = f.get(entry, where, "name", str, "")
        if problem := names.env_var_name(var):
            raise f.fail(f"{where}.name", problem)
        f.get(entry, where, "value", str)
    for i, entry in enumerate(f.get(container, path, "envFrom", list, [])):
        if not isinstance(entry, dict):
            raise f.fail(f"{path}.envFrom[{i}]", "expected a mapping")
        prefix = f.get(entry, f"{path}.envFrom[{i}]", "prefix", str, "")
        if prefix and (problem := names.env_var_name(prefix)):
            raise f.fail(f"{path}.envFrom[{i}].prefix", problem)


def _sum_requests(f: _Fields, containers: list, path: str) -> dict[str, int]:
    total: dict[str, int] = {}
    for i, container in enumerate(containers):
        for name, amount in _container_requests(f, container, f"{path}[{i}]").items():
            total[name] = total.get(name, 0) + amount
    return total


def _max_requests(f: _Fields, containers: list, path: str) -> dict[str, int]:
    most: dict[str, int] = {}
    for i, container in enumerate(containers):
        for name, amount in _container_requests(f, container, f"{path}[{i}]").items():
            most[name] = max(most.get(name, 0), amount)
    return most


def _term(f: _Fields, raw: Any, path: str) -> SelectorTerm:
    if not isinstance(raw, dict):
        raise f.fail(path, "expected a node selector term (a mapping)")
    reqs = []
    for key, is_field in (("matchExpressions", False), ("matchFields", True)):
        for i, expr in enumerate(f.get(raw, path, key, list, [])):
            reqs.append(_requirement(f, expr, f"{path}.{key}[{i}]", is_field))
    if not reqs:
        raise f.fail(path, "a node selector term needs matchExpressions or matchFields")
    return SelectorTerm(tuple(reqs))


def _requirement(f: _Fields, expr: Any, path: str, is_field: bool) -> Requirement:
    if not isinstance(expr, dict) or not isinstance(expr.get("key"), str) or not expr.get("key"):
        raise f.fail(path, "a requirement needs a key")
    op = expr.get("operator")
    if op not in SELECTOR_OPERATORS:
        raise f.fail(f"{path}.operator", f"must be one of {', '.join(SELECTOR_OPERATORS)}, got {op!r}")
    if is_field and (expr["key"] != "metadata.name" or op not in ("In", "NotIn")):
        raise f.fail(path, "matchFields supports only key metadata.name with In or NotIn")
    values = tuple(f.text(v, f"{path}.values[{i}]") for i, v in enumerate(f.get(expr, path, "values", list, [])))
    if op in ("In", "NotIn") and not values:
        raise f.fail(f"{path}.values", f"operator {op} needs at least one value")
    if op in ("Exists", "DoesNotExist") and values:
        raise f.fail(f"{path}.values", f"operator {op} takes no values")
    if op in ("Gt", "Lt") and (len(values) != 1 or not _INTEGER.fullmatch(values[0])):
        raise f.fail(f"{path}.values", f"operator {op} needs exactly one integer value")
    return Requirement(expr["key"], op, values, is_field)


SPREAD_ACTIONS = ("DoNotSchedule", "ScheduleAnyway")
INCLUSION_POLICIES = ("Honor", "Ignore")
LABEL_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def spread_constraints(raw: Any, source: str, path: str) -> tuple[SpreadConstraint, ...]:
    """Topology spread constraints written as in a pod's spec (a list of mappings), as a plugin argument reads them."""
    f = _Fields(source, "")
    if not isinstance(raw, list):
        raise f.fail(path, f"expected a list of topology spread constraints, got {type(raw).__name__}")
    return _spread_constraints(f, raw, path)


def _spread_constraints(f: _Fields, raw: list, path: str) -> tuple[SpreadConstraint, ...]:
    """``topologySpreadConstraints``, checked as the API server validates them."""
    out = []
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(raw):
        cpath = f"{path}[{i}]"
        if not isinstance(item, dict):
            raise f.fail(cpath, "expected a topology spread constraint (a mapping)")
        max_skew = f.get(item, cpath, "maxSkew", int)
        if max_skew is None or max_skew < 1:
            raise f.fail(f"{cpath}.maxSkew", f"must be an integer greater than 0, got {max_skew!r}")
        key = f.get(item, cpath, "topologyKey", str, "")
        problem = names.qualified_name(key) if key else "empty"
        if problem:
            raise f.fail(f"{cpath}.topologyKey", f"must be a label key: {problem}")
        action = item.get("whenUnsatisfiable")
        if action not in SPREAD_ACTIONS:
            raise f.fail(f"{cpath}.whenUnsatisfiable", f"must be one of {', '.join(SPREAD_ACTIONS)}, got {action!r}")
        if (key, action) in seen:
            raise f.fail(cpath, f"duplicate constraint for topologyKey {key!r} and whenUnsatisfiable {action}")
        seen.add((key, action))
        min_domains = f.get(item, cpath, "minDomains", int)
        if min_domains is not None:
            if min_domains < 1:
                raise f.fail(f"{cpath}.minDomains", f"must be greater than 0, got {min_domains}")
            if action != "DoNotSchedule":
                raise f.fail(f"{cpath}.minDomains", "may be set only with whenUnsatisfiable DoNotSchedule")
        policies = []
        for name, default in (("nodeAffinityPolicy", "Honor"), ("nodeTaintsPolicy", "Ignore")):
            value = f.get(item, cpath, name, str, default)
            if value not in INCLUSION_POLICIES:
                raise f.fail(f"{cpath}.{name}", f"must be Honor or Ignore, got {value!r}")
            policies.append(value)
        selector = None
        if item.get("labelSelector") is not None:
            selector = _selector(f, f.mapping(item, cpath, "labelSelector"), f"{cpath}.labelSelector")
        match_keys = tuple(f.text(k, f"{cpath}.matchLabelKeys[{j}]")
                           for j, k in enumerate(f.get(item, cpath, "matchLabelKeys", list, [])))
        if match_keys and selector is None:
            raise f.fail(f"{cpath}.matchLabelKeys", "needs a labelSelector")
        for j, k in enumerate(match_keys):
            if problem := names.qualified_name(k):
                raise f.fail(f"{cpath}.matchLabelKeys[{j}]", problem)
            if selector is not None and (any(k == lk for lk, _ in selector.match_labels)
                                         or any(k == r.key for r in selector.match_expressions)):
                raise f.fail(f"{cpath}.matchLabelKeys[{j}]", f"{k!r} exists in both matchLabelKeys and labelSelector")
        out.append(SpreadConstraint(max_skew, key, action, selector, match_keys, min_domains or 1, *policies))
    return tuple(out)


def _selector(f: _Fields, raw: dict, path: str) -> LabelSelector:
    """A metav1.LabelSelector as a :class:`LabelSelector` (topology spread's form)."""
    labels = f.labels(raw, path, "matchLabels")
    exprs = []
    for i, expr in enumerate(f.get(raw, path, "matchExpressions", list, [])):
        epath = f"{path}.matchExpressions[{i}]"
        if isinstance(expr, dict) and expr.get("operator") not in LABEL_SELECTOR_OPERATORS:
            raise f.fail(f"{epath}.operator", f"must be one of {', '.join(LABEL_SELECTOR_OPERATORS)}, "
                                              f"got {expr.get('operator')!r}")
        exprs.append(_requirement(f, expr, epath, False))
    return LabelSelector(tuple(sorted(labels.items())), tuple(exprs))


def _tolerations(f: _Fields, spec: dict) -> tuple[Toleration, ...]:
    out = []
    for i, raw in enumerate(f.get(spec, "spec", "tolerations", list, [])):
        path = f"spec.tolerations[{i}]"
        if not isinstance(raw, dict):
            raise f.fail(path, "expected a toleration (a mapping)")
        op = raw.get("operator") or "Equal"
        if op not in ("Equal", "Exists"):
            raise f.fail(f"{path}.operator", f"must be Equal or Exists, got {op!r}")
        effect = raw.get("effect") or ""
        if effect and effect not in TAINT_EFFECTS:
            raise f.fail(f"{path}.effect", f"must be one of {', '.join(TAINT_EFFECTS)}, got {effect!r}")
        key = f.text(raw.get("key"), f"{path}.key")
        if not key and op != "Exists":
            raise f.fail(path, "a toleration without a key must use operator Exists")
        seconds = f.get(raw, path, "tolerationSeconds", int)
        if seconds is not None and not -INT64_MAX - 1 <= seconds <= INT64_MAX:
            raise f.fail(f"{path}.tolerationSeconds", f"must be a 64-bit integer, got {seconds}")
        out.append(Toleration(key, op, f.text(raw.get("value"), f"{path}.value"), effect, seconds))
    return tuple(out)


def _podgroup(doc: dict, f: _Fields, meta: dict) -> PodGroup:
    spec = f.mapping(doc, "", "spec")
    status = f.mapping(doc, "", "status")
    min_member = f.get(spec, "spec", "minMember", int, 1)
    if min_member < 0:
        raise f.fail("spec.minMember", f"must not be negative, got {min_member}")
    phase = f.get(status, "status", "phase", str, "Pending")
    if phase not in PODGROUP_PHASES:
        raise f.fail("status.phase", f"must be one of {', '.join(PODGROUP_PHASES)}, got {phase!r}")
    min_resources = _min_resources(f, spec) if spec.get("minResources") is not None else None
    min_task_member = {}
    for role, count in f.mapping(spec, "spec", "minTaskMember").items():
        where = f"spec.minTaskMember.{role}"
        if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= INT32[1]:
            raise f.fail(where, f"must be a non-negative 32-bit integer, got {count!r}")
        min_task_member[str(role)] = count
    return PodGroup(
        namespace=meta.get("namespace") or "default", name=meta["name"],
        queue=f.get(spec, "spec", "queue", str, "") or DEFAULT_QUEUE, min_member=min_member,
        min_resources=min_resources, min_task_member=min_task_member,
        priority_class_name=f.get(spec, "spec", "priorityClassName", str, ""),
        annotations=f.annotations(meta, "metadata", "annotations"), created=f.time(meta, "metadata", "creationTimestamp"),
        phase=phase, conditions=_conditions(f, status), uid=f.get(meta, "metadata", "uid", str, ""),
    )


def _min_resources(f: _Fields, spec: dict) -> dict[str, int]:
    """spec.minResources as the resources a job needs, read as Volcano reads it.

    Volcano's controllers write it in Kubernetes quota names (``requests.cpu`` beside ``cpu``,
    ``pods`` and ``count/pods``, sometimes ``limits.*``): ``requests.X`` is ``X`` (the larger amount
    where both are given); limits, object counts (``pods``, ``count/*``) and other quota-only names
    (``services``, ``persistentvolumeclaims``…) are not schedulable resources and never hold a job back.
    Every amount must still be a valid quantity.
    """
    out: dict[str, int] = {}
    for name, value in f.mapping(spec, "spec", "minResources").items():
        if not isinstance(name, str) or (problem := names.qualified_name(name)):
            raise f.fail("spec.minResources", f"invalid resource name: {problem or repr(name)}")
        resource = name[len("requests."):] if name.startswith("requests.") else name
        try:
            amount = to_canonical(resource, value)
        except QuantityError as exc:
            raise f.fail(f"spec.minResources.{name}", str(exc)) from None
        if _schedulable_resource(resource):
            out[resource] = max(out.get(resource, 0), amount)
    return out


def _schedulable_resource(name: str) -> bool:
    """A resource nodes offer (cpu, memory, hugepages, extended ``domain/name``), not a quota-only name."""
    if name in ("cpu", "memory", "ephemeral-storage") or name.startswith("hugepages-"):
        return True
    return "/" in name and not name.startswith(("count/", "limits.", "requests."))


def _conditions(f: _Fields, status: dict) -> list[Condition]:
    out = []
    for i, raw in enumerate(f.get(status, "status", "conditions", list, [])):
        path = f"status.conditions[{i}]"
        if not isinstance(raw, dict):
            raise f.fail(path, "expected a condition (a mapping)")
        out.append(Condition(str(raw.get("type", "")), str(raw.get("status", "")), str(raw.get("reason", "")),
                             str(raw.get("message", "")), f.time(raw, path, "lastTransitionTime")))
    return out


def _queue(doc: dict, f: _Fields, meta: dict) -> Queue:
    spec = f.mapping(doc, "", "spec")
    status = f.mapping(doc, "", "status")
    weight = f.get(spec, "spec", "weight", int, 1)
    if not 1 <= weight <= 2**31 - 1:
        raise f.fail("spec.weight", f"must be an integer from 1 to {2**31 - 1}, got {weight}")
    guarantee = f.resources(f.mapping(spec, "spec", "guarantee"), "spec.guarantee", "resource")
    state = f.get(status, "status", "state", str, "Open")
    if state not in QUEUE_STATES:
        raise f.fail("status.state", f"must be one of {', '.join(QUEUE_STATES)}, got {state!r}")
    priority = f.get(spec, "spec", "priority", int, 0)
    if not INT32[0] <= priority <= INT32[1]:
        raise f.fail("spec.priority", f"must be a 32-bit integer, got {priority}")
    annotations = f.annotations(meta, "metadata", "annotations")
    try:
        queue_hierarchy(annotations)
    except ValueError as exc:
        raise f.fail(f"metadata.annotations[{HIERARCHY_ANNOTATION}]", str(exc)) from None
    return Queue(
        name=meta["name"], weight=weight, priority=priority, capability=f.resources(spec, "spec", "capability"),
        guarantee=guarantee, deserved=f.resources(spec, "spec", "deserved"),
        reclaimable=f.get(spec, "spec", "reclaimable", bool, True), parent=f.get(spec, "spec", "parent", str, ""),
        state=state, affinity=_queue_affinity(f, spec), annotations=annotations,
    )


_AFFINITY_KINDS = ("nodeGroupAffinity", "nodeGroupAntiAffinity")
_AFFINITY_TERMS = ("requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution")


def _queue_affinity(f: _Fields, spec: dict) -> QueueAffinity | None:
    """``spec.affinity``: node-group names (label values of ``volcano.sh/nodegroup-name``); None when unset."""
    raw = f.get(spec, "spec", "affinity", dict)
    if raw is None:
        return None
    groups: dict[tuple[str, str], tuple[str, ...]] = {}
    for key in raw:
        if key not in _AFFINITY_KINDS:
            raise f.fail(f"spec.affinity.{key}", f"unknown field; expected {' or '.join(_AFFINITY_KINDS)}")
    for kind in _AFFINITY_KINDS:
        path = f"spec.affinity.{kind}"
        terms = f.get(raw, "spec.affinity", kind, dict, {})
        for key in terms:
            if key not in _AFFINITY_TERMS:
                raise f.fail(f"{path}.{key}", f"unknown field; expected {' or '.join(_AFFINITY_TERMS)}")
        for term in _AFFINITY_TERMS:
            values = f.get(terms, path, term, list, [])
            for i, value in enumerate(values):
                if not isinstance(value, str):
                    raise f.fail(f"{path}.{term}[{i}]",
                                 f"expected a node group name (a string), got {type(value).__name__} {value!r}")
            groups[kind, term] = tuple(values)
    required, preferred = _AFFINITY_TERMS
    return QueueAffinity(
        required=groups[_AFFINITY_KINDS[0], required], preferred=groups[_AFFINITY_KINDS[0], preferred],
        anti_required=groups[_AFFINITY_KINDS[1], required], anti_preferred=groups[_AFFINITY_KINDS[1], preferred])


def _priority_class(doc: dict, f: _Fields, meta: dict) -> PriorityClass:
    value = f.get(doc, "", "value", int)
    if value is None:
        raise f.fail("value", "missing: a PriorityClass needs an integer value")
    if not INT32[0] <= value <= INT32[1]:
        raise f.fail("value", f"must be a 32-bit integer, got {value}")
    return PriorityClass(meta["name"], value, bool(f.get(doc, "", "globalDefault", bool, False)))


def _namespace(doc: dict, f: _Fields, meta: dict) -> Namespace:
    """A Namespace: its name and labels, ``kubernetes.io/metadata.name`` set to the name as the API server sets it."""
    labels = f.labels(meta, "metadata", "labels")
    labels[NAMESPACE_NAME_LABEL] = meta["name"]
    return Namespace(meta["name"], labels)


_PARSERS: dict[str, Callable[[dict, _Fields, dict], Any]] = {
    "Node": _node, "Pod": _pod, "PodGroup": _podgroup, "Queue": _queue, "PriorityClass": _priority_class,
    "Namespace": _namespace,
}


def pod_queue_annotation(pod: Pod) -> str:
    return pod.annotations.get(QUEUE_NAME_ANNOTATION, "")
