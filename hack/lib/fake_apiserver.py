"""An in-memory Kubernetes API server over real HTTP, for driving the real ``kubernetes`` client in tests.

It serves the part of the REST and watch API that Scoria's scheduler and agent use, with the API
server's shapes, status codes and ``Status`` bodies, on a loopback socket:

* resources (:data:`RESOURCES`): core ``v1`` pods, nodes, namespaces, events, configmaps, secrets, services,
  persistentvolumeclaims; ``scheduling.k8s.io/v1`` priorityclasses; ``policy/v1`` poddisruptionbudgets;
  ``coordination.k8s.io/v1`` leases; ``events.k8s.io/v1`` events; ``networking.k8s.io/v1`` networkpolicies;
  ``apps/v1`` deployments, replicasets, statefulsets, daemonsets; ``batch/v1`` jobs; Volcano's
  ``scheduling.volcano.sh/v1beta1`` podgroups and queues, ``batch.volcano.sh/v1alpha1`` jobs and
  ``bus.volcano.sh/v1alpha1`` commands.  The Volcano kinds follow the CRDs we ship
  (``daemonset/crds``): scope, status subresource (queues and jobs have one, podgroups do NOT, as in Volcano)
  and the structural schema (defaults, pruning of unknown fields, required fields, types, enums, patterns);
* verbs: list (``labelSelector``, ``fieldSelector``, ``limit``/``continue``), watch (``watch=true``,
  ``resourceVersion``, ``timeoutSeconds``, ``allowWatchBookmarks``; 410 ``Expired`` for a
  resourceVersion older than the kept history), get, create, update (409 on a stale resourceVersion),
  patch (merge, strategic merge, JSON patch), delete (preconditions, finalizers), deletecollection,
  the status subresource, pods' ``binding`` and ``eviction`` (PodDisruptionBudgets honoured), core
  ``bindings``, and discovery (``/api``, ``/apis``, ``/api/v1``, ``/apis/G/V``, ``/version``);
* what the server itself does: uid, resourceVersion, creationTimestamp, generation; pod defaults
  (schedulerName, requests from limits, priority from the PriorityClass, status Pending with the QoS
  class); a namespace's ``kubernetes.io/metadata.name`` label (its name) on every create and update; no
  write and no event for an update that changes nothing; selector-filtered watches see an
  object that leaves the selection as ``DELETED`` and one that enters it as ``ADDED``; an eviction reads the
  one selecting budget's STATUS (429 while ``observedGeneration`` lags — a fresh budget — or
  ``disruptionsAllowed`` is 0) and decrements ``disruptionsAllowed`` itself, as kube's EvictionREST does; it
  skips budgets for Pending, finished and terminating pods, and marks the pod ``DisruptionTarget`` before
  deleting it; deleting a bound, unfinished pod is graceful (``deletionTimestamp``; it stays until
  :meth:`FakeApiServer.finish_terminating`); binding checks the Binding's uid/resourceVersion preconditions and
  refuses gated pods (409); creates need their Namespace (404); names, quantities, pod conditions and events'
  namespaces are validated (422; an unparseable quantity 400); watches stay open until ``timeoutSeconds``,
  silent but for bookmarks (asked for) every ``bookmark_interval`` seconds and at the end;
* the kinds' own rules where a controller meets them: a Service gets a cluster IP (kept when an update leaves it
  out, immutable once set; none for a headless one), its ports' protocol and targetPort; a Secret's ``data`` is
  base64 (else 400) and ``stringData`` is folded into it; Secret and ConfigMap keys are checked and ``immutable``
  holds; a PersistentVolumeClaim needs access modes and a storage request, starts ``Pending`` and its spec is
  immutable; a NetworkPolicy's ``policyTypes`` are defaulted; an apps/v1 workload needs a selector matching its
  template; on create a built-in kind's status is the server's, never the client's;
* garbage collection through ``ownerReferences``, as kube's garbage collector does it, in a thread of its own
  (so, as in a cluster, owned objects go a moment AFTER their owner): a deletion's ``propagationPolicy``
  (``Background`` by default, ``Orphan`` for ``batch/v1`` jobs as kube keeps it; ``orphanDependents``) —
  background deletes the owner now and its dependents after, foreground marks the owner (finalizer
  ``foregroundDeletion``) until the dependents that ``blockOwnerDeletion`` are gone, orphan (finalizer
  ``orphan``) takes the owner's references off its dependents first; a dependent none of whose owners exists
  (matched by kind, name, namespace AND uid) is deleted, with a uid precondition, and one with some owner left
  loses the references to the missing ones.  An object created owned by an object that does not exist is
  therefore collected: seed owners first.

For tests, a :class:`FakeApiServer` (``watch_cap``: the longest a watch stays open, seconds, None (default)
for ``timeoutSeconds`` alone; ``bookmark_interval``; ``history``: events kept for watches; ``graceful_pods``
(default True): deleting a bound pod only marks it, as before a kubelet finishes it; ``require_namespaces``
(default True): creates need the Namespace; ``garbage_collector`` (default True): the collector runs by
itself, ``gc_delay`` seconds after the change that made garbage (False: only when ``collect_garbage()`` is
called);
``status_subresource={"podgroups": True}`` overrides a kind's status subresource) has:

* ``client()`` (an ``ApiClient``), ``core_v1()``; ``url``;
* controllers' stand-ins, run when a test says: ``sync_budgets()`` (the disruption controller: PDB status),
  ``finish_terminating(everything=False)`` (kubelets: pods whose grace period is over are removed),
  ``collect_garbage()`` (the garbage collector's pending work, now; ``wait_collected()`` waits for its thread);
* seeding that bypasses admission (each write still a resourceVersion and an event; a namespaced object's
  Namespace is made if missing): ``put(obj)``, ``put_namespace(name)``,
  ``put_pod``, ``put_node``, ``delete_pod``, ``remove(what, name, namespace)``; reading:
  ``get(what, name, namespace)``, ``objects(what, namespace)``, the live stores ``pods`` (keyed
  ``(namespace, name)``) and ``nodes`` (keyed by name); ``rv``, ``changes`` (the kept :class:`Change` history);
  ``what`` is a plural, a ``plural.group`` or a kind; ``register(Resource(...))`` serves another kind;
* ``compact()`` (older watches get 410), ``close_watches()`` (open watches end now),
  ``expire_watches()`` (both), ``watchers`` (open watches by plural) and ``wait_watching(plural)``;
* ``requests`` (``(method, path)``), ``calls`` (:class:`Call`), ``counts`` (``(method, pattern)``),
  ``count(verb=..., plural=..., subresource=...)``, ``reset_requests()``;
* ``fail(method, path_prefix, status=..., times=..., retry_after=..., delay=...)``: the next requests that
  match fail (status 0 drops the connection; ``delay``: the failure comes late), ``clear_failures()``;
* ``blocked``: ``(namespace, name)`` of pods whose eviction is always refused (429).

The file, in order: builders; the resource registry; ``Status`` errors; selectors, patches and the
structural schema; pod rules; :class:`FakeApiServer` (the stores, seeding, watches and history, the request
log and failure injection, routing and discovery, and the verbs, all under one lock); the route table
(:class:`Request`, ``ROUTES``: (what a request addresses, method) -> one small function per verb and
subresource); the HTTP handler (read, log, inject a failure, answer, or stream a watch).

It does not implement: authentication and authorization (tests check RBAC against the request log),
admission webhooks (Volcano's included) and the OwnerReferencesPermissionEnforcement admission plugin,
server-side apply, ``resourceVersion`` semantics on list (always the latest), watch ``sendInitialEvents``,
controllers running by themselves other than the garbage collector (see ``sync_budgets`` and
``finish_terminating``; the budgets' expected count is the pods selected, not their controllers' scale; a
Running pod without a Ready condition counts as ready; no ReplicaSet makes pods, no Service gets endpoints, no
claim is bound), the garbage collector's cycle detection and its handling of owners of kinds it does not serve
(such references are left alone), namespace termination phases (deleting a namespace deletes its objects at
once), ``managedFields``, field validation, protobuf/CBOR/YAML bodies, validation of built-in kinds beyond
what is noted above, the shared storage of core and ``events.k8s.io`` Events.
"""

from __future__ import annotations

import base64
import bisect
import json
import math
import random
import re
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

CRD_DIR = Path(__file__).resolve().parents[2] / "daemonset" / "crds"


# -- builders ------------------------------------------------------------------------------------------
def pod(uid: str, name: str, node: str, *, namespace: str = "default", qos_class: str = "Burstable",
        annotations: dict | None = None, requests: dict | None = None, phase: str = "Running",
        priority: int = 0, labels: dict | None = None) -> dict:
    meta = {"uid": uid, "name": name, "namespace": namespace, "annotations": annotations or {}}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node, "priority": priority,
                     "containers": [{"name": "main", "image": "busybox",
                                     "resources": {"requests": requests or {}}}]},
            "status": {"phase": phase, "qosClass": qos_class}}


def node(name: str, labels: dict[str, str] | None = None, taints: list[dict] | None = None, *,
         allocatable: dict[str, str] | None = None) -> dict:
    obj = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels or {})},
           "spec": {"taints": list(taints or [])}}
    if allocatable is not None:
        obj["status"] = {"allocatable": dict(allocatable), "capacity": dict(allocatable)}
    return obj


class _QuietServer(ThreadingHTTPServer):
    """The HTTP server of a :class:`FakeApiServer` (``api``).  Clients closing watch connections under a
    request are normal here, not a traceback on stderr."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], api: FakeApiServer):
        self.api = api
        super().__init__(address, _Handler)

    def handle_error(self, request, client_address) -> None:
        import sys
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


# -- the resource registry -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status: bool = False  # has a status subresource
    crd: bool = False  # served from a CustomResourceDefinition
    fields: tuple[str, ...] = ()  # field selectors beyond metadata.name and metadata.namespace
    virtual: bool = False  # nothing stored: only its POST is served (core v1 bindings)
    schema: Any = field(default=None, compare=False, hash=False)  # a CRD's openAPIV3Schema, when known

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def prefix(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    @property
    def qualified(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def store_key(self) -> tuple[str, str]:
        return (self.group, self.plural)

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        out = self.prefix + (f"/namespaces/{namespace}" if namespace is not None else "") + f"/{self.plural}"
        return out + (f"/{name}" if name is not None else "") + (f"/{sub}" if sub else "")


POD_FIELDS = ("spec.nodeName", "spec.schedulerName", "spec.restartPolicy", "spec.serviceAccountName",
              "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName")
EVENT_FIELDS = ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
                "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
                "reason", "reportingComponent", "type")

RESOURCES: tuple[Resource, ...] = (
    Resource("", "v1", "pods", "Pod", True, status=True, fields=POD_FIELDS),
    Resource("", "v1", "nodes", "Node", False, status=True, fields=("spec.unschedulable",)),
    Resource("", "v1", "namespaces", "Namespace", False, status=True, fields=("status.phase",)),
    Resource("", "v1", "events", "Event", True, fields=EVENT_FIELDS),
    Resource("", "v1", "configmaps", "ConfigMap", True),
    Resource("", "v1", "secrets", "Secret", True, fields=("type",)),
    Resource("", "v1", "services", "Service", True, status=True),
    Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, status=True),
    Resource("", "v1", "bindings", "Binding", True, virtual=True),
    Resource("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True),
    Resource("apps", "v1", "deployments", "Deployment", True, status=True),
    Resource("apps", "v1", "replicasets", "ReplicaSet", True, status=True),
    Resource("apps", "v1", "statefulsets", "StatefulSet", True, status=True),
    Resource("apps", "v1", "daemonsets", "DaemonSet", True, status=True),
    Resource("batch", "v1", "jobs", "Job", True, status=True),
    Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False),
    Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, status=True),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", True),
    Resource("events.k8s.io", "v1", "events", "Event", True),
    # as Volcano's CRDs (and ours in daemonset/crds, which override these when present)
    Resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", True, status=False, crd=True),
    Resource("scheduling.volcano.sh", "v1beta1", "queues", "Queue", False, status=True, crd=True),
)


def load_crds(directory: Path = CRD_DIR) -> tuple[Resource, ...]:
    """Resources (with their schemas) from the CustomResourceDefinitions in ``directory``."""
    return _load_crds(str(directory))


@cache
def _load_crds(directory_name: str) -> tuple[Resource, ...]:
    directory = Path(directory_name)
    try:
        import yaml
    except ImportError:  # pragma: no cover - PyYAML is a dependency of the project
        return ()
    out = []
    for path in sorted(directory.glob("*.yaml")) if directory.is_dir() else []:
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for version in spec.get("versions") or []:
                if not version.get("served", True):
                    continue
                out.append(Resource(spec["group"], version["name"], spec["names"]["plural"], spec["names"]["kind"],
                                    spec.get("scope") == "Namespaced",
                                    status="status" in (version.get("subresources") or {}), crd=True,
                                    schema=(version.get("schema") or {}).get("openAPIV3Schema")))
    return tuple(out)


# -- errors --------------------------------------------------------------------------------------------
REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
           409: "Conflict", 410: "Expired", 415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests",
           500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}
STALE = "the object has been modified; please apply your changes to the latest version and try again"
EVICTION_REFUSED = "Cannot evict pod as it would violate the pod's disruption budget."


class ApiError(Exception):
    """A failure the server answers with a ``Status`` body."""

    def __init__(self, code: int, reason: str | None, message: str, *, details: dict | None = None,
                 headers: dict | None = None):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.details, self.headers = details, headers or {}

    def body(self) -> dict:
        out: dict = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": self.message}
        if self.reason:
            out["reason"] = self.reason
        if self.details:
            out["details"] = self.details
        out["code"] = self.code
        return out


def _details(res: Resource, name: str, kind: str | None = None, **extra) -> dict:
    out = {"name": name}
    if res.group:
        out["group"] = res.group
    out["kind"] = kind or res.plural
    out.update(extra)
    return out


def not_found(res: Resource, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{res.qualified} "{name}" not found', details=_details(res, name))


def conflict(res: Resource, name: str, why: str, *, qualified: str | None = None) -> ApiError:
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {qualified or res.qualified} "{name}": {why}',
                    details=_details(res, name, qualified))


def _check_preconditions(res: Resource, name: str, pre: dict, meta: dict) -> None:
    """The storage layer's preconditions: ``pre``'s uid and resourceVersion (where given) against the stored
    object's ``meta``; a Conflict naming the first that does not hold."""
    if pre.get("uid") and pre["uid"] != meta.get("uid"):
        raise conflict(res, name, f"Precondition failed: UID in precondition: {pre['uid']}, UID in object "
                                  f"meta: {meta.get('uid')}")
    if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
        raise conflict(res, name, f"Precondition failed: ResourceVersion in precondition: "
                                  f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                                  f"{meta.get('resourceVersion')}")


