"""The scheduler in Kubernetes: the API client, informers, effects and (optionally) leader election, together.

:func:`start` is what ``python -m scheduler serve --kubernetes`` calls.  Every
replica runs the informers (so a follower's cache is warm when it takes
over); only the leader schedules (``leading``).  ``ready`` is what the
``/readyz`` probe answers: every kind listed.  The leader labels its own pod
``scoria.io/leader: "true"`` (and takes the label off when it stops leading),
so the Service that agents stream their reports to selects the leader while
every replica stays ready and rolling updates work as usual.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Any

from ..cache import ClusterCache
from ..metrics import SchedulerMetrics
from .effects import KubeEffects
from .leader import LeaderElector
from .ratelimit import RateLimiter
from .source import KubeSource

log = logging.getLogger(__name__)


LEADER_LABEL = "scoria.io/leader"


def leader_label(client: Any, pod_name: str, namespace: str):
    """``on_change`` for the elector: put the leader label on this replica's pod, or take it off."""
    from kubernetes import client as k8s

    core = k8s.CoreV1Api(client)

    def set_label(leading: bool) -> None:
        try:
            core.patch_namespaced_pod(pod_name, namespace,
                                      {"metadata": {"labels": {LEADER_LABEL: "true" if leading else None}}})
        except Exception as exc:  # the Service keeps its old target until the next change; say so
            log.warning("cannot %s label %s on pod %s/%s: %s", "set" if leading else "remove", LEADER_LABEL,
                        namespace, pod_name, exc)

    return set_label


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
        raise ValueError(f"cannot configure the Kubernetes client from {where}: {exc}") from None


@dataclass
class KubeMode:
    source: KubeSource
    effects: KubeEffects
    elector: LeaderElector | None
    threads: list[threading.Thread]

    def leading(self) -> bool:
        return self.elector is None or self.elector.is_leader

    def ready(self) -> bool:
        """Every kind listed: this replica could lead at once (the agents' Service picks the leader by label)."""
        return all(inf.synced.is_set() for inf in self.source.informers)

    def close(self) -> None:
        """Graceful stop: writes in flight finish, the lease is handed back, the informers stop."""
        self.effects.close(wait=True)
        for t in self.threads:
            t.join(timeout=5)
        self.source.stop()


def start(cache: ClusterCache, client: Any, stop: threading.Event, *, metrics: SchedulerMetrics | None = None,
          scheduler_name: str = "scoria",
          qps: float = 50.0, burst: int = 100, resync: float = 600.0, leader_elect: bool = False,
          lease_name: str = "scoria-scheduler", lease_namespace: str | None = None,
          lease_duration: float = 15.0, renew_deadline: float = 10.0, retry_period: float = 2.0,
          sync_timeout: float = 60.0) -> KubeMode:
    metrics = metrics or SchedulerMetrics()
    limiter = RateLimiter(qps=qps, burst=burst)
    effects = KubeEffects(cache, client, scheduler_name=scheduler_name, limiter=limiter, metrics=metrics)
    source = KubeSource(cache, client, resync=resync, on_pod_deleted=lambda uid: effects.forget("Pod", uid),
                        on_refused=lambda kind: metrics.kube_refused.labels(kind).inc(),
                        on_list=lambda kind: metrics.kube_lists.labels(kind).inc())
    source.start()
    if not source.wait_synced(sync_timeout):
        log.warning("not every kind listed within %gs; scheduling starts when they are", sync_timeout)
    threads: list[threading.Thread] = []
    elector = None
    if leader_elect:
        namespace = lease_namespace or os.environ.get("POD_NAMESPACE") or "kube-system"
        pod_name = os.environ.get("POD_NAME")
        label = leader_label(client, pod_name, namespace) if pod_name else None

        def on_change(leading: bool) -> None:
            metrics.leader.set(1 if leading else 0)
            if label is not None:
                label(leading)

        elector = LeaderElector(client, name=lease_name, namespace=namespace, lease_duration=lease_duration,
                                renew_deadline=renew_deadline, retry_period=retry_period,
                                identity=pod_name or None, on_change=on_change)
        t = threading.Thread(target=elector.run, args=(stop,), name="leader-election", daemon=True)
        t.start()
        threads.append(t)
    else:
        metrics.leader.set(1)
    return KubeMode(source, effects, elector, threads)
