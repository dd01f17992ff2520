"""Where a session's decisions go in Kubernetes: binds, evictions, status and events through the API server.

* **Binds** are assumed in the cache at once (the next cycle counts them) and
  sent from a small pool of threads: first the placement decisions as pod
  annotations (``scoria.io/numa-nodes``, ``scoria.io/devices``), then the
  ``Binding`` subresource.  A bind the server refuses is undone in the cache
  and reported as an event; 409 (bound already — by another replica that was
  leader a moment ago, say) leaves the pod to the watch.
* **Evictions** go through the Eviction API, so PodDisruptionBudgets hold: a
  429 undoes the eviction in the cache and the victim stays; the next cycle
  may choose again.  Nothing is forced.
* **Status** — PodGroup phase and conditions, Queue ``status.allocated``, pod
  ``nominatedNodeName`` and ``PodScheduled`` condition — is applied to the
  cache at once and written to the API server in one batch at the end of the
  cycle (:meth:`flush`), and only what differs from what was last written or
  seen: a cycle that changes nothing writes nothing.
* **Events**: a ``FailedScheduling`` event per pending pod when its reason
  changes, and again every ``event_interval`` while it stays (kube-scheduler
  repeats them too, the API server aggregates); ``Scheduled``, ``Preempted``
  and ``EvictionRefused`` events for the other outcomes.

Every request passes one client-side rate limiter (``--kube-qps``/``--kube-burst``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any, Callable

from ..api.objects import Condition, Pod, PodGroup
from ..api.placement import DEVICES_ANNOTATION, NUMA_NODES_ANNOTATION
from ..api.quantity import format_quantity
from ..cache import ClusterCache
from ..effects import CacheEffects
from ..metrics import SchedulerMetrics
from .ratelimit import RateLimiter

log = logging.getLogger(__name__)

VOLCANO = ("scheduling.volcano.sh", "v1beta1")
MERGE = "application/merge-patch+json"


class KubeEffects:
    def __init__(self, cache: ClusterCache, api_client: Any, *, scheduler_name: str = "scoria",
                 limiter: RateLimiter | None = None, workers: int = 16, event_interval: float = 300.0,
                 clock: Callable[[], float] = time.time, metrics: SchedulerMetrics | None = None):
        from kubernetes import client

        self.cache = cache
        self.metrics = metrics or SchedulerMetrics()
        self.local = CacheEffects(cache, clock)
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.scheduler_name = scheduler_name
        self.limiter = limiter or RateLimiter(qps=50, burst=100)
        self.event_interval = event_interval
        self.clock = clock
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kube-write")
        self._lock = threading.Lock()
        self._groups: dict[str, dict] = {}       # PodGroup key -> status to write
        self._queues: dict[str, dict] = {}       # Queue name -> status to write
        self._pods: dict[str, tuple[Pod, dict]] = {}  # pod uid -> (pod, status patch) to write
        self._written: dict[tuple[str, str], str] = {}  # (kind, key) -> JSON last written (or seen)
        self._reasons: dict[str, tuple[str, float]] = {}  # pod uid -> (reason, when its event was recorded)
        self._futures: list = []


    def close(self, wait: bool = True) -> None:
        self.pool.shutdown(wait=wait)

    def drain(self, timeout: float = 10.0) -> bool:
        """Wait for the binds, evictions and events sent so far (tests; shutdown)."""
        from concurrent.futures import wait as wait_all
        with self._lock:
            pending, self._futures = self._futures, []
        done, not_done = wait_all(pending, timeout=timeout)
        return not not_done

    def _submit(self, fn: Callable, *args) -> None:
        future = self.pool.submit(fn, *args)
        with self._lock:
            self._futures = [f for f in self._futures if not f.done()]
            self._futures.append(future)

    # -- binds ---------------------------------------------------------------------------------------------
    def bind(self, pod: Pod, node: str, annotations: dict[str, str]) -> None:
        stale = [k for k in (NUMA_NODES_ANNOTATION, DEVICES_ANNOTATION) if k in pod.annotations and k not in annotations]
        self.local.bind(pod, node, annotations)  # assumed: the next cycle counts it
        self._reasons.pop(pod.uid, None)
        self._submit(self._bind, pod.namespace, pod.name, pod.uid, node, dict(annotations), stale)

    def _bind(self, namespace: str, name: str, uid: str, node: str, annotations: dict, stale: list) -> None:
        from kubernetes.client.exceptions import ApiException
        try:
            if annotations or stale:
                patch = {"metadata": {"annotations": {**{k: None for k in stale}, **annotations}}}
                self._call(self.core.patch_namespaced_pod, name, namespace, patch)
            binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": namespace,
                                                                            "uid": uid},
                       "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
            self._call(self.core.create_namespaced_pod_binding, name, namespace, binding, _preload_content=False)
            self.metrics.kube_write("bind", "ok")
            self._event(namespace, name, uid, "Normal", "Scheduled", f"Successfully assigned {namespace}/{name} to {node}")
        except ApiException as exc:
            self.metrics.kube_write("bind", "refused")
            if exc.status == 409:
                log.info("bind %s/%s -> %s: %s (bound already; the watch will say where)", namespace, name, node,
                         exc.reason)
                return
            log.warning("bind %s/%s -> %s refused: %s %s", namespace, name, node, exc.status, exc.reason)
            self.cache.unbind(uid)
            if exc.status != 404:
                self._event(namespace, name, uid, "Warning", "FailedScheduling", f"binding to {node} rejected: "
                            f"{exc.status} {exc.reason}")
        except Exception:
            self.metrics.kube_write("bind", "failed")
            log.exception("bind %s/%s -> %s failed", namespace, name, node)
            self.cache.unbind(uid)

    # -- evictions -------------------------------------------------------------------------------------------
    def evict(self, pod: Pod, reason: str) -> None:
        with self.cache.lock:
            if pod.uid in self.cache.evicting:
                return  # asked already
            self.cache.evicting[pod.uid] = self.clock()
            pod.terminating = True
            self.cache.generation += 1
        self._submit(self._evict, pod.namespace, pod.name, pod.uid, reason)

    def _evict(self, namespace: str, name: str, uid: str, reason: str) -> None:
        from kubernetes.client.exceptions import ApiException
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace},
                "deleteOptions": {"preconditions": {"uid": uid}}}
        try:
            self._call(self.core.create_namespaced_pod_eviction, name, namespace, body, _preload_content=False)
            self.metrics.kube_write("eviction", "ok")
            self._event(namespace, name, uid, "Normal", "Preempted", reason)
        except ApiException as exc:
            if exc.status in (404, 409):  # gone, or a new pod under the name: nothing of ours to evict
                self.cache.evicting.pop(uid, None)
                return
            self.metrics.kube_write("eviction", "refused")
            log.info("eviction of %s/%s refused (%s %s); it stays, and may be chosen again later", namespace,
                     name, exc.status, exc.reason)
            self._unevict(uid)
            if exc.status == 429:
                self._event(namespace, name, uid, "Warning", "EvictionRefused",
                            f"{reason}: refused, a PodDisruptionBudget holds it")
        except Exception:
            self.metrics.kube_write("eviction", "failed")
            log.exception("eviction of %s/%s failed", namespace, name)
            self._unevict(uid)

    def _unevict(self, uid: str) -> None:
        with self.cache.lock:
            self.cache.evicting.pop(uid, None)
            pod = self.cache.pods.get(uid)
            if pod is not None and pod.terminating:
                pod.terminating = False
                self.cache.generation += 1

    # -- status, batched ---------------------------------------------------------------------------------------
    def group_status(self, group: PodGroup, phase: str, conditions: list[Condition]) -> bool:
        changed = self.local.group_status(group, phase, conditions)
        if not group.implicit:
            status = {"phase": phase, "conditions": [_condition(c) for c in conditions]}
            with self._lock:
                self._groups[group.key] = status
        return changed

    def queue_allocated(self, name: str, allocated: dict[str, int]) -> None:
        self.local.queue_allocated(name, allocated)
        queue = self.cache.queues.get(name)
        if queue is not None and not queue.implicit:
            with self._lock:
                self._queues[name] = {"allocated": {k: format_quantity(k, v) for k, v in sorted(allocated.items())}}

    def nominate(self, pod: Pod, node: str | None) -> None:
        self.local.nominate(pod, node)
        self._pod_status(pod, {"nominatedNodeName": node or None})

    def pod_reason(self, pod: Pod, reason: str | None) -> None:
        self.local.pod_reason(pod, reason)
        if not reason or pod.node_name:
            return
        last = self._reasons.get(pod.uid)
        now = self.clock()
        if last is not None and last[0] == reason and now - last[1] < self.event_interval:
            return
        self._reasons[pod.uid] = (reason, now)
        self._pod_status(pod, {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                               "message": reason}]})
        self._submit(self._event, pod.namespace, pod.name, pod.uid, "Warning", "FailedScheduling", reason)

    def _pod_status(self, pod: Pod, status: dict) -> None:
        with self._lock:
            entry = self._pods.get(pod.uid)
            merged = {**(entry[1] if entry else {}), **status}
            self._pods[pod.uid] = (pod, merged)

    def flush(self) -> int:
        """Write what changed this cycle; return how many writes were made.  Failures stay for the next flush."""
        with self._lock:
            groups, self._groups = self._groups, {}
            queues, self._queues = self._queues, {}
            pods, self._pods = self._pods, {}
        writes = 0
        for key, status in groups.items():
            ns, _, name = key.partition("/")
            # Volcano's PodGroup CRD has no status subresource: its status is written on the object itself
            writes += self._write(("PodGroup", key), status, lambda body, ns=ns, name=name:
                                  self.custom.patch_namespaced_custom_object(*VOLCANO, ns, "podgroups", name, body))
        for name, status in queues.items():
            writes += self._write(("Queue", name), status, lambda body, name=name:
                                  self.custom.patch_cluster_custom_object_status(*VOLCANO, "queues", name, body))
        for uid, (pod, status) in pods.items():
            writes += self._write(("Pod", uid), status, lambda body, pod=pod:
                                  self.core.patch_namespaced_pod_status(pod.name, pod.namespace, body,
                                                                        _preload_content=False))
        return writes

    def _write(self, key: tuple[str, str], status: dict, send: Callable[[dict], Any]) -> int:
        text = json.dumps(status, sort_keys=True)
        if self._written.get(key) == text:
            return 0
        try:
            self._call(send, {"status": status})
        except Exception as exc:
            self.metrics.kube_write("status", "failed")
            log.warning("writing the status of %s %s failed (%s); will retry", key[0], key[1], exc)
            return 0
        self.metrics.kube_write("status", "ok")
        self._written[key] = text
        return 1

    def forget(self, kind: str, key: str) -> None:
        """An object is gone: drop what was remembered of it (memory stays bounded)."""
        self._written.pop((kind, key), None)
        if kind == "Pod":
            self._reasons.pop(key, None)

    # -- events and the rate limiter --------------------------------------------------------------------------
    def _event(self, namespace: str, name: str, uid: str, kind: str, reason: str, message: str) -> None:
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"generateName": f"{name}.", "namespace": namespace},
                "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": namespace,
                                   "uid": uid},
                "reason": reason, "message": message[:1024], "type": kind,
                "source": {"component": self.scheduler_name}, "reportingComponent": self.scheduler_name,
                "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1}
        try:
            self._call(self.core.create_namespaced_event, namespace, body, _preload_content=False)
            self.metrics.kube_write("event", "ok")
        except Exception as exc:  # events are best effort
            self.metrics.kube_write("event", "failed")
            log.debug("event %s on %s/%s not recorded: %s", reason, namespace, name, exc)

    def _call(self, fn: Callable, *args, **kwargs):
        self.limiter.acquire()
        return fn(*args, **kwargs)


def _condition(c: Condition) -> dict:
    out = {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}
    if c.transition is not None:
        out["lastTransitionTime"] = c.transition.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return out