def invalid(res: Resource, name: str, causes: list[str]) -> ApiError:
    kind = res.kind + (f".{res.group}" if res.group else "")
    text = causes[0] if len(causes) == 1 else "[" + ", ".join(causes) + "]"
    return ApiError(422, "Invalid", f'{kind} "{name}" is invalid: {text}',
                    details=_details(res, name, res.kind, causes=[{"message": c} for c in causes]))


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def no_route() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", details={})


def success(code: int | None = None, details: dict | None = None) -> dict:
    out: dict = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if details:
        out["details"] = details
    if code:
        out["code"] = code
    return out


# -- selectors -----------------------------------------------------------------------------------------
_LABEL_TERM = re.compile(r"^\s*(?P<neg>!)?\s*(?P<key>[A-Za-z0-9][-A-Za-z0-9_./]*)\s*(?:"
                         r"(?P<op>==|=|!=)\s*(?P<value>[-A-Za-z0-9_.]*)"
                         r"|\s+(?P<setop>in|notin)\s*\((?P<values>[^)]*)\)"
                         r"|(?P<cmp>[<>])\s*(?P<number>-?\d+))?\s*$")


def _split_outside_parens(text: str) -> list[str]:
    terms, depth, current = [], 0, []
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(ch)
    terms.append("".join(current))
    return [t for t in terms if t.strip()]


def parse_label_selector(text: str) -> Callable[[dict], bool]:
    """``labelSelector`` (=, ==, !=, in, notin, exists, !exists, <, >) as a test of a labels dict."""
    tests = []
    for term in _split_outside_parens(text or ""):
        m = _LABEL_TERM.match(term)
        if not m or (m["neg"] and (m["op"] or m["setop"] or m["cmp"])):
            raise bad_request(f"unable to parse requirement: invalid label selector: {term.strip()!r}")
        key = m["key"]
        if m["op"] in ("=", "=="):
            tests.append(lambda labels, k=key, v=m["value"]: labels.get(k) == v)
        elif m["op"] == "!=":
            tests.append(lambda labels, k=key, v=m["value"]: labels.get(k) != v)
        elif m["setop"]:
            values = {v.strip() for v in m["values"].split(",") if v.strip()}
            if m["setop"] == "in":
                tests.append(lambda labels, k=key, vs=values: labels.get(k) in vs)
            else:
                tests.append(lambda labels, k=key, vs=values: labels.get(k) not in vs)
        elif m["cmp"]:
            tests.append(lambda labels, k=key, c=m["cmp"], n=int(m["number"]): _compare(labels.get(k), c, n))
        elif m["neg"]:
            tests.append(lambda labels, k=key: k not in labels)
        else:
            tests.append(lambda labels, k=key: k in labels)
    return lambda labels: all(t(labels) for t in tests)


def _compare(value: str | None, op: str, number: int) -> bool:
    try:
        have = int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return have > number if op == ">" else have < number


def _field(obj: dict, path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def parse_field_selector(text: str, res: Resource) -> Callable[[dict], bool]:
    """``fieldSelector`` (=, ==, != joined by commas) over the fields ``res`` supports."""
    allowed = {"metadata.name", "metadata.namespace", *res.fields}
    tests = []
    for term in _split_outside_parens(text or ""):
        m = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*?)\s*$", term)
        if not m:
            raise bad_request(f"invalid field selector: {term.strip()!r}")
        path, op, value = m.groups()
        if path not in allowed:
            raise bad_request(f'field label not supported: {path}')
        if op == "!=":
            tests.append(lambda obj, p=path, v=value: _field(obj, p) != v)
        else:
            tests.append(lambda obj, p=path, v=value: _field(obj, p) == v)
    return lambda obj: all(t(obj) for t in tests)


def selector_matches(selector: dict | None, labels: dict) -> bool:
    """A ``LabelSelector`` object (matchLabels, matchExpressions); None selects nothing, {} everything."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        ok = {"In": key in labels and labels[key] in values, "NotIn": labels.get(key) not in values,
              "Exists": key in labels, "DoesNotExist": key not in labels}.get(op, False)
        if not ok:
            return False
    return True


# -- patches -------------------------------------------------------------------------------------------
def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, null deletes, anything else (lists too) replaces."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


# lists of built-in kinds that a strategic merge patch merges by a key (patchMergeKey); others are replaced
MERGE_KEYS = {"conditions": "type", "containers": "name", "initContainers": "name", "ephemeralContainers": "name",
              "volumes": "name", "env": "name", "volumeMounts": "mountPath", "imagePullSecrets": "name",
              "ownerReferences": "uid", "addresses": "type"}
SET_LISTS = {"finalizers"}  # lists of scalars merged as sets


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """A strategic merge patch of a built-in kind: a merge patch whose keyed lists merge by key
    (``$patch: delete``/``replace`` honoured); all other lists (taints, tolerations) are replaced whole."""
    if not isinstance(patch, dict):
        return patch
    if patch.get("$patch") == "replace":
        return {k: v for k, v in patch.items() if k != "$patch"}
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            if key.startswith("$deleteFromPrimitiveList/"):
                field = key.split("/", 1)[1]
                out[field] = [x for x in out.get(field) or [] if x not in value]
            continue
        if value is None or (isinstance(value, dict) and value.get("$patch") == "delete"):
            out.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS and isinstance(out.get(key), list):
            out[key] = _merge_keyed_list(out[key], value, MERGE_KEYS[key])
        elif isinstance(value, list) and key in SET_LISTS and isinstance(out.get(key), list):
            out[key] = out[key] + [x for x in value if x not in out[key]]
        else:
            out[key] = strategic_merge_patch(out.get(key), value)
    return out


def _merge_keyed_list(old: list, patch: list, key: str) -> list:
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [p for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    out = list(old)
    for item in patch:
        where = next((i for i, o in enumerate(out) if isinstance(item, dict) and isinstance(o, dict)
                      and key in item and o.get(key) == item[key]), None)
        if isinstance(item, dict) and item.get("$patch") == "delete":
            if where is not None:
                del out[where]
        elif where is None:
            out.append(strategic_merge_patch({}, item))
        else:
            out[where] = strategic_merge_patch(out[where], item)
    return out


def _pointer(text: Any) -> list[str]:
    if text == "":
        return []
    if not isinstance(text, str) or not text.startswith("/"):
        raise ApiError(422, "Invalid", f"JSON pointer must start with '/': {text!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in text[1:].split("/")]


def _step(container: Any, token: str, *, for_add: bool = False) -> Any:
    if isinstance(container, dict):
        return token
    if isinstance(container, list):
        if for_add and token == "-":
            return len(container)
        if not token.isdigit() or int(token) > len(container) - (0 if for_add else 1):
            raise ApiError(422, "Invalid", f"index out of range: {token}")
        return int(token)
    raise ApiError(422, "Invalid", f"path through a non-container at {token!r}")


def _parent(doc: Any, tokens: list[str]) -> Any:
    for token in tokens[:-1]:
        index = _step(doc, token)
        if isinstance(doc, dict) and index not in doc:
            raise ApiError(422, "Invalid", f"doc is missing path: {'/'.join(tokens)}")
        doc = doc[index]
    return doc


def _get(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        return doc
    parent = _parent(doc, tokens)
    index = _step(parent, tokens[-1])
    if isinstance(parent, dict) and index not in parent:
        raise ApiError(422, "Invalid", f"doc is missing key: /{'/'.join(tokens)}")
    return parent[index]


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _parent(doc, tokens)
    index = _step(parent, tokens[-1], for_add=True)
    if isinstance(parent, list):
        parent.insert(index, value)
    else:
        parent[index] = value
    return doc


def _remove(doc: Any, tokens: list[str]) -> Any:
    _get(doc, tokens)  # must exist
    if not tokens:
        return None
    parent = _parent(doc, tokens)
    del parent[_step(parent, tokens[-1])]
    return doc


def json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902: add, remove, replace, move, copy, test."""
    if not isinstance(ops, list) or not all(isinstance(op, dict) for op in ops):
        raise bad_request("json patch must be a list of operations")
    for op in ops:
        kind, path = op.get("op"), _pointer(op.get("path"))
        if kind in ("add", "replace", "test") and "value" not in op:
            raise ApiError(422, "Invalid", f"missing value for {kind} at {op.get('path')}")
        if kind == "add":
            doc = _add(doc, path, _copy(op["value"]))
        elif kind == "remove":
            doc = _remove(doc, path)
        elif kind == "replace":
            doc = _add(_remove(doc, path), path, _copy(op["value"])) if path else _copy(op["value"])
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from"))
            value = _copy(_get(doc, source))
            if kind == "move":
                doc = _remove(doc, source)
            doc = _add(doc, path, value)
        elif kind == "test":
            if _get(doc, path) != op["value"]:
                raise ApiError(422, "Invalid", f"testing value {op.get('path')} failed: test failed")
        else:
            raise ApiError(422, "Invalid", f"Unexpected kind: {kind}")
    return doc


# -- CRD structural schemas ----------------------------------------------------------------------------
def apply_schema(value: Any, schema: dict | None, path: str, errors: list[str]) -> Any:
    """Defaults, pruning of unknown fields, then required/type/enum/pattern checks, as for a CRD."""
    if not schema or value is None:
        return value
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            errors.append(f"{path}: Invalid value: {_show(value)}: {path} in body must be of type integer,string")
        elif isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{path}: Invalid value: {_show(value)}: {path} in body should match '{schema['pattern']}'")
        return value
    kind = schema.get("type")
    if kind == "object" and isinstance(value, dict):
        return _apply_object(value, schema, path, errors)
    if kind == "array" and isinstance(value, list):
        return [apply_schema(v, schema.get("items"), f"{path}[{i}]", errors) for i, v in enumerate(value)]
    checks = {"object": dict, "array": list, "string": str, "boolean": bool, "integer": int, "number": (int, float)}
    if kind in checks and (not isinstance(value, checks[kind]) or (kind in ("integer", "number")
                                                                    and isinstance(value, bool))):
        errors.append(f"{path}: Invalid value: {_show(value)}: {path} in body must be of type {kind}: "
                      f"{_show(type(value).__name__)}")
        return value
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: Unsupported value: {_show(value)}: supported values: "
                      + ", ".join(_show(v) for v in schema["enum"]))
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        errors.append(f"{path}: Invalid value: {_show(value)}: {path} in body should match '{schema['pattern']}'")
    return value


