"""The scheduler in Kubernetes: the API client, informers, effects, leader election and the controllers, together.

:func:`start` is what ``python -m scheduler serve --kubernetes`` calls.  Every
replica runs the informers (so a follower's cache is warm when it takes
over); only the leader schedules (``leading``) and runs the Volcano Job and
PodGroup controllers (:mod:`scheduler.modes.kubernetes.controllers`, started by
:meth:`KubeMode.start_controllers` once the scheduler exists).  ``ready`` is what the
``/readyz`` probe answers: every kind scheduling needs listed (Namespaces are not among them:
:mod:`scheduler.modes.kubernetes.source`; nor are the controllers' own kinds, which only the
controllers wait for).  The leader labels its own pod
``scoria.io/leader: "true"`` (and takes the label off when it stops leading),
so the Service that agents stream their reports to selects the leader while
every replica stays ready and rolling updates work as usual.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from proto.errors import InputError
from scheduler.cluster.cache import ClusterCache
from scheduler.controllers.kinds import POD, PODGROUP, PRIORITY_CLASS
from scheduler.metrics import SchedulerMetrics
from scheduler.modes.base import Mode
from scheduler.modes.kubernetes import controllers as kube_controllers
from scheduler.modes.kubernetes.apieffects import KubeEffects
from scheduler.modes.kubernetes.leader import LeaderElector
from scheduler.modes.kubernetes.ratelimit import RateLimiter
from scheduler.modes.kubernetes.source import KubeSource

if TYPE_CHECKING:
    from scheduler.cluster.effects import Effects
    from scheduler.cycle import Scheduler
    from scheduler.history import HistoryStore

log = logging.getLogger(__name__)


LEADER_LABEL = "scoria.io/leader"


class LeaderLabel:
    """Keeps this replica's pod labelled ``scoria.io/leader: "true"`` exactly while it leads.

    Called on every election step: it patches only when the label differs from
    what it last applied, and a failed patch is simply tried again next step.
    The first call always writes, so a replica that restarts as a follower
    takes off a label its previous life left behind.
    """

    def __init__(self, client: Any, pod_name: str, namespace: str):
        from kubernetes import client as k8s

        self.core = k8s.CoreV1Api(client)
        self.pod_name, self.namespace = pod_name, namespace
        self.applied: bool | None = None
        self._failing = False

    def __call__(self, leading: bool) -> None:
        if self.applied == leading:
            return
        try:
            self.core.patch_namespaced_pod(self.pod_name, self.namespace,
                                           {"metadata": {"labels": {LEADER_LABEL: "true" if leading else None}}},
                                           _preload_content=False, _request_timeout=(5.0, 10.0))
        except Exception as exc:  # the agents' Service may point at the wrong replica until it works: say so once
            if not self._failing:
                log.warning("cannot %s label %s on pod %s/%s (retrying): %s", "set" if leading else "remove",
                            LEADER_LABEL, self.namespace, self.pod_name, exc)
            self._failing = True
            return
        self._failing = False
        self.applied = leading


def api_client(*, kubeconfig: str | None = None, in_cluster: bool = False) -> Any:
    """A configured ``kubernetes`` ApiClient; ValueError saying what is wrong."""
    from kubernetes import client, config

    try:
        if in_cluster:
            config.load_incluster_config()
            return client.ApiClient()
        return config.new_client_from_config(config_file=kubeconfig)
    except config.ConfigException as exc:
        where = "in-cluster service account" if in_cluster else (kubeconfig or "$KUBECONFIG / ~/.kube/config")
        raise InputError(f"cannot configure the Kubernetes client from {where}: {exc}") from None


@dataclass
class KubeMode:
    source: KubeSource
    effects: KubeEffects
    elector: LeaderElector | None
    threads: list[threading.Thread]
    controllers: kube_controllers.KubeControllers | None = None
    stop: threading.Event | None = None

    def start_controllers(self, wait_for_admission: Callable[[], bool] | None = None) -> None:
        """Run the Job and PodGroup controllers (they act only while this replica leads).  ``wait_for_admission``:
        whether a Job's pods wait for the scheduler to admit its PodGroup (the configuration has enqueue)."""
        if self.controllers is not None and self.stop is not None:
            self.controllers.wait_for_admission = wait_for_admission
            self.controllers.start(self.stop)

    def leading(self) -> bool:
        """Schedule now: every kind scheduling needs listed (a partial cache would bind onto nodes it thinks
        empty), and leader."""
        return self.ready() and (self.elector is None or self.elector.is_leader)

    def ready(self) -> bool:
        """Every kind scheduling needs listed: this replica could lead at once (the agents' Service picks the
        leader by label)."""
        return self.source.ready()

    def close(self) -> None:
        """Graceful stop (the scheduling loop has stopped): writes finish, *then* the lease is handed back —
        so no new leader schedules while this one's binds are still going out — and the informers stop."""
        if self.controllers is not None:  # a reconcile in flight finishes its writes first
            self.controllers.changed()  # wakes it to see the stop
            for t in self.controllers.threads:
                if t.name == "controllers":
                    t.join(timeout=5)
        self.effects.close(wait=True)
        for t in self.threads:
            t.join(timeout=5)
        if self.elector is not None:
            self.elector.release()
        # every informer told at once, then at most 0.5 s in all for their threads (the scheduler's, then the
        # controllers' with what is left)
        deadline = time.monotonic() + 0.5
        for inf in self.controllers.informers if self.controllers is not None else ():
            inf.stop()
        self.source.stop()
        if self.controllers is not None:
            self.controllers.stop_informers(wait=max(0.0, deadline - time.monotonic()))


