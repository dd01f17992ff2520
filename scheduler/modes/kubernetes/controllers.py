"""The Volcano Job and PodGroup controllers in Kubernetes mode: their host over the API server, fed by informers.

:class:`KubeHost` is :class:`scheduler.controllers.host.Host` over the real ``kubernetes`` client.  It reads
what informers hold: its own for Volcano Jobs and Commands, for the objects a Job's plugins own (Services,
ConfigMaps, Secrets, NetworkPolicies, PersistentVolumeClaims — only those a Volcano Job owns are kept) and for
the owners whose annotations the PodGroup controller inherits (ReplicaSets, StatefulSets, DaemonSets, batch
Jobs); the scheduler's own for Pods, PodGroups and PriorityClasses (one watch of a kind per replica).
Deployments are never read by the controllers, so they are not watched.

Writes go through the scheduler's own rate limiter, timeouts and retries (:meth:`KubeEffects.request`), and
none leaves a replica that is not leading.  What the controllers create carries their owner reference, so
Kubernetes' garbage collector removes it with its owner; a deletion asks for background propagation, with the
object's uid as precondition when the controller names one.  A Job's status goes through its status
subresource as a JSON patch that first tests the Job's uid, so it never lands on another Job recreated under
the name.  Events on the Job are sent from the writers' pool: a reconcile never waits for them.

Reading its own writes: a reconcile right after one that wrote must see what it wrote, or it would make again
what the watch has not brought yet.  The host keeps, per kind, the resourceVersion its last write left, and
:meth:`KubeHost.caught_up` says whether the informers have reached it; a deleted object is hidden from
:meth:`KubeHost.list` at once (its DELETED event comes later).

:class:`KubeControllers` runs :class:`scheduler.controllers.loop.ControllerLoop` in a thread: only while this
replica leads and every informer has listed (a fresh loop each time it starts leading: it re-derives
everything from the objects, as after a restart), after any change an informer hands on (debounced), at the
loop's ``wake_at``, and again once its own writes are seen after a reconcile that wrote.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from scheduler.controllers.host import AlreadyExists, HostError, NotFound
from scheduler.controllers.jobs.controller import Settings
from scheduler.controllers.kinds import (
    BATCH_JOB,
    COMMAND,
    CONFIGMAP,
    DAEMONSET,
    DEPLOYMENT,
    JOB,
    JOB_OWNED,
    NETWORK_POLICY,
    POD,
    PODGROUP,
    PRIORITY_CLASS,
    PVC,
    REPLICASET,
    SECRET,
    SERVICE,
    STATEFULSET,
    Kind,
    kind_of,
    meta,
    name_of,
    namespace_of,
    uid_of,
)
from scheduler.controllers.loop import ControllerLoop, ReconcileResult
from scheduler.controllers.podgroups import PodGroupSettings
from scheduler.metrics import SchedulerMetrics
from scheduler.modes.kubernetes.apieffects import KubeEffects, NotLeading
from scheduler.modes.kubernetes.apistatus import status_body
from scheduler.modes.kubernetes.informer import Informer

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
#: top-level fields an update replaces (the rest of the object, status included, stays as the server has it)
UPDATED = ("spec", "data", "binaryData", "stringData", "type", "immutable", "action", "target", "reason", "message")


@dataclass(frozen=True)
class Route:
    """How one kind is reached through the client."""

    kind: Kind
    plural: str
    core: str = ""  # a core kind's CoreV1Api method suffix ("pod", "config_map", ...); "" for the others
    status: bool = False  # it has a status subresource

    @property
    def group_version(self) -> tuple[str, str]:
        group, _, version = self.kind.api_version.rpartition("/")
        return group, version


ROUTES = {r.kind: r for r in (
    Route(POD, "pods", core="pod", status=True),
    Route(SERVICE, "services", core="service", status=True),
    Route(CONFIGMAP, "configmaps", core="config_map"),
    Route(SECRET, "secrets", core="secret"),
    Route(PVC, "persistentvolumeclaims", core="persistent_volume_claim", status=True),
    Route(NETWORK_POLICY, "networkpolicies"),
    Route(JOB, "jobs", status=True),  # Volcano's Job CRD has a status subresource
    Route(COMMAND, "commands"),
    Route(PODGROUP, "podgroups"),  # Volcano's PodGroup CRD has none
    Route(PRIORITY_CLASS, "priorityclasses"),
    Route(REPLICASET, "replicasets", status=True),
    Route(STATEFULSET, "statefulsets", status=True),
    Route(DAEMONSET, "daemonsets", status=True),
    Route(DEPLOYMENT, "deployments", status=True),
    Route(BATCH_JOB, "jobs", status=True),
)}
#: what the controllers' own informers watch (Pods, PodGroups and PriorityClasses come from the scheduler's)
WATCHED = (JOB, COMMAND, *JOB_OWNED, REPLICASET, STATEFULSET, DAEMONSET, BATCH_JOB)


def owned_by_a_job(obj: dict) -> bool:
    return any(isinstance(r, dict) and r.get("kind") == JOB.kind and r.get("apiVersion") == JOB.api_version
               for r in meta(obj).get("ownerReferences") or ())


def _rv(value: object) -> int:
    """A resourceVersion as a number (kube-apiserver's are etcd revisions); 0 when it is not one."""
    text = str(value or "")
    return int(text) if text.isdigit() else 0


class KubeHost:
    """:class:`scheduler.controllers.host.Host` over the API server (see the module docstring)."""

    def __init__(self, api_client: Any, effects: KubeEffects, informers: Mapping[Kind, Informer], *,
                 hidden_for: float = 60.0, clock: Callable[[], float] = time.monotonic):
        from kubernetes import client

        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.effects = effects
        self.metrics = effects.metrics
        self.informers = dict(informers)
        self.hidden_for, self.clock = hidden_for, clock
        self._lock = threading.Lock()
        self._written: dict[Kind, int] = {}  # kind -> the highest resourceVersion our writes left
        self._gone: dict[Kind, dict[str, float]] = {}  # kind -> uid -> when we deleted it (hidden from list)
        for kind, inf in self.informers.items():
            inf.listeners.append(functools.partial(self._heard, kind))

    # -- reading ----------------------------------------------------------------------------------------
    def list(self, kind: Kind) -> list[dict]:
        inf = self.informers.get(kind)
        if inf is None:
            return []
        objects = list(inf.known.copy().values())  # a copy in one step: the informer's thread may add meanwhile
        with self._lock:
            gone = self._gone.get(kind)
            if gone:
                now = self.clock()
                for uid in [u for u, at in gone.items() if now - at > self.hidden_for]:
                    del gone[uid]  # its DELETED never came (a relist will put things right): show what is there
        return [o for o in objects if uid_of(o) not in gone] if gone else objects

    def get(self, kind: Kind, namespace: str, name: str) -> dict | None:
        inf = self.informers.get(kind)
        if inf is None:
            return None
        return inf.known.get(f"{namespace}/{name}" if kind.namespaced else name)

    def caught_up(self) -> bool:
        """Have the informers seen every write of ours (their resourceVersion reached what our writes left)?"""
        with self._lock:
            written = dict(self._written)
        return all(_rv(self.informers[kind].resource_version) >= rv for kind, rv in written.items()
                   if kind in self.informers and not self.informers[kind].missing)

    def wait_caught_up(self, timeout: float, stop: threading.Event | None = None) -> bool:
        deadline = time.monotonic() + timeout
        while not self.caught_up():
            if time.monotonic() >= deadline or (stop is not None and stop.is_set()):
                return False
            time.sleep(0.005)
        return True

    def _heard(self, kind: Kind, change: str, obj: dict) -> None:
        if change == "delete":
            with self._lock:
                gone = self._gone.get(kind)
                if gone:
                    gone.pop(uid_of(obj), None)

    def _wrote(self, kind: Kind, obj: dict) -> None:
        rv = _rv(meta(obj).get("resourceVersion"))
        if rv:
            with self._lock:
                self._written[kind] = max(rv, self._written.get(kind, 0))

    def _hide(self, kind: Kind, uid: str) -> None:
        if uid:
            with self._lock:
                self._gone.setdefault(kind, {})[uid] = self.clock()

    # -- writing ----------------------------------------------------------------------------------------
    def create(self, obj: dict) -> dict:
        kind, route = self._route(obj)
        ns = namespace_of(obj)
        args: tuple[Any, ...]
        if route.core:
            fn, args = getattr(self.core, f"create_namespaced_{route.core}"), (ns, obj)
        else:
            fn, args = self.custom.create_namespaced_custom_object, (*route.group_version, ns, route.plural, obj)
        stored = self._send(f"create {kind} {ns}/{name_of(obj)}", fn, *args)
        self._wrote(kind, stored)
        return stored

    def update(self, obj: dict) -> dict:
        kind, route = self._route(obj)
        ns, name = namespace_of(obj), name_of(obj)
        current = self.get(kind, ns, name)
        if current is None:
            raise NotFound(f"{kind} {ns}/{name} not found")
        new = copy.deepcopy(current)
        for key in ("labels", "annotations", "ownerReferences"):
            if key in meta(obj):
                new["metadata"][key] = copy.deepcopy(meta(obj)[key])
            else:
                new["metadata"].pop(key, None)
        for key in UPDATED:
            if key in obj:
                new[key] = copy.deepcopy(obj[key])
            else:
                new.pop(key, None)
        # at the resourceVersion read: a change meanwhile is a 409, and the next reconcile decides again
        args: tuple[Any, ...]
        if route.core:
            fn, args = getattr(self.core, f"replace_namespaced_{route.core}"), (name, ns, new)
        else:
            fn, args = (self.custom.replace_namespaced_custom_object,
                        (*route.group_version, ns, route.plural, name, new))
        stored = self._send(f"update {kind} {ns}/{name}", fn, *args)
        self._wrote(kind, stored)
        return stored

    def annotate(self, kind: Kind, namespace: str, name: str, annotations: Mapping[str, str | None]) -> None:
        route = self._route_of(kind)
        body: dict = {"metadata": {"annotations": dict(annotations)}}
        current = self.get(kind, namespace, name)
        if current is not None and uid_of(current):
            body["metadata"]["uid"] = uid_of(current)  # only onto the object we read (409 for a recreated one)
        stored = self._patch(route, namespace, name, body, MERGE_PATCH, f"annotate {kind} {namespace}/{name}")
        self._wrote(kind, stored)

    def delete(self, kind: Kind, namespace: str, name: str, *, uid: str = "") -> None:
        route = self._route_of(kind)
        options: dict = {"propagationPolicy": "Background"}  # what it owns goes after it (the garbage collector)
        if uid:
            options["preconditions"] = {"uid": uid}
        what = f"delete {kind} {namespace}/{name}"
        args: tuple[Any, ...]
        if route.core:
            fn, args = getattr(self.core, f"delete_namespaced_{route.core}"), (name, namespace)
        else:
            fn, args = self.custom.delete_namespaced_custom_object, (*route.group_version, namespace, route.plural,
                                                                     name)
        current = self.get(kind, namespace, name)
        try:
            answer = self._send(what, fn, *args, body=options)
        except _Conflict as exc:
            if uid:  # the uid precondition failed: the object named is gone, another has its name
                raise NotFound(f"{what}: {exc}") from None
            raise
        if answer.get("kind") != "Status" and meta(answer).get("deletionTimestamp"):
            self._wrote(kind, answer)  # still there, terminating: the watch brings that
        else:
            self._hide(kind, uid or uid_of(answer) or (uid_of(current) if current is not None else ""))

    def write_status(self, kind: Kind, namespace: str, name: str, status: dict) -> None:
        route = self._route_of(kind)
        current = self.get(kind, namespace, name)
        ops: list[dict] = []
        if current is not None and uid_of(current):
            ops.append({"op": "test", "path": "/metadata/uid", "value": uid_of(current)})
        ops.append({"op": "add", "path": "/status", "value": status})  # replaces the whole status
        stored = self._patch(route, namespace, name, ops, JSON_PATCH, f"status {kind} {namespace}/{name}",
                             status=route.status)
        self._wrote(kind, stored)

    def emit_event(self, regarding: dict, type: str, reason: str, message: str) -> None:
        self.effects.record_event(regarding, type, reason, message)

    # -- inside -----------------------------------------------------------------------------------------
    def _route(self, obj: dict) -> tuple[Kind, Route]:
        kind = kind_of(obj)
        return kind, self._route_of(kind)

    @staticmethod
    def _route_of(kind: Kind) -> Route:
        route = ROUTES.get(kind)
        if route is None or not kind.namespaced:
            raise HostError(f"{kind}: not a kind the controllers write")
        return route

    def _patch(self, route: Route, namespace: str, name: str, body: Any, content_type: str, what: str, *,
               status: bool = False) -> dict:
        suffix = "_status" if status else ""
        args: tuple[Any, ...]
        if route.core:
            fn, args = getattr(self.core, f"patch_namespaced_{route.core}{suffix}"), (name, namespace, body)
        else:
            fn = getattr(self.custom, f"patch_namespaced_custom_object{suffix}")
            args = (*route.group_version, namespace, route.plural, name, body)
        return self._send(what, fn, *args, _content_type=content_type)

    def _send(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> dict:
        """One write through the scheduler's limiter and retries; the server's answer, or a HostError."""
        from kubernetes.client.exceptions import ApiException

        try:
            resp = self.effects.request(fn, *args, _preload_content=False, **kwargs)
        except NotLeading:
            self.metrics.kube_write("controller", "not_leading")
            raise HostError(f"{what}: not sent, this replica is not leading") from None
        except ApiException as exc:
            self.metrics.kube_write("controller", "refused")
            status = status_body(exc)
            message = f"{what}: {exc.status} {status.get('message') or exc.reason}"
            if exc.status == 404:
                raise NotFound(message) from None
            if exc.status == 409:
                raise (AlreadyExists(message) if status.get("reason") == "AlreadyExists" else _Conflict(message)) \
                    from None
            raise HostError(message) from None
        except Exception as exc:  # no answer (timeouts, connections): the next reconcile looks again
            self.metrics.kube_write("controller", "failed")
            raise HostError(f"{what}: no answer ({type(exc).__name__}: {exc})") from None
        self.metrics.kube_write("controller", "ok")
        data = resp.data
        return json.loads(data) if data else {}


class _Conflict(HostError):
    """409 other than AlreadyExists: a precondition or resourceVersion that no longer holds."""


@dataclass
class KubeControllers:
    """The controllers' thread: reconcile while leading, on changes (debounced), at ``wake_at``."""

    host: KubeHost
    informers: list[Informer]  # the controllers' own (started and stopped here)
    shared: list[Informer]  # the scheduler's that the host reads too
    settings: Settings
    podgroups: PodGroupSettings
    leading: Callable[[], bool]
    metrics: SchedulerMetrics
    debounce: float = 0.05  # gather a burst of changes into one reconcile
    catch_up: float = 5.0  # the longest a reconcile waits for the watch to bring our own writes
    idle: float = 60.0  # reconcile at least this often (nothing lost if a wake-up were)
    follower_poll: float = 0.25  # while not leading (or not listed yet): how often to look whether it is now
    wait_for_admission: Callable[[], bool] | None = None  # from the scheduler's configuration (enqueue or not)
    threads: list[threading.Thread] = field(default_factory=list)
    loop: ControllerLoop | None = None
    reconciles: int = 0

    def __post_init__(self) -> None:
        self._wake = threading.Event()
        self._wake.set()
        for inf in (*self.informers, *self.shared):
            inf.listeners.append(self.changed)

    def changed(self, *_: object) -> None:
        self._wake.set()

    def start_informers(self, stop: threading.Event) -> None:
        for inf in self.informers:
            t = threading.Thread(target=inf.run, args=(stop,), name=f"informer-{inf.kind}", daemon=True)
            t.start()
            self.threads.append(t)

    def start(self, stop: threading.Event) -> None:
        """Start the reconciling thread (once)."""
        if any(t.name == "controllers" for t in self.threads):
            return
        t = threading.Thread(target=self.run, args=(stop,), name="controllers", daemon=True)
        t.start()
        self.threads.append(t)

    def stop_informers(self, wait: float = 0.5) -> None:
        """Stop the controllers' informers, waiting at most ``wait`` seconds in all for those not inside a
        request the server has not answered (as :meth:`KubeSource.stop`)."""
        for inf in self.informers:
            inf.stop()
        deadline = time.monotonic() + wait
        for inf, t in zip(self.informers, [t for t in self.threads if t.name.startswith("informer-")], strict=False):
            if not inf.asking:
                t.join(timeout=max(0.0, deadline - time.monotonic()))

    def synced(self) -> bool:
        """Every kind listed, or known not to be served here (a cluster without Volcano's Job CRDs)."""
        return all(inf.synced.is_set() or inf.missing for inf in (*self.informers, *self.shared))

    def run(self, stop: threading.Event) -> None:
        wake_at: float | None = None
        while not stop.is_set():
            timeout = self.idle if wake_at is None else min(self.idle, max(0.0, wake_at - time.time()))
            self._wake.wait(timeout)
            if stop.is_set() or (self.debounce and stop.wait(self.debounce)):
                break
            self._wake.clear()
            if not self.leading():  # look again shortly: taking the lease over is no change an informer sees
                self.loop, wake_at = None, time.time() + self.follower_poll  # leading later: start afresh
                continue
            if not self.synced():
                wake_at = time.time() + self.follower_poll
                continue
            try:
                result = self.reconcile_once(stop)
            except Exception:  # a bug must not end the controllers: say so and try again shortly
                log.exception("controllers: reconcile failed")
                self.loop, wake_at = None, time.time() + 1.0
                continue
            wake_at = result.wake_at
            if result.writes:
                self._wake.set()  # look again once our writes are seen: what they change may ask for more

    def reconcile_once(self, stop: threading.Event | None = None) -> ReconcileResult:
        """One reconcile, after the informers have caught up with our writes (tests call it directly)."""
        if self.loop is None:
            self.loop = ControllerLoop(copy.copy(self.settings), self.podgroups)
        if self.wait_for_admission is not None:
            self.loop.settings.wait_for_admission = self.wait_for_admission()
        if not self.host.wait_caught_up(self.catch_up, stop):
            log.info("controllers: the watch has not brought our last writes in %.0fs; reconciling anyway "
                     "(creates of what exists already are refused and counted as done)", self.catch_up)
        began = time.perf_counter()
        result = self.loop.reconcile(self.host, datetime.now(UTC))
        self.reconciles += 1
        self.metrics.controller_reconcile(seconds=time.perf_counter() - began, writes=result.writes,
                                          failures=len(result.failures))
        return result


def build(api_client: Any, effects: KubeEffects, shared: Mapping[Kind, Informer], *,
          scheduler_names: Iterable[str], leading: Callable[[], bool], metrics: SchedulerMetrics,
          resync: float = 600.0, watch_timeout: int = 300,
          on_list: Callable[[str], None] | None = None) -> KubeControllers:
    """The controllers over ``shared`` (the scheduler's informers of Pods, PodGroups and PriorityClasses) and
    informers of their own for :data:`WATCHED` (not started: :meth:`KubeControllers.start_informers`)."""
    from kubernetes import client

    # the watches hold their connections for minutes: a pool of their own, big enough for all of them, so they
    # neither starve the writes nor churn connections through a pool sized for fewer
    config = copy.copy(api_client.configuration)
    config.connection_pool_maxsize = max(int(getattr(config, "connection_pool_maxsize", 0) or 0), len(WATCHED) + 2)
    watching = client.ApiClient(config)
    core = client.CoreV1Api(watching)
    custom = client.CustomObjectsApi(watching)
    own: dict[Kind, Informer] = {}
    for kind in WATCHED:
        route = ROUTES[kind]
        if route.core:
            list_fn = getattr(core, f"list_{route.core}_for_all_namespaces")
        else:
            list_fn = _cluster_lister(custom, route)
        own[kind] = Informer(f"{route.plural}.{route.group_version[0] or 'core'}", list_fn,
                             on_upsert=_nothing, on_delete=_nothing, resync=resync, watch_timeout=watch_timeout,
                             on_list=on_list, type_meta=(kind.api_version, kind.kind),
                             keep=owned_by_a_job if kind in JOB_OWNED else None)
    host = KubeHost(api_client, effects, {**own, **shared})
    names = frozenset(scheduler_names) or frozenset({"scoria"})
    settings = Settings(scheduler_name=sorted(names)[0])
    # the API server gives every pod a schedulerName (default-scheduler): a pod naming none is nobody's here
    podgroups = PodGroupSettings(scheduler_names=names, unnamed_is_ours=False)
    return KubeControllers(host, list(own.values()), list(shared.values()), settings, podgroups, leading, metrics)


def _cluster_lister(custom: Any, route: Route) -> Callable[..., Any]:
    group, version = route.group_version

    def list_fn(**kwargs: Any) -> Any:
        return custom.list_cluster_custom_object(group, version, route.plural, **kwargs)
    return list_fn


def _nothing(obj: dict) -> None:
    """The controllers' informers hand on nothing: their ``known`` maps are what the host reads."""