def _apply_object(value: dict, schema: dict, path: str, errors: list[str]) -> dict:
    props, extra = schema.get("properties") or {}, schema.get("additionalProperties")
    out = {}
    for key, sub in value.items():
        where = f"{path}.{key}" if path else key
        if not path and key == "metadata":
            out[key] = sub  # ObjectMeta is the server's, never pruned by the schema
        elif sub is None and not (props.get(key) or {}).get("nullable"):
            continue  # a null of a non-nullable field is dropped (and defaulted)
        elif key in props:
            out[key] = apply_schema(sub, props[key], where, errors)
        elif isinstance(extra, dict):
            out[key] = apply_schema(sub, extra, where, errors)
        elif extra is True or schema.get("x-kubernetes-preserve-unknown-fields") or (not path and key in (
                "apiVersion", "kind", "metadata")):
            out[key] = sub
        # else: pruned, as the API server does for unknown fields of a structural schema
    for key, sub in props.items():
        if key not in out and "default" in sub:
            out[key] = apply_schema(_copy(sub["default"]), sub, f"{path}.{key}" if path else key, errors)
    for key in schema.get("required") or []:
        if key not in out:
            errors.append(f"{path}.{key}: Required value" if path else f"{key}: Required value")
    return out


def _show(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str) else str(value)


# -- pods ----------------------------------------------------------------------------------------------
_SUFFIXES = {"": 1, "m": Fraction(1, 1000), "k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12,
             "P": 10 ** 15, "E": 10 ** 18, "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40,
             "Pi": 2 ** 50, "Ei": 2 ** 60}


def quantity(text: Any) -> Fraction:
    m = re.fullmatch(r"\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)([a-zA-Z]*)\s*", str(text))
    if not m or m[2] not in _SUFFIXES:
        raise ValueError(f"bad quantity {text!r}")
    return Fraction(m[1]) * _SUFFIXES[m[2]]


def qos_class(spec: dict) -> str:
    """The pod's QoS class, as the API server computes it (cpu and memory, all containers)."""
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        res = c.get("resources") or {}
        for name in ("cpu", "memory"):
            if name in (res.get("requests") or {}) and quantity(res["requests"][name]):
                requests[name] = requests.get(name, 0) + quantity(res["requests"][name])
            if name in (res.get("limits") or {}) and quantity(res["limits"][name]):
                limits[name] = limits.get(name, 0) + quantity(res["limits"][name])
        if not {"cpu", "memory"} <= set(res.get("limits") or {}):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and requests.keys() == limits.keys() and all(requests[k] == limits[k] for k in requests):
        return "Guaranteed"
    return "Burstable"


# -- validation of built-in kinds (k8s.io/apimachinery/pkg/util/validation, pkg/apis/core/validation) ---------
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = _LABEL + r"(\." + _LABEL + r")*"
_QUALIFIED = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
QUANTITY_REGEX = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"


def name_errors(name: str, *, label: bool = False) -> list[str]:
    """kube's NameIsDNSSubdomain (most kinds) or NameIsDNSLabel (namespaces), as ``metadata.name`` causes."""
    if label:
        ok = len(name) <= 63 and re.fullmatch(_LABEL, name)
        why = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
               "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
               f"validation is '{_LABEL}')")
    else:
        ok = len(name) <= 253 and re.fullmatch(_SUBDOMAIN, name)
        why = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
               "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation "
               f"is '{_SUBDOMAIN}')")
    return [] if ok else [f"metadata.name: Invalid value: {_show(name)}: {why}"]


def pod_resource_errors(spec: dict) -> list[str]:
    """Negative requests or limits, and requests over their limits (kube: ValidateResourceRequirements).
    Text that is no quantity at all never gets here: it cannot be decoded (400, :func:`undecodable`)."""
    errors = []
    for kind in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(kind) or []):
            res = c.get("resources") or {}
            where = f"spec.{kind}[{i}].resources"
            for part in ("limits", "requests"):
                for rname, value in (res.get(part) or {}).items():
                    if quantity(value) < 0:
                        errors.append(f"{where}.{part}[{rname}]: Invalid value: {_show(str(value))}: must be "
                                      f"greater than or equal to 0")
            for rname, value in (res.get("requests") or {}).items():
                limit = (res.get("limits") or {}).get(rname)
                if limit is not None and quantity(value) > quantity(limit):
                    errors.append(f"{where}.requests: Invalid value: {_show(str(value))}: must be less than or "
                                  f"equal to {rname} limit of {limit}")
    return errors


def undecodable(spec: dict, kind: str = "Pod") -> ApiError | None:
    """A quantity that does not parse fails the decoding of the body: 400, not 422 (kube's Quantity
    UnmarshalJSON: "quantities must match the regular expression ...")."""
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or []:
            for part in ("limits", "requests"):
                for value in ((c.get("resources") or {}).get(part) or {}).values():
                    try:
                        quantity(value)
                    except ValueError:
                        return bad_request(f'{kind} in version "v1" cannot be handled as a {kind}: quantities must '
                                           f"match the regular expression '{QUANTITY_REGEX}'")
    return None


POD_SYSTEM_CONDITIONS = ("PodScheduled", "Ready", "Initialized")


def pod_condition_errors(status: dict) -> list[str]:
    """kube's validatePodConditions: a condition type other than the system ones is a qualified name (so
    never empty).  The field path is kube's, ``Type`` capitalised."""
    errors = []
    for i, c in enumerate(status.get("conditions") or []):
        kind = c.get("type") or ""
        if kind in POD_SYSTEM_CONDITIONS:
            continue
        name = kind.rsplit("/", 1)[-1]
        if not name:
            errors.append(f"status.conditions[{i}].Type: Invalid value: {_show(kind)}: name part must be non-empty")
        elif len(name) > 63 or not re.fullmatch(_QUALIFIED, name):
            errors.append(f"status.conditions[{i}].Type: Invalid value: {_show(kind)}: name part must consist of "
                          f"alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
                          f"character")
    return errors


def event_namespace_errors(event: dict) -> list[str]:
    """kube's legacyValidateEvent (pkg/apis/core/validation/events.go): without eventTime the event's namespace
    is its involvedObject's (or default/empty for a cluster-scoped object); with one, only a cluster-scoped
    object's event is tied (to default or kube-system)."""
    ns = event["metadata"].get("namespace") or ""
    involved = (event.get("involvedObject") or {}).get("namespace") or ""
    if not event.get("eventTime"):
        bad = ns not in ("", "default") if not involved else ns != involved
    else:
        bad = not involved and ns not in ("default", "kube-system")
    return [f"involvedObject.namespace: Invalid value: {_show(involved)}: does not match event.namespace"] if bad else []


SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def _name_label(namespace: dict) -> None:
    """The API server sets ``kubernetes.io/metadata.name`` on every namespace it creates or updates."""
    meta = namespace["metadata"]
    if not isinstance(meta.get("labels"), dict):
        meta["labels"] = {}
    meta["labels"]["kubernetes.io/metadata.name"] = meta["name"]


def _namespace(name: str, now: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "uid": str(uuid.uuid4()), "creationTimestamp": now, "generation": 1,
                         "labels": {"kubernetes.io/metadata.name": name}},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}


SYSTEM_PRIORITIES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
TERMINAL = ("Succeeded", "Failed")