def start(cache: ClusterCache, client: Any, stop: threading.Event, *, metrics: SchedulerMetrics | None = None,
          scheduler_names: tuple[str, ...] = ("scoria",),
          qps: float = 50.0, burst: int = 100, resync: float = 600.0, leader_elect: bool = False,
          lease_name: str = "scoria-scheduler", lease_namespace: str | None = None,
          lease_duration: float = 15.0, renew_deadline: float = 10.0, retry_period: float = 2.0,
          sync_timeout: float = 60.0, controllers: bool = True) -> KubeMode:
    metrics = metrics or SchedulerMetrics()
    limiter = RateLimiter(qps=qps, burst=burst)
    effects = KubeEffects(cache, client, scheduler_names=scheduler_names, limiter=limiter, metrics=metrics)
    source = KubeSource(cache, client, resync=resync, on_deleted=effects.forget,
                        on_refused=lambda kind: metrics.kube_refused.labels(kind).inc(),
                        on_list=lambda kind: metrics.kube_lists.labels(kind).inc())
    handle: list[KubeMode] = []
    runner = kube_controllers.build(
        client, effects, {POD: source.informer("pods"), PODGROUP: source.informer("podgroups"),
                          PRIORITY_CLASS: source.informer("priorityclasses")},
        scheduler_names=scheduler_names, leading=lambda: bool(handle) and handle[0].leading(), metrics=metrics,
        resync=resync, on_list=lambda kind: metrics.kube_lists.labels(kind).inc()) if controllers else None
    source.start()
    if runner is not None:
        runner.start_informers(stop)
    if not source.wait_ready(sync_timeout):
        log.warning("not every kind listed within %gs; scheduling starts when they are", sync_timeout)
    threads: list[threading.Thread] = []
    elector = None
    if leader_elect:
        namespace = lease_namespace or os.environ.get("POD_NAMESPACE") or "kube-system"
        pod_name = os.environ.get("POD_NAME")
        label = LeaderLabel(client, pod_name, namespace) if pod_name else None

        def on_step(leading: bool) -> None:  # every step, not only on changes: a failed label is retried
            metrics.leader.set(1 if leading else 0)
            if label is not None:
                label(leading)

        elector = LeaderElector(client, name=lease_name, namespace=namespace, lease_duration=lease_duration,
                                renew_deadline=renew_deadline, retry_period=retry_period,
                                identity=pod_name or None, on_step=on_step)
        # binds queued behind the rate limiter or a backoff must not go out once the renew deadline passed
        effects.leading = lambda: elector is not None and elector.is_leader
        t = threading.Thread(target=elector.run, args=(stop,), name="leader-election", daemon=True)
        t.start()
        threads.append(t)
    else:
        metrics.leader.set(1)
    handle.append(KubeMode(source, effects, elector, threads, runner, stop))
    return handle[0]


class KubernetesMode(Mode):
    """``serve --kubernetes``: objects from the API server's informers, decisions written back through
    it, scheduling only while this replica leads; the load history kept on the Node objects unless
    ``--state-dir`` says otherwise."""

    name = "kubernetes"
    # every interval, as Volcano's scheduler: objects stream in one watch event at a time, and cycles woken by
    # them would cut the work into slivers (hack/bench/jobs.py: more cycles and reconciles, a later p99)
    early_cycles = False

    def __init__(self, client: Any, **settings: Any) -> None:
        super().__init__(register_nodes=False)  # nodes are the API server's
        self.client = client
        self.settings = settings  # keyword arguments of :func:`start`
        self.handle: KubeMode | None = None

    def history_store(self) -> HistoryStore | None:
        from scheduler.modes.kubernetes.history_store import NodeAnnotationHistoryStore
        return NodeAnnotationHistoryStore(self.client)

    def start(self, cache: ClusterCache, stop: threading.Event, metrics: SchedulerMetrics) -> Effects | None:
        self.handle = start(cache, self.client, stop, metrics=metrics, **self.settings)
        return self.handle.effects

    def attach(self, scheduler: Scheduler) -> None:
        """The controllers start with the scheduler: a Job's pods wait for admission iff its configuration
        (reloaded) has the enqueue action."""
        if self.handle is not None:
            self.handle.start_controllers(lambda: "enqueue" in scheduler.config.actions)

    def leading(self) -> bool:
        return self.handle is not None and self.handle.leading()

    def ready(self) -> bool:
        return self.handle is not None and self.handle.ready()

    def close(self, scheduler: Scheduler) -> None:
        if self.handle is not None:
            self.handle.close()