def _ready(p: dict) -> bool:
    """Ready, as the fake reads it: Running and not marked Ready=False (kube wants Ready=True; seeded pods
    seldom carry conditions)."""
    ready = [c for c in (p.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
    return (p.get("status") or {}).get("phase") == "Running" and not any(c.get("status") == "False" for c in ready)


def _healthy(p: dict) -> bool:
    """Counts towards a disruption budget: ready and not being deleted."""
    return _ready(p) and not p["metadata"].get("deletionTimestamp")


def _scaled(value: Any, total: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def _set_condition(obj: dict, condition: dict, now: str, *, probe: bool = True) -> None:
    conditions = obj.setdefault("status", {}).setdefault("conditions", [])
    for i, c in enumerate(conditions):
        if c.get("type") == condition["type"]:
            changed = c.get("status") != condition["status"]
            conditions[i] = {**c, **condition, "lastTransitionTime": now if changed else c.get("lastTransitionTime")}
            return
    conditions.append({**condition, **({"lastProbeTime": None} if probe else {}), "lastTransitionTime": now})


def _copy(obj: Any) -> Any:
    return json.loads(json.dumps(obj))


def _content(res: Resource, obj: dict) -> dict:
    """What a change of bumps ``metadata.generation``: all but metadata, and but status unless the kind is a
    custom resource without a status subresource."""
    skip = ("metadata", "kind", "apiVersion") + (() if res.crd and not res.status else ("status",))
    return {k: v for k, v in obj.items() if k not in skip}


# -- other built-in kinds (pkg/registry/*/strategy.go, pkg/apis/*/validation) --------------------------------
CONFIG_KEY = r"[-._a-zA-Z0-9]+"
APPS_WORKLOADS = (("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets"), ("apps", "daemonsets"))
#: a deletion's default propagation where it is not Background (kube keeps Orphan for batch/v1 jobs)
ORPHAN_BY_DEFAULT = {("batch", "jobs")}
#: the finalizers the garbage collector works through, by the propagation that sets them
GC_FINALIZERS = {"Orphan": "orphan", "Foreground": "foregroundDeletion"}


def config_key_errors(obj: dict, field: str) -> list[str]:
    """kube's IsConfigMapKey for the keys of a ConfigMap's or Secret's ``data`` (and ``binaryData``)."""
    errors = []
    for key in (obj.get(field) or {}):
        if not (len(key) <= 253 and re.fullmatch(CONFIG_KEY, key) and key not in (".", "..")):
            errors.append(f"{field}[{key}]: Invalid value: {_show(key)}: a valid config key must consist of "
                          f"alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or "
                          f"'key-name', regex used for validation is '{CONFIG_KEY}')")
    return errors


def normalize_secret(obj: dict) -> None:
    """A Secret as the API server decodes it: ``data`` values are base64 (400 otherwise: the body cannot be
    decoded), ``stringData`` overrides ``data`` and is never stored, ``type`` defaults to Opaque."""
    for key, value in (obj.get("data") or {}).items():
        try:
            if not isinstance(value, str):
                raise ValueError("not a string")
            base64.b64decode(value.encode(), validate=True)
        except (ValueError, TypeError):
            raise bad_request(f'Secret in version "v1" cannot be handled as a Secret: illegal base64 data at '
                              f"input byte 0 (data[{key}])") from None
    if obj.get("stringData"):
        data = obj.setdefault("data", {})
        for key, value in obj.pop("stringData").items():
            data[key] = base64.b64encode(str(value).encode()).decode()
    obj.pop("stringData", None)
    obj.setdefault("type", "Opaque")


def service_defaults(obj: dict) -> list[str]:
    """A Service's defaults (type, session affinity, protocols, target ports, address families) and the
    errors kube's validation finds in the rest; the cluster IP is the caller's to allocate."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    errors = []
    headless = spec.get("clusterIP") == "None"
    if not spec.get("ports") and not headless and spec["type"] != "ExternalName":
        errors.append("spec.ports: Required value")
    ports = spec.get("ports") or []
    for i, port in enumerate(ports):
        port.setdefault("protocol", "TCP")
        number = port.get("port")
        if not isinstance(number, int) or isinstance(number, bool) or not 1 <= number <= 65535:
            errors.append(f"spec.ports[{i}].port: Invalid value: {number}: must be between 1 and 65535, inclusive")
        port.setdefault("targetPort", number)
        if len(ports) > 1 and not port.get("name"):
            errors.append(f"spec.ports[{i}].name: Required value")
    if not headless and spec["type"] != "ExternalName":
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("internalTrafficPolicy", "Cluster")
    return errors


def claim_errors(obj: dict) -> list[str]:
    spec = obj.setdefault("spec", {})
    spec.setdefault("volumeMode", "Filesystem")
    errors = []
    if not spec.get("accessModes") and not spec.get("dataSourceRef"):
        errors.append("spec.accessModes: Required value: at least 1 access mode is required")
    if "storage" not in ((spec.get("resources") or {}).get("requests") or {}):
        errors.append("spec.resources[storage]: Required value")
    return errors


def workload_errors(obj: dict) -> list[str]:
    """An apps/v1 workload: a selector is required and must select the template's labels."""
    spec = obj.get("spec") or {}
    selector = spec.get("selector")
    if not selector:
        return ["spec.selector: Required value"]
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if not selector_matches(selector, labels):
        return [f"spec.template.metadata.labels: Invalid value: {json.dumps(labels)}: `selector` does not match "
                f"template `labels`"]
    return []


def owner_refs(obj: dict) -> list[dict]:
    return [r for r in (obj.get("metadata") or {}).get("ownerReferences") or [] if isinstance(r, dict)]


# -- the server ----------------------------------------------------------------------------------------
@dataclass
class Change:
    rv: int
    store_key: tuple[str, str]
    type: str  # ADDED, MODIFIED, DELETED
    obj: dict  # a snapshot
    old: dict | None  # what it was before a MODIFIED (for selector-filtered watches)


@dataclass
class Call:
    """One request as the server saw it."""
    method: str
    path: str
    query: dict
    pattern: str  # the path with {namespace} and {name} in place of the values
    verb: str  # list, watch, get, create, update, patch, delete, deletecollection, discovery
    plural: str | None = None
    group: str | None = None
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    body: Any = None
    status: int = 0


@dataclass
class Failure:
    """Make the next ``times`` requests matching (method, path prefix) fail with ``status``."""
    method: str | None
    prefix: str
    status: int
    times: int | None = 1  # None: until cleared
    reason: str | None = None
    message: str | None = None
    watch: bool | None = None  # only watches (True), only non-watches (False), both (None)
    retry_after: int | None = None
    delay: float = 0.0  # seconds the answer (or the drop) waits: longer than the client's read timeout, a timeout
    hits: int = 0

    def matches(self, method: str, path: str, is_watch: bool) -> bool:
        return ((self.times is None or self.times > 0) and (self.method in (None, "*", method))
                and path.startswith(self.prefix) and (self.watch is None or self.watch == is_watch))


@dataclass
class Route:
    res: Resource
    namespace: str | None
    name: str | None
    sub: str | None


@dataclass
class WatchStart:
    """Where a new watch starts: 410 at once (``expired``; ``oldest``: the oldest resourceVersion kept), or
    the ``initial`` ADDED events (a watch without a resourceVersion), then changes after ``sent``."""
    expired: bool
    oldest: int
    initial: list[dict]
    sent: int
    epoch: int


class FakeApiServer:
    """See the module docstring.  Use as a context manager (or ``start()``/``stop()``)."""

    def __init__(self, *, watch_cap: float | None = None, history: int = 1000, graceful_pods: bool = True,
                 require_namespaces: bool = True, crds: Path | None = CRD_DIR,
                 status_subresource: dict[str, bool] | None = None, resources: tuple[Resource, ...] = RESOURCES,
                 clock: Callable[[], float] = time.time, bookmark_interval: float = 60.0,
                 garbage_collector: bool = True, gc_delay: float = 0.0):
        self.watch_cap, self.history_limit, self.bookmark_interval = watch_cap, history, bookmark_interval
        self.garbage_collector, self.gc_delay = garbage_collector, gc_delay
        # the garbage collector's graph: owner uid -> the objects naming it, and what it must look at again
        self._dependents: dict[str, set[tuple[tuple[str, str], Any]]] = {}
        self._gc_work: set[tuple[tuple[str, str], Any]] = set()
        self.graceful_pods, self.require_namespaces, self.clock = graceful_pods, require_namespaces, clock
        self.resources: dict[tuple[str, str, str], Resource] = {}
        self._stores: dict[tuple[str, str], dict] = {}
        for res in (*resources, *(load_crds(crds) if crds else ())):
            if status_subresource and res.plural in status_subresource:
                res = replace(res, status=status_subresource[res.plural])
            self.register(res)
        self.rv = 1
        self.changes: list[Change] = []
        self.resumable_from = 0  # a watch from a resourceVersion below this gets 410 Expired
        self.blocked: set[tuple[str, str]] = set()
        self.requests: list[tuple[str, str]] = []
        self.calls: list[Call] = []
        self.counts: Counter = Counter()
        self.failures: list[Failure] = []
        self.watchers: Counter = Counter()  # open watches by plural
        self._epoch = 0  # close_watches() bumps it: open watches end
        self._closing = False
        self._cond = threading.Condition()
        self._sockets: set[socket.socket] = set()
        self._server = _QuietServer(("127.0.0.1", 0), self)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="fake-apiserver", daemon=True)
        self._gc_thread = threading.Thread(target=self._gc_loop, name="fake-apiserver-gc", daemon=True)
        for ns in SYSTEM_NAMESPACES:  # as a fresh cluster has them
            self.put_namespace(ns)

    # -- life ---------------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeApiServer:
        self._thread.start()
        if self.garbage_collector:
            self._gc_thread.start()
        return self

    def stop(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
        for sock in list(self._sockets):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def client(self):
        """The real client's ``ApiClient`` pointed at this server (build any ``...Api`` from it)."""
        from kubernetes import client
        config = client.Configuration()
        config.host = self.url
        config.proxy = None  # loopback: never through a proxy from the environment
        return client.ApiClient(config)

    def core_v1(self):
        """The real client's CoreV1Api, pointed at this server."""
        from kubernetes import client
        return client.CoreV1Api(self.client())

    # -- the registry -------------------------------------------------------------------------------
    def register(self, res: Resource) -> None:
        """Serve ``res`` (a later registration of the same group/version/plural replaces the earlier)."""
        self.resources[(res.group, res.version, res.plural)] = res
        if not res.virtual:
            self._stores.setdefault(res.store_key, {})

    def resource(self, what: str | Resource) -> Resource:
        """A resource by plural ("pods"), qualified plural ("leases.coordination.k8s.io") or kind ("Lease")."""
        if isinstance(what, Resource):
            return what
        for res in self.resources.values():
            if what in (res.plural, res.qualified, res.kind) and not res.virtual:
                return res
        raise KeyError(what)

    def _resource_of(self, obj: dict) -> Resource:
        for res in self.resources.values():
            if res.api_version == obj.get("apiVersion") and res.kind == obj.get("kind") and not res.virtual:
                return res
        raise KeyError(f"no resource for {obj.get('apiVersion')} {obj.get('kind')}")

    # -- the stores ---------------------------------------------------------------------------------
    @property
    def pods(self) -> dict:
        return self._stores[("", "pods")]

    @property
    def nodes(self) -> dict:
        return self._stores[("", "nodes")]

    def _store(self, res: Resource) -> dict:
        return self._stores[res.store_key]

    @staticmethod
    def _key(res: Resource, namespace: str | None, name: str) -> Any:
        return (namespace, name) if res.namespaced else name

    def _key_of(self, res: Resource, obj: dict) -> Any:
        return self._key(res, obj["metadata"].get("namespace"), obj["metadata"]["name"])

    def _now(self, offset: float = 0) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.clock() + offset))

    def _write(self, res: Resource, kind: str, obj: dict, old: dict | None) -> dict:
        """The one place objects change: a new resourceVersion and a watch event.  Holds the lock."""
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        store, key = self._store(res), self._key_of(res, obj)
        self._track_owners(res, key, store.get(key), None if kind == "DELETED" else obj)
        if kind == "DELETED":
            store.pop(key, None)
        else:
            store[key] = obj
        self.changes.append(Change(self.rv, res.store_key, kind, _copy(obj), old))
        if len(self.changes) > self.history_limit:
            dropped = len(self.changes) - self.history_limit
            self.resumable_from = self.changes[dropped - 1].rv
            del self.changes[:dropped]
        self._cond.notify_all()
        return obj

    # -- changing the world directly (no admission, no checks) --------------------------------------
    def put(self, obj: dict) -> dict:
        """Store ``obj`` as given, server fields filled where missing (from the object it replaces, if any).
        Another uid under a taken name is a delete and a create, as watchers would see it."""
        res = self._resource_of(obj)
        with self._cond:
            new = _copy(obj)
            meta = new.setdefault("metadata", {})
            if res.namespaced:
                meta.setdefault("namespace", "default")
                if meta["namespace"] not in self._stores[("", "namespaces")]:  # seeding: the namespace exists
                    self._write(self.resource("namespaces"), "ADDED", _namespace(meta["namespace"], self._now()), None)
            old = self._store(res).get(self._key_of(res, new))
            if old is not None and meta.get("uid", old["metadata"].get("uid")) != old["metadata"].get("uid"):
                self._write(res, "DELETED", _copy(old), None)
                old = None
            kept = old["metadata"] if old is not None else {}
            meta.setdefault("uid", kept.get("uid") or str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", kept.get("creationTimestamp") or self._now())
            meta.setdefault("generation", kept.get("generation", 1))
            return _copy(self._write(res, "MODIFIED" if old is not None else "ADDED", new, old))

    def get(self, what: str | Resource, name: str, namespace: str | None = None) -> dict | None:
        res = self.resource(what)
        with self._cond:
            obj = self._store(res).get(self._key(res, namespace or ("default" if res.namespaced else None), name))
            return _copy(obj) if obj is not None else None

    def objects(self, what: str | Resource, namespace: str | None = None) -> list[dict]:
        res = self.resource(what)
        with self._cond:
            return [_copy(o) for k, o in sorted(self._store(res).items())
                    if namespace is None or o["metadata"].get("namespace") == namespace]

    def remove(self, what: str | Resource, name: str, namespace: str | None = None) -> dict:
        """Delete at once (no finalizers, no grace); KeyError when there is none."""
        res = self.resource(what)
        with self._cond:
            key = self._key(res, namespace or ("default" if res.namespaced else None), name)
            obj = self._store(res)[key]
            return self._write(res, "DELETED", _copy(obj), None)

    def put_pod(self, obj: dict) -> None:
        self.put(obj)

    def put_namespace(self, name: str, labels: dict[str, str] | None = None) -> dict:
        """An Active Namespace (clients' creates in a namespace that does not exist get 404); ``labels``
        (besides ``kubernetes.io/metadata.name``) replace those of one that exists."""
        with self._cond:
            res = self.resource("namespaces")
            existing = self._stores[("", "namespaces")].get(name)
            if existing is not None:
                if labels is None:
                    return _copy(existing)
                new = _copy(existing)
                new["metadata"]["labels"] = dict(labels)
                _name_label(new)
                if new == existing:
                    return new
                return _copy(self._write(res, "MODIFIED", new, existing))
            fresh = _namespace(name, self._now())
            fresh["metadata"]["labels"].update(labels or {})
            _name_label(fresh)
            return _copy(self._write(res, "ADDED", fresh, None))

    def delete_pod(self, namespace: str, name: str) -> None:
        self.remove("pods", name, namespace)

    def put_node(self, name: str, labels: dict[str, str], taints: list[dict] | None = None, **kw) -> None:
        self.put(node(name, labels, taints, **kw))

    # -- watches and history ------------------------------------------------------------------------
    def compact(self) -> None:
        """Forget the event history (as etcd compaction does): watches from before now get 410."""
        with self._cond:
            self.resumable_from = self.rv
            self.changes.clear()

    def close_watches(self) -> None:
        """End every open watch now (cleanly, as a server timeout does): clients watch again."""
        with self._cond:
            self._epoch += 1
            self._cond.notify_all()

    def expire_watches(self) -> None:
        """Compact and close: watchers come back with a resourceVersion that is too old (410), and relist."""
        self.compact()
        self.close_watches()

    def wait_watching(self, what: str, n: int = 1, timeout: float = 5.0) -> bool:
        """Wait until at least ``n`` watches of ``what`` (a plural) are open."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.watchers[what] < n:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def _changes_after(self, rv: int) -> list[Change]:
        return self.changes[bisect.bisect_right(self.changes, rv, key=lambda c: c.rv):]

    def _open_watch(self, res: Resource, match: Callable[[dict], bool], since: int | None) -> WatchStart:
        """A watch of ``res`` opens (counted in ``watchers`` until :meth:`_close_watch`): where it starts."""
        with self._cond:
            start = WatchStart(
                expired=since is not None and since < self.resumable_from, oldest=self.resumable_from,
                initial=[] if since is not None else [
                    {"type": "ADDED", "object": _copy(o)} for _, o in sorted(self._store(res).items()) if match(o)],
                sent=since if since is not None else self.rv, epoch=self._epoch)
            self.watchers[res.plural] += 1
            self._cond.notify_all()
        return start

    def _close_watch(self, res: Resource) -> None:
        with self._cond:
            self.watchers[res.plural] -= 1

    def _wait_changes(self, sent: int, epoch: int, deadline: float) -> tuple[list[Change], str | None, int]:
        """(the changes after ``sent``, None, 0) once there are any; else ([], why the watch ends, rv):
        "closed" (``stop()`` or ``close_watches()`` since ``epoch``), "lost" (history it had not seen is
        gone), "timeout" (``deadline`` passed; rv: the resourceVersion then, for a bookmark)."""
        with self._cond:
            while True:
                if self._closing or self._epoch != epoch:
                    return [], "closed", 0
                if sent < self.resumable_from:
                    return [], "lost", 0
                batch = self._changes_after(sent)
                if batch:
                    return batch, None, 0
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return [], "timeout", self.rv
                self._cond.wait(remaining)

    # -- request log and failure injection ----------------------------------------------------------
    def count(self, **match) -> int:
        """How many requests had all the given :class:`Call` attributes (verb="patch", plural=...)."""
        with self._cond:
            return sum(1 for c in self.calls if all(getattr(c, k) == v for k, v in match.items()))

    def reset_requests(self) -> None:
        with self._cond:
            self.requests.clear()
            self.calls.clear()
            self.counts.clear()

    def fail(self, method: str | None, prefix: str, *, status: int = 500, times: int | None = 1,
             reason: str | None = None, message: str | None = None, watch: bool | None = None,
             retry_after: int | None = None, delay: float = 0.0) -> Failure:
        """The next ``times`` requests with ``method`` (None: any) and a path starting with ``prefix``
        fail with ``status`` and a ``Status`` body; status 0 drops the connection without an answer.

        With ``retry_after`` (a Retry-After header, as the API server's 429s from priority and fairness carry),
        urllib3 in the client retries a GET by itself; a dropped GET is retried too (three times).  With
        ``delay`` the failure comes that many seconds late (past the client's read timeout: a timeout)."""
        rule = Failure(method, prefix, status, times, reason, message, watch, retry_after, delay)
        with self._cond:
            self.failures.append(rule)
        return rule

    def clear_failures(self) -> None:
        with self._cond:
            self.failures.clear()

    def _record(self, call: Call, is_watch: bool) -> Failure | None:
        """Log one request; the injected failure it meets, if any (taken: it counts one time)."""
        with self._cond:
            self.requests.append((call.method, call.path))
            self.calls.append(call)
            self.counts[(call.method, call.pattern)] += 1
            return self._take_failure(call.method, call.path, is_watch)

    def _take_failure(self, method: str, path: str, is_watch: bool) -> Failure | None:
        for rule in self.failures:
            if rule.matches(method, path, is_watch):
                rule.hits += 1
                if rule.times is not None:
                    rule.times -= 1
                return rule
        return None

    # -- routing ------------------------------------------------------------------------------------
    def route(self, path: str) -> Route | tuple | None:
        """A :class:`Route`, ("discovery", ...) for discovery paths, or None."""
        parts = [unquote(p) for p in path.strip("/").split("/")] if path.strip("/") else []
        if parts in (["api"], ["apis"], ["version"]):
            return ("discovery", parts[0])
        if parts[:1] == ["api"] and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        if not rest:
            return ("discovery", group, version)
        namespace = None
        inner = self.resources.get((group, version, rest[2])) if len(rest) >= 3 else None
        if rest[0] == "namespaces" and inner is not None and inner.namespaced:
            namespace, rest = rest[1], rest[2:]
        res = self.resources.get((group, version, rest[0]))
        if res is None or len(rest) > 3 or (res.namespaced and namespace is None and len(rest) > 1):
            return None
        return Route(res, namespace, rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None)

    def discovery(self, target: tuple) -> dict:
        if target == ("discovery", "version"):
            return {"major": "1", "minor": "31", "gitVersion": "v1.31.0-scoria-fake", "platform": "linux/amd64"}
        if target == ("discovery", "api"):
            return {"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": self.url[7:]}]}
        if target == ("discovery", "apis"):
            groups: dict[str, list[str]] = {}
            for g, v, _ in self.resources:
                if g and v not in groups.setdefault(g, []):
                    groups[g].append(v)
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                 "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]}} for g, vs in groups.items()]}
        _, group, version = target
        listed = [r for (g, v, _), r in self.resources.items() if (g, v) == (group, version)]
        if not listed:
            raise no_route()
        items = []
        for r in listed:
            verbs = ["create"] if r.virtual else ["create", "delete", "deletecollection", "get", "list", "patch",
                                                  "update", "watch"]
            items.append({"name": r.plural, "singularName": r.kind.lower(), "namespaced": r.namespaced,
                          "kind": r.kind, "verbs": verbs})
            if r.status:
                items.append({"name": f"{r.plural}/status", "singularName": "", "namespaced": r.namespaced,
                              "kind": r.kind, "verbs": ["get", "patch", "update"]})
            if r.store_key == ("", "pods"):
                items += [{"name": "pods/binding", "singularName": "", "namespaced": True, "kind": "Binding",
                           "verbs": ["create"]},
                          {"name": "pods/eviction", "singularName": "", "namespaced": True, "kind": "Eviction",
                           "group": "policy", "version": "v1", "verbs": ["create"]}]
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": items}

    def dispatch(self, req: Request) -> tuple[int, dict]:
        """Serve one (non-watch) request for a resource by the route table: (status code, body)."""
        target = _target(req.route)
        serve = ROUTES.get((target, req.method))
        if serve is None:
            raise no_route() if target is None or target in _SUBRESOURCE_TARGETS else method_not_allowed()
        with self._cond:
            return serve(self, req)

    # -- verbs (all under the lock) -----------------------------------------------------------------
    def _lookup(self, res: Resource, ns: str | None, name: str) -> dict:
        obj = self._store(res).get(self._key(res, ns, name))
        if obj is None:
            raise not_found(res, name)
        return obj

    def matcher(self, res: Resource, ns: str | None, query: dict) -> Callable[[dict], bool]:
        labels = parse_label_selector(query.get("labelSelector", ""))
        fields = parse_field_selector(query.get("fieldSelector", ""), res)
        return lambda obj: ((ns is None or obj["metadata"].get("namespace") == ns)
                            and labels(obj["metadata"].get("labels") or {}) and fields(obj))

    def _list(self, res: Resource, ns: str | None, query: dict) -> dict:
        match = self.matcher(res, ns, query)
        rv, start = str(self.rv), None
        if query.get("continue"):
            try:
                token = json.loads(base64.urlsafe_b64decode(query["continue"].encode()))
                rv, start = token["rv"], tuple(token["start"]) if isinstance(token["start"], list) else token["start"]
            except (ValueError, KeyError, TypeError):
                raise bad_request("continue key is not valid") from None
        keys = sorted(k for k, o in self._store(res).items() if (start is None or k > start) and match(o))
        limit = int(query.get("limit") or 0)
        meta: dict = {"resourceVersion": rv}
        if limit and len(keys) > limit:
            token = {"rv": rv, "start": keys[limit - 1]}
            meta["continue"] = base64.urlsafe_b64encode(json.dumps(token).encode()).decode()
            meta["remainingItemCount"] = len(keys) - limit
            keys = keys[:limit]
        items = [_copy(self._store(res)[k]) for k in keys]
        if not res.crd:  # a built-in list's items carry no kind/apiVersion; a custom resource's do
            for item in items:
                item.pop("kind", None)
                item.pop("apiVersion", None)
        return {"kind": f"{res.kind}List", "apiVersion": res.api_version, "metadata": meta, "items": items}

    def _create(self, res: Resource, ns: str | None, body: dict, dry: bool) -> dict:
        obj = _copy(body)
        obj["kind"], obj["apiVersion"] = res.kind, res.api_version
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        obj["metadata"] = meta
        if res.namespaced:
            if meta.get("namespace") and meta["namespace"] != ns:
                raise bad_request("the namespace of the provided object does not match the namespace sent on the "
                                  "request")
            meta["namespace"] = ns
            if self.require_namespaces and ns not in self._stores[("", "namespaces")]:
                raise not_found(self.resource("namespaces"), ns)  # type: ignore[arg-type]
        else:
            meta.pop("namespace", None)
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise invalid(res, "", ["metadata.name: Required value: name or generateName is required"])
            meta["name"] = meta["generateName"] + "".join(random.choices("bcdfghjklmnpqrstvwxz2456789", k=5))
        errors = name_errors(meta["name"], label=res.store_key == ("", "namespaces"))
        if res.store_key == ("", "events"):
            errors += event_namespace_errors(obj)
        if errors:
            raise invalid(res, meta["name"], errors)
        if self._key_of(res, obj) in self._store(res):
            raise ApiError(409, "AlreadyExists", f'{res.qualified} "{meta["name"]}" already exists',
                           details=_details(res, meta["name"]))
        for f in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "managedFields"):
            meta.pop(f, None)
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=self._now(), generation=1)
        self._prepare_create(res, obj)
        obj = self._validate(res, obj)
        return obj if dry else self._write(res, "ADDED", obj, None)

    def _prepare_create(self, res: Resource, obj: dict) -> None:
        if res.crd and res.status:
            obj.pop("status", None)
        self._prepare_kind(res, obj, None)
        if res.store_key == ("", "pods"):
            self._prepare_pod(obj)
        elif res.store_key == ("", "namespaces"):
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            obj["status"] = {"phase": "Active"}
            _name_label(obj)
        elif res.store_key == ("policy", "poddisruptionbudgets"):
            obj["status"] = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}

    def _prepare_kind(self, res: Resource, obj: dict, old: dict | None) -> None:
        """The rules of the kinds a controller creates and updates (``old``: None on create); 422 or 400."""
        key, name = res.store_key, obj["metadata"]["name"]
        errors: list[str] = []
        if key in (("", "configmaps"), ("", "secrets")):
            if key == ("", "secrets"):
                normalize_secret(obj)
            errors += config_key_errors(obj, "data") + config_key_errors(obj, "binaryData")
            if old is not None and old.get("immutable") and any(obj.get(f) != old.get(f) for f in (
                    "data", "binaryData", "immutable")):
                errors.append("data: Forbidden: field is immutable when `immutable` is set")
        elif key == ("", "services"):
            errors += service_defaults(obj)
            spec, before = obj["spec"], (old or {}).get("spec") or {}
            if old is not None and before.get("clusterIP") and not spec.get("clusterIP") \
                    and spec.get("type") == before.get("type"):
                spec["clusterIP"], spec["clusterIPs"] = before["clusterIP"], list(before.get("clusterIPs") or [])
            if old is not None and before.get("clusterIP") and spec.get("clusterIP") != before["clusterIP"]:
                errors.append(f"spec.clusterIPs[0]: Invalid value: {json.dumps([spec.get('clusterIP')])}: may not "
                              f"change once set")
            elif old is None and spec["type"] != "ExternalName":
                if not spec.get("clusterIP"):
                    spec["clusterIP"] = self._cluster_ip()
                spec["clusterIPs"] = [spec["clusterIP"]]
        elif key == ("", "persistentvolumeclaims"):
            errors += claim_errors(obj)
            if old is not None:
                fixed = ({k: v for k, v in (o.get("spec") or {}).items() if k not in ("resources", "volumeName")}
                         for o in (obj, old))
                if next(fixed) != next(fixed):
                    errors.append("spec: Forbidden: spec is immutable after creation except resources.requests "
                                  "and volumeAttributesClassName for bound claims")
        elif key == ("networking.k8s.io", "networkpolicies"):
            spec = obj.setdefault("spec", {})
            spec.setdefault("podSelector", {})
            if not spec.get("policyTypes"):
                spec["policyTypes"] = ["Ingress"] + (["Egress"] if spec.get("egress") else [])
        elif key in APPS_WORKLOADS:
            errors += workload_errors(obj)
            if key != ("apps", "daemonsets"):
                obj.setdefault("spec", {}).setdefault("replicas", 1)
        if errors:
            raise invalid(res, name, errors)
        if old is None and res.status and not res.crd and key in (
                ("", "services"), ("", "persistentvolumeclaims"), ("batch", "jobs"), *APPS_WORKLOADS):
            obj["status"] = {"phase": "Pending"} if key == ("", "persistentvolumeclaims") else \
                {"loadBalancer": {}} if key == ("", "services") else {}

    def _cluster_ip(self) -> str:
        """The next free address of the service range 10.96.0.0/12 (the first, .1, is the API server's)."""
        taken = {(o.get("spec") or {}).get("clusterIP") for o in self._store(self.resource("services")).values()}
        n = 2
        while f"10.96.{n // 256}.{n % 256}" in taken:
            n += 1
        return f"10.96.{n // 256}.{n % 256}"

    def _prepare_pod(self, obj: dict) -> None:
        """Defaulting and the Priority admission plugin, as for a pod created through the API."""
        pods, name = self.resource("pods"), obj["metadata"]["name"]
        spec = obj.setdefault("spec", {})
        if not spec.get("containers"):
            raise invalid(pods, name, ["spec.containers: Required value"])
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        broken = undecodable(spec)
        if broken is not None:
            raise broken
        for c in (spec.get("initContainers") or []) + spec["containers"]:
            res = c.setdefault("resources", {})
            if res.get("limits"):
                res["requests"] = {**res["limits"], **(res.get("requests") or {})}
        classes = self._stores[("scheduling.k8s.io", "priorityclasses")]
        wanted = spec.get("priorityClassName")
        policy = None
        if wanted in SYSTEM_PRIORITIES:
            value = SYSTEM_PRIORITIES[wanted]
        elif wanted:
            if wanted not in classes:
                raise ApiError(403, "Forbidden", f'pods "{name}" is forbidden: no PriorityClass with name {wanted} '
                                                 f'was found', details=_details(pods, name))
            value, policy = classes[wanted].get("value", 0), classes[wanted].get("preemptionPolicy")
        else:
            default = next((c for c in classes.values() if c.get("globalDefault")), None)
            value = default.get("value", 0) if default else 0
            if default:
                spec["priorityClassName"], policy = default["metadata"]["name"], default.get("preemptionPolicy")
        if spec.get("priority") is not None and spec["priority"] != value:
            raise ApiError(403, "Forbidden", f'pods "{name}" is forbidden: the integer value of priority '
                                             f'({spec["priority"]}) must not be provided in pod spec; priority '
                                             f'admission controller computed {value} from the given PriorityClass '
                                             f'name', details=_details(pods, name))
        spec["priority"] = value
        spec.setdefault("preemptionPolicy", policy or "PreemptLowerPriority")
        errors = pod_resource_errors(spec)
        if errors:
            raise invalid(pods, name, errors)
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}

    def _validate(self, res: Resource, obj: dict) -> dict:
        if res.schema is None:
            return obj
        errors: list[str] = []
        out = apply_schema(obj, res.schema, "", errors)
        if errors:
            raise invalid(res, obj["metadata"]["name"], errors)
        return out

    def _replace(self, res: Resource, ns: str | None, name: str, body: dict, sub: str | None, dry: bool) -> dict:
        old = self._lookup(res, ns, name)
        return self._update(res, old, body, sub=sub, rv_required=res.crd, dry=dry)

    def _patch(self, res: Resource, ns: str | None, name: str, body: bytes, content_type: str, sub: str | None,
               dry: bool) -> dict:
        media = (content_type or "").split(";")[0].strip().lower()
        kinds = ["application/json-patch+json", "application/merge-patch+json"]
        if not res.crd:
            kinds.append("application/strategic-merge-patch+json")
        if media not in kinds:
            raise ApiError(415, "UnsupportedMediaType", f'the body of the request was in an unknown format - '
                                                        f'accepted media types include: {", ".join(kinds)}')
        old = self._lookup(res, ns, name)
        try:
            patch = json.loads(body or b"null")
        except ValueError as exc:
            raise bad_request(f"error decoding patch: {exc}") from None
        if media == "application/json-patch+json":
            new = json_patch(_copy(old), patch)
        elif not isinstance(patch, dict):
            raise bad_request("error decoding patch: the patch is not a JSON object")
        elif media == "application/merge-patch+json":
            new = merge_patch(_copy(old), patch)
        else:
            new = strategic_merge_patch(_copy(old), patch)
        return self._update(res, old, new, sub=sub, rv_required=False, dry=dry)

    def _update(self, res: Resource, old: dict, new: Any, *, sub: str | None, rv_required: bool, dry: bool) -> dict:
        """An update as the API server makes it: preconditions, what the (sub)resource may change, no
        write when nothing changed, generation, and deletion once the last finalizer is gone."""
        name, old_meta = old["metadata"]["name"], old["metadata"]
        if not isinstance(new, dict) or not isinstance(new.get("metadata"), dict):
            raise bad_request("the object has no metadata")
        meta = new["metadata"]
        if meta.get("name") != name:
            raise bad_request(f"the name of the object ({meta.get('name')}) does not match the name on the URL "
                              f"({name})")
        if res.namespaced and meta.get("namespace") not in (None, "", old_meta.get("namespace")):
            raise bad_request("the namespace of the provided object does not match the namespace sent on the "
                              "request")
        if meta.get("resourceVersion"):
            if meta["resourceVersion"] != old_meta.get("resourceVersion"):
                raise conflict(res, name, STALE)
        elif rv_required:
            raise invalid(res, name, ["metadata.resourceVersion: Invalid value: 0x0: must be specified for an "
                                      "update"])
        _check_preconditions(res, name, {"uid": meta.get("uid")}, old_meta)
        if sub == "status":
            result = _copy(old)
            if "status" in new:
                result["status"] = _copy(new["status"])
            else:
                result.pop("status", None)
            if res.store_key == ("", "pods"):
                errors = pod_condition_errors(result.get("status") or {})
                if errors:
                    raise invalid(res, name, errors)
        else:
            result = _copy(new)
            result["kind"], result["apiVersion"] = res.kind, res.api_version
            kept = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation",
                    "namespace")
            for f in kept:
                if f in old_meta:
                    result["metadata"][f] = old_meta[f]
                else:
                    result["metadata"].pop(f, None)
            if res.status:
                if "status" in old:
                    result["status"] = _copy(old["status"])
                else:
                    result.pop("status", None)
            if res.store_key == ("", "pods"):
                self._check_pod_update(old, result)
            elif res.store_key == ("", "namespaces"):
                _name_label(result)
            self._prepare_kind(res, result, old)
        result["metadata"]["resourceVersion"] = old_meta.get("resourceVersion")
        result = self._validate(res, result)
        if result == old:
            return _copy(old)  # nothing changed: no write, no event, the same resourceVersion
        if _content(res, result) != _content(res, old):
            result["metadata"]["generation"] = old_meta.get("generation", 1) + 1
        if dry:
            return result
        done = result["metadata"].get("deletionTimestamp") and not result["metadata"].get("finalizers")
        return self._write(res, "DELETED" if done else "MODIFIED", result, old)

    def _check_pod_update(self, old: dict, new: dict) -> None:
        def fixed(spec: dict) -> dict:
            spec = _copy(spec or {})
            for key in ("containers", "initContainers"):
                for c in spec.get(key) or []:
                    c.pop("image", None)
            for key in ("activeDeadlineSeconds", "tolerations", "schedulingGates", "terminationGracePeriodSeconds"):
                spec.pop(key, None)
            return spec

        if fixed(old.get("spec")) != fixed(new.get("spec")):
            raise invalid(self.resource("pods"), old["metadata"]["name"], [
                "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
                "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to "
                "existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
                "previously negative)"])

    def _delete(self, res: Resource, ns: str | None, name: str, options: dict, dry: bool) -> dict:
        old = self._lookup(res, ns, name)
        meta = old["metadata"]
        _check_preconditions(res, name, options.get("preconditions") or {}, meta)
        finalizer = GC_FINALIZERS.get(self._propagation(res, old, options))
        is_pod = res.store_key == ("", "pods")
        grace = options.get("gracePeriodSeconds")
        if (is_pod and self.graceful_pods and (old.get("spec") or {}).get("nodeName")
                and (old.get("status") or {}).get("phase") not in TERMINAL):
            if grace is None:
                grace = (old.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
            if grace > 0 or meta.get("finalizers") or finalizer:
                return self._mark_deleting(res, old, grace, dry, finalizer)
        if meta.get("finalizers") or finalizer:
            return self._mark_deleting(res, old, 0, dry, finalizer)
        if dry:
            return _copy(old) if is_pod else success(details=_details(res, name, uid=meta.get("uid")))
        if res.store_key == ("", "namespaces"):
            for other in self.resources.values():
                if other.namespaced and not other.virtual:
                    for obj in list(self._store(other).values()):
                        if obj["metadata"].get("namespace") == name:
                            self._write(other, "DELETED", _copy(obj), None)
        gone = self._write(res, "DELETED", _copy(old), None)
        return _copy(gone) if is_pod else success(details=_details(res, name, uid=meta.get("uid")))

    def _propagation(self, res: Resource, obj: dict, options: dict) -> str:
        """The deletion's propagation policy: asked for (``propagationPolicy``, or the older ``orphanDependents``),
        else what the object's finalizers already say, else the kind's default (kube's
        DefaultGarbageCollectionPolicy: Orphan for batch/v1 jobs, Background for the rest)."""
        policy, orphan = options.get("propagationPolicy"), options.get("orphanDependents")
        if policy is not None and orphan is not None:
            raise invalid(res, obj["metadata"]["name"], [
                f'propagationPolicy: Invalid value: "{policy}": orphanDependents and deletionPropagation cannot be '
                f'both set'])
        if policy is not None and policy not in ("Orphan", "Background", "Foreground"):
            raise invalid(res, obj["metadata"]["name"], [
                f'propagationPolicy: Unsupported value: "{policy}": supported values: "Foreground", "Background", '
                f'"Orphan", "nil"'])
        if orphan is not None:
            return "Orphan" if orphan else "Background"
        if policy is not None:
            return policy
        finalizers = obj["metadata"].get("finalizers") or []
        if "orphan" in finalizers:
            return "Orphan"
        if "foregroundDeletion" in finalizers:
            return "Foreground"
        return "Orphan" if res.store_key in ORPHAN_BY_DEFAULT else "Background"

    def _mark_deleting(self, res: Resource, old: dict, grace: int, dry: bool, finalizer: str | None = None) -> dict:
        if old["metadata"].get("deletionTimestamp"):
            return _copy(old)
        new = _copy(old)
        if finalizer and finalizer not in (new["metadata"].get("finalizers") or []):
            new["metadata"]["finalizers"] = [*(new["metadata"].get("finalizers") or []), finalizer]
        new["metadata"].update(deletionTimestamp=self._now(grace), deletionGracePeriodSeconds=grace)
        new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
        return new if dry else _copy(self._write(res, "MODIFIED", new, old))

    def _delete_collection(self, res: Resource, ns: str | None, query: dict, options: dict, dry: bool) -> dict:
        match = self.matcher(res, ns, query)
        gone = []
        for obj in [o for _, o in sorted(self._store(res).items()) if match(o)]:
            self._delete(res, obj["metadata"].get("namespace"), obj["metadata"]["name"], options, dry)
            gone.append(_copy(obj))
        return {"kind": f"{res.kind}List", "apiVersion": res.api_version,
                "metadata": {"resourceVersion": str(self.rv)}, "items": gone}

    def _bind(self, ns: str | None, name: str, body: dict, *, by_url: bool) -> dict:
        """POST pods/NAME/binding (or core bindings): set spec.nodeName once; 201 and a Success Status."""
        pods = self.resource("pods")
        meta = body.get("metadata") or {}
        if by_url and meta.get("name") != name:
            raise bad_request("name in URL does not match name in Binding object")
        binding = replace(pods, plural="bindings", kind="Binding")
        target = body.get("target") or {}
        if not target.get("name"):
            raise invalid(binding, name, ["target.name: Required value"])
        if target.get("kind") not in (None, "", "Node"):
            raise invalid(binding, name, [f'target.kind: Not supported: "{target["kind"]}": must be empty or '
                                          f'\'Node\''])
        old = self._lookup(pods, ns, name)
        # the storage layer's preconditions (the Binding's uid and resourceVersion) come first: a pod recreated
        # under the name is not the one the scheduler placed (kube: pkg/registry/core/pod/storage/storage.go,
        # BindingREST.assignPod -> Conflict on "pods")
        have = old["metadata"]
        _check_preconditions(pods, name, meta, have)
        if have.get("deletionTimestamp"):
            raise conflict(pods, name, f"pod {name} is being deleted, cannot be assigned to a host",
                           qualified="pods/binding")
        if (old.get("spec") or {}).get("nodeName"):
            raise conflict(pods, name, f'pod {name} is already assigned to node "{old["spec"]["nodeName"]}"',
                           qualified="pods/binding")
        if (old.get("spec") or {}).get("schedulingGates"):  # kube: "Reject binding to a scheduling un-ready Pod"
            raise conflict(pods, name, f"pod {name} has non-empty .spec.schedulingGates", qualified="pods/binding")
        new = _copy(old)
        new.setdefault("spec", {})["nodeName"] = target["name"]
        (new.get("status") or {}).pop("nominatedNodeName", None)  # ClearingNominatedNodeNameAfterBinding
        if meta.get("annotations"):
            new["metadata"]["annotations"] = {**(new["metadata"].get("annotations") or {}), **meta["annotations"]}
        _set_condition(new, {"type": "PodScheduled", "status": "True"}, self._now())
        self._write(pods, "MODIFIED", new, old)
        return success(201)

    def _evict(self, ns: str | None, name: str, body: dict) -> dict:
        """POST pods/NAME/eviction as kube's EvictionREST (pkg/registry/core/pod/storage/eviction.go): pods that
        are Pending, finished or terminating skip the budgets; otherwise the one PodDisruptionBudget selecting the
        pod is read from its STATUS (kept by the disruption controller: :meth:`sync_budgets`, or set by a test)
        and its ``disruptionsAllowed`` decremented here; then the uid precondition, and the pod is marked
        (DisruptionTarget) and deleted (gracefully, when bound and running).  201 and a Success Status."""
        pods = self.resource("pods")
        if (body.get("metadata") or {}).get("name") not in (None, name):
            raise bad_request("name in URL does not match name in Eviction object")
        current = self._lookup(pods, ns, name)
        status, meta = current.get("status") or {}, current["metadata"]
        if status.get("phase") not in (*TERMINAL, "Pending") and not meta.get("deletionTimestamp"):
            if (ns, name) in self.blocked:
                raise ApiError(429, "TooManyRequests", EVICTION_REFUSED, details={"causes": [
                    {"reason": "DisruptionBudget", "message": "The disruption budget (blocked) allows no disruption"}]})
            self._check_budget(current)
        options = body.get("deleteOptions") or {}
        wanted = (options.get("preconditions") or {}).get("uid")
        if wanted and wanted != meta.get("uid"):
            raise conflict(pods, name, f"the UID in the precondition ({wanted}) does not match the UID in record "
                                       f"({meta.get('uid')}). The object might have been deleted and then recreated",
                           qualified="Pod")
        marked = _copy(current)
        _set_condition(marked, {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                                "message": "Eviction API: evicting"}, self._now())
        if marked != current:
            self._write(pods, "MODIFIED", marked, current)
        self._delete(pods, ns, name, options, False)
        return success(201)

    def _budgets_of(self, target: dict) -> list[dict]:
        """The PodDisruptionBudgets selecting a pod (an empty selector selects nothing, as for evictions)."""
        labels, ns = target["metadata"].get("labels") or {}, target["metadata"].get("namespace")
        return [b for b in self._stores[("policy", "poddisruptionbudgets")].values()
                if b["metadata"].get("namespace") == ns and _selects((b.get("spec") or {}).get("selector"), labels)]

    def _check_budget(self, target: dict) -> None:
        """kube's check-and-decrement: 500 when more than one budget selects the pod; an unready pod passes
        when the budget allows it (AlwaysAllow, or currentHealthy >= desiredHealthy > 0); 429 while the budget's
        status lags its spec (observedGeneration < generation: a fresh budget) or allows no disruption; else
        ``disruptionsAllowed`` is decremented and the pod recorded in ``disruptedPods`` (a status write)."""
        budgets = self._budgets_of(target)
        if len(budgets) > 1:
            raise ApiError(500, None, "This pod has more than one PodDisruptionBudget, which the eviction "
                                      "subresource does not support.")
        if not budgets:
            return
        budget = budgets[0]
        spec, status, bmeta = budget.get("spec") or {}, budget.get("status") or {}, budget["metadata"]
        if not _ready(target) and (spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow"
                                   or (status.get("currentHealthy", 0) >= status.get("desiredHealthy", 0) > 0)):
            return
        name = bmeta["name"]
        if status.get("observedGeneration", 0) < bmeta.get("generation", 1):
            raise ApiError(429, "TooManyRequests", EVICTION_REFUSED, headers={"Retry-After": 10}, details={
                "causes": [{"reason": "DisruptionBudget",
                            "message": f"The disruption budget {name} is still being processed by the server."}],
                "retryAfterSeconds": 10})
        allowed = status.get("disruptionsAllowed", 0)
        if allowed < 0:
            raise ApiError(403, "Forbidden", f'poddisruptionbudget.policy "{name}" is forbidden: pdb disruptions '
                                             f'allowed is negative')
        if allowed == 0:
            message = (f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} healthy pods and has "
                       f"{status.get('currentHealthy', 0)} currently")
            raise ApiError(429, "TooManyRequests", EVICTION_REFUSED,
                           details={"causes": [{"reason": "DisruptionBudget", "message": message}]})
        new = _copy(budget)
        new_status = new.setdefault("status", {})
        new_status["disruptionsAllowed"] = allowed - 1
        new_status.setdefault("disruptedPods", {})[target["metadata"]["name"]] = self._now()
        if allowed - 1 == 0:
            _set_condition(new, _disruption_allowed(False), self._now(), probe=False)
        self._write(self.resource("poddisruptionbudgets"), "MODIFIED", new, budget)

    # -- controllers' stand-ins -----------------------------------------------------------------------
    def sync_budgets(self) -> None:
        """The disruption controller, once: every PodDisruptionBudget's status from the pods it selects
        (observedGeneration, expectedPods, currentHealthy, desiredHealthy, disruptionsAllowed, disruptedPods
        still pending, the DisruptionAllowed condition).  Pods evicted in the last two minutes and not yet gone
        do not count as healthy.  Unlike kube, the expected count is the pods selected (not finished), not
        their controllers' scale.  Writes only what changed."""
        res = self.resource("poddisruptionbudgets")
        with self._cond:
            now = self.clock()
            for budget in [b for _, b in sorted(self._store(res).items())]:
                spec, meta = budget.get("spec") or {}, budget["metadata"]
                ns = meta.get("namespace")
                selected = [p for p in self.pods.values() if p["metadata"].get("namespace") == ns
                            and (p.get("status") or {}).get("phase") not in TERMINAL
                            and _selects(spec.get("selector"), p["metadata"].get("labels") or {})]
                names = {p["metadata"]["name"]: p for p in selected}
                disrupted = {n: t for n, t in ((budget.get("status") or {}).get("disruptedPods") or {}).items()
                             if n in names and not names[n]["metadata"].get("deletionTimestamp")
                             and _parse_time(t) + 120 > now}
                healthy = sum(1 for p in selected if _healthy(p) and p["metadata"]["name"] not in disrupted)
                expected = len(selected)
                if spec.get("minAvailable") is not None:
                    desired = _scaled(spec["minAvailable"], expected)
                elif spec.get("maxUnavailable") is not None:
                    desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
                else:
                    desired = 1
                allowed = max(0, healthy - desired)
                new = _copy(budget)
                status = {"observedGeneration": meta.get("generation", 1), "disruptionsAllowed": allowed,
                          "currentHealthy": healthy, "desiredHealthy": desired, "expectedPods": expected}
                if disrupted:
                    status["disruptedPods"] = disrupted
                conditions = (budget.get("status") or {}).get("conditions")
                if conditions:
                    status["conditions"] = conditions
                new["status"] = status
                _set_condition(new, _disruption_allowed(allowed > 0), self._now(), probe=False)
                if new != budget:
                    self._write(res, "MODIFIED", new, budget)

    def finish_terminating(self, *, everything: bool = False) -> list[tuple[str, str]]:
        """The kubelets' turn: pods being deleted whose grace period is over (by ``clock``; all of them with
        ``everything``) are removed, as a kubelet does once their containers stop.  Returns (namespace, name)."""
        pods = self.resource("pods")
        gone = []
        with self._cond:
            now = self.clock()
            for key, obj in sorted(self.pods.items()):
                stamp = obj["metadata"].get("deletionTimestamp")
                if stamp and not obj["metadata"].get("finalizers") and (everything or _parse_time(stamp) <= now):
                    self._write(pods, "DELETED", _copy(obj), None)
                    gone.append(key)
        return gone


    # -- the garbage collector -------------------------------------------------------------------------------
    def collect_garbage(self) -> int:
        """Do the garbage collector's pending work now (kube's attemptToDeleteItem and the orphan and foreground
        finalizers); how many objects it looked at."""
        with self._cond:
            looked = 0
            while self._gc_work:
                ident = self._gc_work.pop()
                looked += 1
                try:
                    self._gc_examine(ident)
                except ApiError:  # a precondition or a rule refused it: as kube's collector, try at the next change
                    pass
            self._cond.notify_all()
            return looked

    def wait_collected(self, timeout: float = 5.0) -> bool:
        """Wait until the collector's thread has nothing left to do."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._gc_work:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def _gc_loop(self) -> None:
        with self._cond:
            while not self._closing:
                if not self._gc_work:
                    self._cond.wait()
                    continue
                if self.gc_delay:  # as a real collector, a moment behind the change (the lock is free meanwhile)
                    self._cond.wait(self.gc_delay)
                self.collect_garbage()

    def _store_resource(self, store_key: tuple[str, str]) -> Resource:
        return next(r for r in self.resources.values() if r.store_key == store_key and not r.virtual)

    @staticmethod
    def _finalizing(obj: dict) -> bool:
        meta = obj["metadata"]
        return bool(meta.get("deletionTimestamp")) and any(f in GC_FINALIZERS.values()
                                                            for f in meta.get("finalizers") or [])

    def _track_owners(self, res: Resource, key: Any, before: dict | None, after: dict | None) -> None:
        """Keep the owner graph in step with one write (``after`` None: a deletion) and note what the collector
        must look at: the object when it names owners or waits on one of its finalizers, its dependents when it
        goes, its owners being finalized when its references change or it goes."""
        ident = (res.store_key, key)
        old_refs = {str(r.get("uid")) for r in owner_refs(before)} if before is not None else set()
        new_refs = {str(r.get("uid")) for r in owner_refs(after)} if after is not None else set()
        for uid in old_refs - new_refs:
            deps = self._dependents.get(uid)
            if deps is not None:
                deps.discard(ident)
                if not deps:
                    del self._dependents[uid]
        for uid in new_refs:
            self._dependents.setdefault(uid, set()).add(ident)
        work = set()
        if after is not None and (new_refs or self._finalizing(after)):
            work.add(ident)
        gone = before is not None and (after is None or before["metadata"].get("uid") != after["metadata"].get("uid"))
        if gone:
            work |= self._dependents.get(str(before["metadata"].get("uid")), set())
        if gone or old_refs != new_refs:
            for dependent in (before, after):
                for ref in owner_refs(dependent) if dependent is not None else ():
                    owner_res, owner = self._resolve(res, dependent, ref)
                    if owner_res is not None and owner is not None and self._finalizing(owner):
                        work.add((owner_res.store_key, self._key_of(owner_res, owner)))
        if work:
            self._gc_work |= work

    def _resolve(self, dep_res: Resource, dependent: dict, ref: dict) -> tuple[Resource | None, dict | None]:
        """(the owner's resource, the owner) a reference names: the owner None when it does not exist with that
        uid (dangling); the resource None too when the kind is not served here (the collector cannot tell, and
        leaves the reference alone)."""
        group = str(ref.get("apiVersion") or "").rpartition("/")[0]
        res = next((r for r in self.resources.values() if r.group == group and r.kind == ref.get("kind")
                    and not r.virtual), None)
        if res is None:
            return None, None
        if res.namespaced and not dep_res.namespaced:
            return res, None  # a cluster-scoped object cannot be owned by a namespaced one
        ns = dependent["metadata"].get("namespace") if res.namespaced else None
        owner = self._store(res).get(self._key(res, ns, str(ref.get("name"))))
        return res, owner if owner is not None and owner["metadata"].get("uid") == ref.get("uid") else None

    def _gc_examine(self, ident: tuple[tuple[str, str], Any]) -> None:
        store_key, key = ident
        res = self._store_resource(store_key)
        obj = self._store(res).get(key)
        if obj is None:
            return
        meta, uid = obj["metadata"], str(obj["metadata"].get("uid"))
        finalizers = meta.get("finalizers") or []
        if meta.get("deletionTimestamp") and "orphan" in finalizers:
            for _, dep_res, dep in self._dependents_of(uid):
                new = _copy(dep)
                refs = [r for r in owner_refs(dep) if r.get("uid") != uid]
                if refs:
                    new["metadata"]["ownerReferences"] = refs
                else:
                    new["metadata"].pop("ownerReferences", None)
                self._update(dep_res, dep, new, sub=None, rv_required=False, dry=False)
            self._drop_finalizer(res, obj, "orphan")
            return
        if meta.get("deletionTimestamp") and "foregroundDeletion" in finalizers:
            blocking = False
            for dep_key, dep_res, dep in self._dependents_of(uid):
                blocking |= any(r.get("uid") == uid and r.get("blockOwnerDeletion") for r in owner_refs(dep))
                if not dep["metadata"].get("deletionTimestamp"):
                    self._gc_work.add((dep_res.store_key, dep_key))  # its owner waits: it is deleted
            if not blocking:
                self._drop_finalizer(res, obj, "foregroundDeletion")
            return
        refs = owner_refs(obj)
        if not refs or meta.get("deletionTimestamp"):
            return  # nothing owns it, or it is going already
        solid, dangling, waiting = [], [], []
        for ref in refs:
            owner_res, owner = self._resolve(res, obj, ref)
            if owner_res is not None and owner is None:
                dangling.append(ref)
            elif owner is not None and owner["metadata"].get("deletionTimestamp") \
                    and "foregroundDeletion" in (owner["metadata"].get("finalizers") or []):
                waiting.append(ref)
            else:
                solid.append(ref)
        if not dangling and not waiting:
            return
        if solid:  # some owner is still there: only the references to the missing ones go
            drop = {r.get("uid") for r in dangling + waiting}
            new = _copy(obj)
            new["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") not in drop]
            self._update(res, obj, new, sub=None, rv_required=False, dry=False)
            return
        if waiting and self._dependents.get(uid):
            policy = "Foreground"
        elif "orphan" in finalizers:
            policy = "Orphan"
        elif "foregroundDeletion" in finalizers:
            policy = "Foreground"
        else:
            policy = "Background"
        self._delete(res, meta.get("namespace"), meta["name"], {"preconditions": {"uid": uid},
                                                                 "propagationPolicy": policy}, False)

    def _dependents_of(self, uid: str) -> list[tuple[Any, Resource, dict]]:
        out = []
        for store_key, key in sorted(self._dependents.get(uid, ()), key=repr):
            res = self._store_resource(store_key)
            dep = self._store(res).get(key)
            if dep is not None:
                out.append((key, res, dep))
        return out

    def _drop_finalizer(self, res: Resource, obj: dict, finalizer: str) -> None:
        new = _copy(obj)
        left = [f for f in new["metadata"].get("finalizers") or [] if f != finalizer]
        if left:
            new["metadata"]["finalizers"] = left
        else:
            new["metadata"].pop("finalizers", None)
        self._update(res, obj, new, sub=None, rv_required=False, dry=False)

def _selects(selector: dict | None, labels: dict) -> bool:
    """A budget's selector: nil or empty selects nothing (kube: getPodDisruptionBudgets)."""
    if not selector or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return False
    return selector_matches(selector, labels)


def _disruption_allowed(allowed: bool) -> dict:
    return {"type": "DisruptionAllowed", "status": "True" if allowed else "False",
            "reason": "SufficientPods" if allowed else "InsufficientPods", "message": ""}


def _parse_time(stamp: str) -> float:
    import calendar
    return float(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")))


def _json_body(body: bytes, *, allow_empty: bool = False) -> dict:
    if not body or not body.strip():
        if allow_empty:
            return {}
        raise bad_request("the request has no body")
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise bad_request(f"the body of the request is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise bad_request("the body of the request is not a JSON object")
    return doc


def _translate(change: Change, res: Resource, match: Callable[[dict], bool]) -> dict | None:
    """The event a watcher with this selection sees for a change (entering it: ADDED; leaving: DELETED)."""
    if change.store_key != res.store_key:
        return None
    now = match(change.obj)
    if change.type == "MODIFIED":
        before = change.old is not None and match(change.old)
        kind = "MODIFIED" if now and before else "ADDED" if now else "DELETED" if before else None
    else:
        kind = change.type if now else None
    return {"type": kind, "object": change.obj} if kind else None


def _pattern(route: Route | tuple | None, path: str) -> str:
    if isinstance(route, Route):
        return route.res.path("{namespace}" if route.namespace is not None else None,
                              "{name}" if route.name is not None else None, route.sub)
    return path


def _verb(method: str, route: Route | tuple | None, query: dict) -> str:
    if not isinstance(route, Route):
        return "discovery" if route else "unknown"
    if method == "GET":
        if route.name is not None:
            return "get"
        return "watch" if query.get("watch") in ("true", "1") else "list"
    if method == "DELETE":
        return "delete" if route.name is not None else "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())


# -- one request: what was asked, and the route table ---------------------------------------------------
@dataclass
class Request:
    """One HTTP request, read and routed."""
    method: str
    path: str
    query: dict  # the last value of each parameter
    body: bytes
    content_type: str
    route: Route | tuple | None  # see FakeApiServer.route

    @property
    def is_watch(self) -> bool:
        return (self.method == "GET" and isinstance(self.route, Route) and self.route.name is None
                and self.query.get("watch") in ("true", "1"))

    @property
    def dry(self) -> bool:
        return self.query.get("dryRun") == "All"


def _call(req: Request) -> Call:
    """The request as the server's log keeps it."""
    route = req.route
    call = Call(req.method, req.path, req.query, _pattern(route, req.path), _verb(req.method, route, req.query))
    if isinstance(route, Route):
        call.plural, call.group, call.namespace = route.res.plural, route.res.group, route.namespace
        call.name, call.subresource = route.name, route.sub
    try:
        call.body = json.loads(req.body) if req.body else None
    except ValueError:
        call.body = req.body
    return call


def method_not_allowed() -> ApiError:
    return ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")


def _target(route: Route) -> str | None:
    """What a request for a resource addresses, as :data:`ROUTES` names it; None: nothing (404)."""
    res = route.res
    if res.virtual:  # core bindings: only created, never named
        return "bindings" if route.name is None else "bindings/named"
    if route.name is None:
        return "collection"
    if route.sub is None:
        return "object"
    if route.sub == "status" and res.status:
        return "status"
    if res.store_key == ("", "pods") and route.sub in ("binding", "eviction"):
        return f"pods/{route.sub}"
    return None


def _get_object(api: FakeApiServer, req: Request) -> tuple[int, dict]:
    route = req.route
    return 200, _copy(api._lookup(route.res, route.namespace, route.name))


def _list_objects(api: FakeApiServer, req: Request) -> tuple[int, dict]:
    return 200, api._list(req.route.res, req.route.namespace, req.query)


def _create_object(api: FakeApiServer, req: Request) -> tuple[int, dict]:
    route = req.route
    if route.namespace is None and route.res.namespaced:  # a namespaced kind is created in a namespace
        raise method_not_allowed()
    return 201, api._create(route.res, route.namespace, _json_body(req.body), req.dry)


def _delete_objects(api: FakeApiServer, req: Request) -> tuple[int, dict]:
    route = req.route
    return 200, api._delete_collection(route.res, route.namespace, req.query, _json_body(req.body, allow_empty=True),
                                       req.dry)


def _replace_object(api: FakeApiServer, req: Request) -> tuple[int, dict]:
    route = req.route
    return 200, api._replace(route.res, route.namespace, route.name, _json_body(req.body), route.sub, req.dry)


def _patch_object(api: FakeApiServer, req: Request) -> tuple[int, dict]:
    route = req.route
    return 200, api._patch(route.res, route.namespace, route.name, req.body, req.content_type, route.sub, req.dry)


def _delete_object(api: FakeApiServer, req: Request) -> tuple[int, dict]:
    route = req.route
    options = _json_body(req.body, allow_empty=True)
    if "gracePeriodSeconds" in req.query:
        options.setdefault("gracePeriodSeconds", int(req.query["gracePeriodSeconds"]))
    if "propagationPolicy" in req.query:
        options.setdefault("propagationPolicy", req.query["propagationPolicy"])
    if "orphanDependents" in req.query:
        options.setdefault("orphanDependents", req.query["orphanDependents"] in ("true", "1"))
    return 200, api._delete(route.res, route.namespace, route.name, options, req.dry)


def _create_binding(api: FakeApiServer, req: Request) -> tuple[int, dict]:
    """POST (namespaces/NS/)bindings: the pod named in the Binding's metadata."""
    doc = _json_body(req.body)
    return 201, api._bind(req.route.namespace, ((doc.get("metadata") or {}).get("name") or ""), doc, by_url=False)


def _bind_pod(api: FakeApiServer, req: Request) -> tuple[int, dict]:
    return 201, api._bind(req.route.namespace, req.route.name, _json_body(req.body), by_url=True)


def _evict_pod(api: FakeApiServer, req: Request) -> tuple[int, dict]:
    return 201, api._evict(req.route.namespace, req.route.name, _json_body(req.body))


# (target, method) -> handler, called under the server's lock.  A method a target lacks: 405, except on
# the pods' binding and eviction subresources (404, as there is no such route).
ROUTES: dict[tuple[str | None, str], Callable[[FakeApiServer, Request], tuple[int, dict]]] = {
    ("bindings", "POST"): _create_binding,
    ("collection", "GET"): _list_objects,
    ("collection", "POST"): _create_object,
    ("collection", "DELETE"): _delete_objects,
    ("object", "GET"): _get_object,
    ("object", "PUT"): _replace_object,
    ("object", "PATCH"): _patch_object,
    ("object", "DELETE"): _delete_object,
    ("status", "GET"): _get_object,
    ("status", "PUT"): _replace_object,
    ("status", "PATCH"): _patch_object,
    ("pods/binding", "POST"): _bind_pod,
    ("pods/eviction", "POST"): _evict_pod,
}
_SUBRESOURCE_TARGETS = {"pods/binding", "pods/eviction"}


def answer(api: FakeApiServer, req: Request) -> tuple[int, dict]:
    """A (non-watch) request's answer: (status code, body); ApiError for an error."""
    if req.route is None:
        raise no_route()
    if isinstance(req.route, tuple):
        if req.method != "GET":
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method")
        with api._cond:
            return 200, api.discovery(req.route)
    return api.dispatch(req)


# -- HTTP --------------------------------------------------------------------------------------------------
class _Handler(BaseHTTPRequestHandler):
    """Reads a request, logs it, injects a failure or answers it (a watch streams); ``self.server.api`` is
    the :class:`FakeApiServer`."""

    protocol_version = "HTTP/1.1"

    @property
    def api(self) -> FakeApiServer:
        return self.server.api

    def log_message(self, *args) -> None:  # quiet
        pass

    def setup(self) -> None:
        super().setup()
        # one small answer in two writes (head, body) would otherwise wait out the peer's delayed ACK
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.api._sockets.add(self.connection)

    def finish(self) -> None:
        self.api._sockets.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _read(self, method: str) -> Request:
        url = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        return Request(method, url.path, query, body, self.headers.get("Content-Type") or "", self.api.route(url.path))

    def _serve(self, method: str) -> None:
        req = self._read(method)
        call = _call(req)
        failure = self.api._record(call, req.is_watch)
        if failure is not None:
            call.status = failure.status
            return self._fail(failure)
        if req.is_watch:
            call.status = 200  # logged as opened, even when its parameters then turn out bad
            return self._watch(req.route, req.query)
        headers = None
        try:
            status, out = answer(self.api, req)
        except ApiError as exc:
            status, out, headers = exc.code, exc.body(), exc.headers
        call.status = status
        self._send(status, out, headers)

    def _send(self, status: int, body: dict, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.end_headers()
        self.wfile.write(data)

    def _fail(self, failure: Failure) -> None:
        """An injected failure: no answer at all (status 0) or a Status body, after the failure's ``delay``."""
        if failure.delay:
            time.sleep(failure.delay)
        if not failure.status:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        reason = failure.reason or REASONS.get(failure.status, "")
        error = ApiError(failure.status, reason, failure.message or f"injected failure ({reason})",
                         details={"retryAfterSeconds": failure.retry_after} if failure.retry_after else None)
        headers = {"Retry-After": failure.retry_after} if failure.retry_after else None
        self._send(failure.status, error.body(), headers)

    # -- watch ------------------------------------------------------------------------------------------
    def _chunk(self, line: dict) -> None:
        data = (json.dumps(line) + "\n").encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")

    def _watch(self, route: Route, query: dict) -> None:
        res = route.res
        try:
            match = self.api.matcher(res, route.namespace, query)
            text = query.get("resourceVersion") or ""
            since = int(text) if text not in ("", "0") else None
            timeout = float(query.get("timeoutSeconds") or 0)
        except ApiError as exc:
            return self._send(exc.code, exc.body())
        except ValueError:
            return self._send(400, bad_request("invalid resourceVersion or timeoutSeconds").body())
        limits = [x for x in (timeout, self.api.watch_cap or 0) if x > 0]
        deadline = time.monotonic() + min(limits) if limits else math.inf
        start = self.api._open_watch(res, match, since)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            if start.expired:
                return self._expired(since, start.oldest)
            for event in start.initial:
                self._chunk(event)
            self._follow(res, match, start.sent, start.epoch, deadline, query.get("allowWatchBookmarks") in ("true", "1"))
        except OSError:  # the client went away
            self.close_connection = True
        finally:
            self.api._close_watch(res)

    def _expired(self, since: int | None, oldest: int) -> None:
        self._chunk({"type": "ERROR", "object": ApiError(
            410, "Expired", f"too old resource version: {since} ({oldest})").body()})
        self._end_chunks()

    def _follow(self, res: Resource, match, sent: int, epoch: int, deadline: float, bookmarks: bool) -> None:
        """The changes after ``sent`` as this watch sees them, until it ends (see FakeApiServer._wait_changes);
        asked for bookmarks, one every ``bookmark_interval`` seconds while it stays open, and one as it times out."""
        every = self.api.bookmark_interval if bookmarks and self.api.bookmark_interval > 0 else math.inf
        next_mark = time.monotonic() + every
        while True:
            batch, end, end_rv = self.api._wait_changes(sent, epoch, min(deadline, next_mark))
            if not batch and end == "timeout" and next_mark < deadline:  # a periodic bookmark; the watch goes on
                self._chunk(self._bookmark(res, end_rv))
                next_mark = time.monotonic() + every
                continue
            if not batch:
                break
            sent = batch[-1].rv
            for change in batch:
                event = _translate(change, res, match)
                if event:
                    self._chunk(event)
        if end == "lost":
            return self._expired(sent, self.api.resumable_from)
        if end == "timeout" and bookmarks:
            self._chunk(self._bookmark(res, end_rv))
        self._end_chunks()

    @staticmethod
    def _bookmark(res: Resource, rv: int) -> dict:
        return {"type": "BOOKMARK", "object": {"kind": res.kind, "apiVersion": res.api_version,
                                               "metadata": {"resourceVersion": str(rv)}}}
