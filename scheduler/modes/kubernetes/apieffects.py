"""Where a session's decisions go in Kubernetes: binds, evictions, status and events through the API server.

* **Binds** are assumed in the cache at once (the next cycle counts them) and
  sent from a small pool of threads: first the placement decisions as pod
  annotations (``scoria.io/numa-nodes``, ``scoria.io/devices``) with the
  pod's resourceVersion and uid as preconditions — so they never land on a pod
  that changed, was bound elsewhere or recreated meanwhile — then the
  ``pods/binding`` subresource.  A bind the server refuses is undone in the
  cache and reported as an event; 409 (bound already: another replica that was
  leader a moment ago, say) leaves the pod to the watch; a bind whose answer
  was lost is looked up before anything is undone.
* **Evictions** go through the Eviction API, so PodDisruptionBudgets hold: a
  429 undoes the eviction in the cache and the victim stays; the next cycle
  may choose again.  Nothing is forced.
* **Status** — PodGroup phase and conditions, Queue ``status.allocated``, pod
  ``nominatedNodeName`` and ``PodScheduled`` condition — is applied to the
  cache at once and written to the API server by a writer thread after each
  cycle (:meth:`flush`), only what differs from what was last written, so a
  cycle that changes nothing writes nothing and a slow API server never holds
  up scheduling.  A failed write is retried (:meth:`backlog` keeps the loop
  flushing until it is through).
* **Events**: a ``FailedScheduling`` event per pending pod when its reason
  changes, and again every ``event_interval`` while it stays; an
  ``EvictionRefused`` per victim at most every ``event_interval`` too (a later
  cycle choosing it again while its budget still holds says nothing new);
  ``Scheduled`` and ``Preempted`` for the other outcomes.  Pods that name
  another scheduler are never written to.

Every request passes one client-side rate limiter (``--kube-qps``/``--kube-burst``)
and has a timeout: a silent connection cannot hang a writer.

**Faults.**  A bind, eviction or event the server answers with 5xx, or that gets
no answer (a timeout, a dropped connection), is sent again with exponential
backoff (:data:`ATTEMPTS` tries); a 429 waits at least its ``Retry-After``
before the next try — except the Eviction API's 429 for a PodDisruptionBudget
(its Status names the cause ``DisruptionBudget``): that is the budget's answer,
not overload, so the eviction is undone at once and a later cycle may choose
again.  A bind whose answer was lost and that then meets 409 is
looked up, as above.  A failed status write stays queued and is tried again
after a backoff of its own (or its ``Retry-After``).  With leader election,
no bind, eviction or status write leaves once this replica has stopped
leading (``leading``, checked before every try): a bind that waited for the
rate limiter or a backoff past the renew deadline is undone instead, so two
replicas never bind at once.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from proto.vocab.placement import DEVICES_ANNOTATION, NUMA_NODES_ANNOTATION
from proto.vocab.quantity import format_quantity
from scheduler.api.objects import Condition, Pod, PodGroup
from scheduler.cluster.cache import ClusterCache
from scheduler.cluster.effects import CacheEffects
from scheduler.metrics import SchedulerMetrics
from scheduler.modes.kubernetes.apistatus import status_body
from scheduler.modes.kubernetes.ratelimit import RateLimiter

log = logging.getLogger(__name__)

VOLCANO = ("scheduling.volcano.sh", "v1beta1")
TIMEOUT = (5.0, 30.0)  # connect, read: every write
ATTEMPTS = 5  # tries of one bind, eviction or event through 5xx, 429 and lost answers
BACKOFF = (0.2, 5.0)  # first retry delay, cap (seconds; doubled each try, jittered)
RETRY_AFTER_CAP = 60.0  # the longest a Retry-After is waited for, seconds
RETRIABLE = frozenset({429, 500, 502, 503, 504})


class NotLeading(Exception):
    """This replica stopped leading: the write is not sent."""


class KubeEffects:
    def __init__(self, cache: ClusterCache, api_client: Any, *, scheduler_names: Iterable[str] = ("scoria",),
                 limiter: RateLimiter | None = None, workers: int = 16, event_interval: float = 300.0,
                 clock: Callable[[], float] = time.time, metrics: SchedulerMetrics | None = None,
                 leading: Callable[[], bool] = lambda: True, sleep: Callable[[float], object] | None = None):
        from kubernetes import client

        self.cache = cache
        self.metrics = metrics or SchedulerMetrics()
        self.local = CacheEffects(cache, clock)
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.scheduler_names = frozenset(scheduler_names)
        self.component = sorted(self.scheduler_names)[0]
        self.limiter = limiter or RateLimiter(qps=50, burst=100)
        self.event_interval = event_interval
        self.clock = clock
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kube-write")
        self.writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kube-status")
        self._lock = threading.Lock()
        self._queued: dict[tuple[str, str], tuple[dict, Callable[[dict], Any]]] = {}  # (kind, key) -> to write
        self._writing = 0  # status writes taken by the writer and not finished
        self._written: dict[tuple[str, str], dict] = {}  # (kind, key) -> status last written
        self._reasons: dict[str, tuple[str, float]] = {}  # pod uid -> (reason, when its event was recorded)
        self._refusals: dict[str, float] = {}  # victim uid -> when its EvictionRefused event was recorded
        self._futures: list[Future[object]] = []
        self.leading = leading  # checked before every bind, eviction and status write goes out
        self._closing = threading.Event()
        self.sleep = sleep or self._closing.wait  # backoff waits end at once on shutdown
        self._not_before: dict[tuple[str, str], float] = {}  # status key -> monotonic time of its next try
        self._failed: dict[tuple[str, str], int] = {}  # status key -> failed tries in a row

    def close(self, wait: bool = True) -> None:
        """Shut down: what is queued is written, writes in flight finish (backoff waits end at once)."""
        with self._lock:
            self._not_before.clear()
        if wait:
            self.flush()
        self._closing.set()
        self.writer.shutdown(wait=wait)
        self.pool.shutdown(wait=wait)

    def drain(self, timeout: float = 10.0) -> bool:
        """Wait for the binds, evictions, events and status writes sent so far (tests; shutdown)."""
        from concurrent.futures import wait as wait_all
        with self._lock:
            pending, self._futures = self._futures, []
        done, not_done = wait_all(pending, timeout=timeout)
        return not not_done

    def _submit(self, fn: Callable[..., object], *args: Any, executor: ThreadPoolExecutor | None = None) -> None:
        future = (executor or self.pool).submit(fn, *args)
        with self._lock:
            self._futures = [f for f in self._futures if not f.done()]
            self._futures.append(future)

    def _ours(self, pod: Pod) -> bool:
        return not pod.scheduler_name or pod.scheduler_name in self.scheduler_names

    # -- binds ---------------------------------------------------------------------------------------------
    def bind(self, pod: Pod, node: str, annotations: dict[str, str]) -> None:
        stale = [k for k in (NUMA_NODES_ANNOTATION, DEVICES_ANNOTATION) if k in pod.annotations and k not in annotations]
        version = pod.resource_version
        if not self.local.bind(pod, node, annotations):  # assumed: the next cycle counts it
            return  # deleted while the cycle ran
        self._reasons.pop(pod.uid, None)
        self._submit(self._bind, pod.namespace, pod.name, pod.uid, version, node, dict(annotations), stale)

    def _bind(self, namespace: str, name: str, uid: str, version: str, node: str, annotations: dict,
              stale: list) -> None:
        from kubernetes.client.exceptions import ApiException
        try:
            if annotations or stale:
                meta = {"uid": uid, "annotations": {**dict.fromkeys(stale), **annotations}}
                if version:
                    meta["resourceVersion"] = version  # only onto the pod as this scheduler saw it
                self.request(self.core.patch_namespaced_pod, name, namespace, {"metadata": meta},
                           _preload_content=False)
            binding = {"apiVersion": "v1", "kind": "Binding",
                       "metadata": {"name": name, "namespace": namespace, "uid": uid},
                       "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
            self.request(self.core.create_namespaced_pod_binding, name, namespace, binding, _preload_content=False)
            self.metrics.kube_write("bind", "ok")
            self._event(namespace, name, uid, "Normal", "Scheduled", f"Successfully assigned {namespace}/{name} to {node}")
        except NotLeading:
            self.metrics.kube_write("bind", "not_leading")
            log.warning("bind %s/%s -> %s not sent: this replica stopped leading", namespace, name, node)
            self.cache.unbind(uid)
        except ApiException as exc:
            self.metrics.kube_write("bind", "refused")
            if exc.status == 409 and self._bound_on_server(namespace, name, uid):
                log.info("bind %s/%s -> %s: bound already; the watch will say where", namespace, name, node)
                return
            log.warning("bind %s/%s -> %s refused: %s %s", namespace, name, node, exc.status, exc.reason)
            if exc.status in (404, 409):  # gone, or (409) recreated under its name, gated, changed: ask
                self._bind_refused_reread(namespace, name, uid, node, exc)
                return
            self.cache.unbind(uid)
            self._event(namespace, name, uid, "Warning", "FailedScheduling", f"binding to {node} rejected: "
                        f"{exc.status} {exc.reason}")
        except Exception as exc:  # no answer: the bind may or may not have happened; ask before undoing it
            self.metrics.kube_write("bind", "failed")
            log.warning("bind %s/%s -> %s: no answer (%s)", namespace, name, node, exc)
            if not self._bound_on_server(namespace, name, uid):
                self.cache.unbind(uid)

    def _bind_refused_reread(self, namespace: str, name: str, uid: str, node: str, exc: Exception) -> None:
        """A 404 or 409 from binding: ask for the pod instead of guessing.

        Gone, or recreated under its name (another uid): this pod is forgotten, so no cycle binds it
        again (the watch brings any new one).  Still there, or the answer is unknown: the assumption is
        dropped and an event says why, so a retry is not silent.
        """
        from kubernetes.client.exceptions import ApiException
        try:
            resp = self.request(self.core.read_namespaced_pod, name, namespace, _preload_content=False,
                              guarded=False)
            current = json.loads(resp.data).get("metadata", {}).get("uid")
        except ApiException as read:
            current = None if read.status == 404 else ""
        except Exception:
            current = ""  # unknown
        if current is None or (current and current != uid):
            log.info("bind %s/%s: the pod is gone%s; forgetting it", namespace, name,
                     " (recreated under its name)" if current else "")
            self.cache.remove_pod(uid)
            return
        self.cache.unbind(uid)
        self._event(namespace, name, uid, "Warning", "FailedScheduling",
                    f"binding to {node} rejected: {getattr(exc, 'status', '')} {getattr(exc, 'reason', '')}; "
                    "the pod is still there, scheduling it again")

    def _bound_on_server(self, namespace: str, name: str, uid: str) -> bool:
        """Is the pod (this uid) bound on the server?  Unknown (unreachable) counts as not."""
        try:
            resp = self.request(self.core.read_namespaced_pod, name, namespace, _preload_content=False,
                              guarded=False)
            obj = json.loads(resp.data)
        except Exception:
            return False
        return obj.get("metadata", {}).get("uid") == uid and bool(obj.get("spec", {}).get("nodeName"))

    # -- evictions -------------------------------------------------------------------------------------------
    def evict(self, pod: Pod, reason: str) -> None:
        with self.cache.lock:
            current = self.cache.pods.get(pod.uid)  # the cache's object: the watch may have replaced the session's
            if current is None or pod.uid in self.cache.evicting:
                return  # gone, or asked already
            self.cache.evicting[pod.uid] = self.clock()
            current.terminating = True
            self.cache.generation += 1
        self._submit(self._evict, pod.namespace, pod.name, pod.uid, reason)

    def _evict(self, namespace: str, name: str, uid: str, reason: str) -> None:
        from kubernetes.client.exceptions import ApiException
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace},
                "deleteOptions": {"preconditions": {"uid": uid}}}
        try:
            self.request(self.core.create_namespaced_pod_eviction, name, namespace, body, _preload_content=False)
            self.metrics.kube_write("eviction", "ok")
            self._event(namespace, name, uid, "Normal", "Preempted", reason)
        except NotLeading:
            self.metrics.kube_write("eviction", "not_leading")
            self._unevict(uid)
        except ApiException as exc:
            if exc.status in (404, 409):  # gone, or a new pod under the name: nothing of ours to evict
                self.cache.evicting.pop(uid, None)
                return
            self.metrics.kube_write("eviction", "refused")
            log.info("eviction of %s/%s refused (%s %s); it stays, and may be chosen again later", namespace,
                     name, exc.status, exc.reason)
            self._unevict(uid)
            if exc.status == 429 and self._refusal_due(uid):
                self._event(namespace, name, uid, "Warning", "EvictionRefused",
                            f"{reason}: refused, a PodDisruptionBudget holds it")
        except Exception:
            self.metrics.kube_write("eviction", "failed")
            log.exception("eviction of %s/%s failed", namespace, name)
            self._unevict(uid)

    def _refusal_due(self, uid: str) -> bool:
        """Record an EvictionRefused event for this victim now?  Once per ``event_interval``."""
        now = self.clock()
        with self._lock:
            last = self._refusals.get(uid)
            if last is not None and now - last < self.event_interval:
                return False
            self._refusals[uid] = now
            return True

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
            ns, name = group.namespace, group.name
            # Volcano's PodGroup CRD has no status subresource: its status is written on the object itself
            self._queue(("PodGroup", group.key), {"phase": phase, "conditions": [_condition(c) for c in conditions]},
                        lambda body: self.custom.patch_namespaced_custom_object(*VOLCANO, ns, "podgroups", name, body,
                                                                                _request_timeout=TIMEOUT),
                        uid=group.uid)
        return changed

    def queue_allocated(self, name: str, allocated: dict[str, int]) -> None:
        self.local.queue_allocated(name, allocated)
        queue = self.cache.queues.get(name)
        if queue is not None and not queue.implicit:
            amounts = {k: format_quantity(k, v) for k, v in sorted(allocated.items())}
            self._queue(("Queue", name), {"allocated": amounts},
                        lambda body: self.custom.patch_cluster_custom_object_status(*VOLCANO, "queues", name, body,
                                                                                    _request_timeout=TIMEOUT))

    def queue_deserved(self, name: str, deserved: dict[str, int] | None) -> None:
        self.local.queue_deserved(name, deserved)

    def nominate(self, pod: Pod, node: str | None) -> None:
        self.local.nominate(pod, node)
        if self._ours(pod):
            self._pod_status(pod, {"nominatedNodeName": node or None})

    def pod_reason(self, pod: Pod, reason: str | None) -> None:
        self.local.pod_reason(pod, reason)
        if not reason or pod.node_name or not self._ours(pod):
            return  # another scheduler's pod is its business: no condition, no event
        last = self._reasons.get(pod.uid)
        now = self.clock()
        if last is not None and last[0] == reason and now - last[1] < self.event_interval:
            return
        self._reasons[pod.uid] = (reason, now)
        self._pod_status(pod, {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                               "message": reason}]})
        self._submit(self._event, pod.namespace, pod.name, pod.uid, "Warning", "FailedScheduling", reason)

    def _pod_status(self, pod: Pod, status: dict) -> None:
        key = ("Pod", pod.uid)
        with self._lock:
            queued = self._queued.get(key)
        merged = {**(queued[0] if queued else {}), **status}
        name, ns = pod.name, pod.namespace
        self._queue(key, merged, lambda body: self.core.patch_namespaced_pod_status(
            name, ns, body, _preload_content=False, _request_timeout=TIMEOUT), uid=pod.api_uid)

    def _queue(self, key: tuple[str, str], status: dict, send: Callable[[dict], Any], *, uid: str = "") -> None:
        """A status to write with ``send``.  With the object's ``uid`` the write carries it, which the API server
        checks as a precondition: 409 where the name now holds another object (deleted and made again since this
        one was read, while the watch was away), whose status is not this one's."""
        if uid:
            unguarded = send

            def send(body: dict) -> Any:
                return unguarded({**body, "metadata": {"uid": uid}})
        with self._lock:
            self._queued[key] = (status, send)

    def flush(self) -> int:
        """Hand what this cycle changed to the status writer; how many writes were queued."""
        now = time.monotonic()
        with self._lock:
            batch, self._queued = self._queued, {}
            waiting = {k: v for k, v in batch.items() if self._not_before.get(k, 0.0) > now}  # backing off
            self._queued.update(waiting)
            batch = {k: v for k, v in batch.items() if k not in waiting and _normal(v[0]) != self._written.get(k)}
            self._writing += len(batch)
        if batch:
            self._submit(self._write_all, batch, executor=self.writer)
        return len(batch)

    def backlog(self) -> int:
        """Status writes queued or in flight: the loop flushes again until this is 0."""
        with self._lock:
            return len(self._queued) + self._writing

    def _write_all(self, batch: dict) -> None:
        if not self.leading():  # another replica may lead now: its statuses stand; ours are dropped
            log.warning("%d status writes dropped: this replica stopped leading", len(batch))
            with self._lock:
                self._writing -= len(batch)
                self._written.clear()  # what the server holds is the new leader's business now
            return
        for key, (status, send) in batch.items():
            body = dict(status)
            if key[0] == "Queue":  # a merge patch keeps keys it is not given: drop the ones gone
                gone = set((self._written.get(key) or {}).get("allocated", {})) - set(status["allocated"])
                body = {"allocated": {**status["allocated"], **dict.fromkeys(gone)}}
            try:
                self.limiter.acquire()
                send({"status": body})  # its own timeout is bound in
            except Exception as exc:
                code = getattr(exc, "status", None)
                # the object is gone (a controller deleted a PodGroup, say), or its name holds another one now
                # (the uid precondition): there is nothing to write any more, and trying again would try for ever
                if code in (404, 409):
                    self.metrics.kube_write("status", "refused")
                    with self._lock:
                        self._failed.pop(key, None)
                        self._not_before.pop(key, None)
                        self._writing -= 1
                    log.info("the status of %s %s was not written: it is gone%s", key[0], key[1],
                             " (its name holds another object now)" if code == 409 else "")
                    continue
                self.metrics.kube_write("status", "failed")
                with self._lock:
                    failures = self._failed[key] = self._failed.get(key, 0) + 1
                    delay = _retry_delay(exc, failures)
                    self._not_before[key] = time.monotonic() + delay
                    self._queued.setdefault(key, (status, send))  # unless a newer status came meanwhile
                    self._writing -= 1
                log.warning("writing the status of %s %s failed (%s); will retry in %.1fs", key[0], key[1],
                            _describe(exc), delay)
                continue
            self.metrics.kube_write("status", "ok")
            with self._lock:
                self._written[key] = _normal(status)
                self._failed.pop(key, None)
                self._not_before.pop(key, None)
                self._writing -= 1

    def forget(self, kind: str, key: str) -> None:
        """An object is gone: drop what was remembered of it (memory stays bounded)."""
        with self._lock:
            self._written.pop((kind, key), None)
            self._queued.pop((kind, key), None)
            self._not_before.pop((kind, key), None)
            self._failed.pop((kind, key), None)
        if kind == "Pod":
            self._reasons.pop(key, None)
            with self._lock:
                self._refusals.pop(key, None)

    # -- events and the rate limiter --------------------------------------------------------------------------
    def _event(self, namespace: str, name: str, uid: str, kind: str, reason: str, message: str) -> None:
        self.send_event({"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": namespace, "uid": uid},
                        kind, reason, message)

    def record_event(self, regarding: dict, kind: str, reason: str, message: str) -> None:
        """An event about any object (``regarding``: its apiVersion, kind, name, namespace and uid), sent from
        the writers' pool: the caller never waits for it, and it never fails the caller."""
        self._submit(self.send_event, dict(regarding), kind, reason, message)

    def send_event(self, regarding: dict, kind: str, reason: str, message: str) -> None:
        """Record one event now (best effort: a failure is counted and logged, never raised)."""
        name = str(regarding.get("name") or "")
        namespace = str(regarding.get("namespace") or "default")  # a cluster-scoped object's events live there
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        involved = {k: regarding[k] for k in ("apiVersion", "kind", "name", "namespace", "uid") if regarding.get(k)}
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"generateName": f"{name}.", "namespace": namespace},
                "involvedObject": involved,
                "reason": reason, "message": message[:1024], "type": kind,
                "source": {"component": self.component}, "reportingComponent": self.component,
                "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1}
        try:  # a lost answer is not retried: the event may be there already
            self.request(self.core.create_namespaced_event, namespace, body, _preload_content=False, lost_ok=False)
            self.metrics.kube_write("event", "ok")
        except Exception as exc:  # events are best effort
            self.metrics.kube_write("event", "failed")
            log.debug("event %s on %s/%s not recorded: %s", reason, namespace, name, exc)

    def request(self, fn: Callable[..., Any], *args: Any, lost_ok: bool = True, guarded: bool = True,
                **kwargs: Any) -> Any:
        """One request through the rate limiter, retried with backoff through 5xx, 429 (after its
        ``Retry-After``) and, if ``lost_ok``, no answer; a ``guarded`` one (a write) raises NotLeading
        instead of going out once this replica has stopped leading."""
        kwargs.setdefault("_request_timeout", TIMEOUT)
        for attempt in range(1, ATTEMPTS + 1):
            self.limiter.acquire()
            if guarded and not self.leading():
                raise NotLeading
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                if attempt == ATTEMPTS or self._closing.is_set() or not _retriable(exc, lost_ok):
                    raise
                delay = _retry_delay(exc, attempt)
                log.info("%s: %s; try %d of %d in %.1fs", getattr(fn, "__name__", "request"), _describe(exc),
                         attempt + 1, ATTEMPTS, delay)
                self.sleep(delay)
                if self._closing.is_set():
                    raise
        raise AssertionError("unreachable")


def _retriable(exc: Exception, lost_ok: bool) -> bool:
    """5xx and 429 always; no answer (timeout, refused or dropped connection) if ``lost_ok``."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    if isinstance(exc, ApiException):
        return exc.status in RETRIABLE and not _budget_refusal(exc)
    return lost_ok and isinstance(exc, HTTPError | OSError)


def _budget_refusal(exc: Exception) -> bool:
    """Is this the Eviction API's 429 for a PodDisruptionBudget (a Status cause ``DisruptionBudget``: no
    disruption allowed, or the budget not yet processed)?  Trying again at once would only be refused again."""
    if getattr(exc, "status", None) != 429:
        return False
    details = status_body(exc).get("details")
    causes = (details.get("causes") if isinstance(details, dict) else None) or []
    return any(isinstance(c, dict) and c.get("reason") == "DisruptionBudget" for c in causes)


def _retry_after(exc: Exception) -> float | None:
    """The server's ``Retry-After`` (seconds) on a 429 or 503, if it gave one."""
    headers = getattr(exc, "headers", None)
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return min(RETRY_AFTER_CAP, max(0.0, float(value))) if value is not None else None
    except ValueError:  # an HTTP date: not sent by kube-apiserver; plain backoff
        return None


def _retry_delay(exc: Exception, failures: int) -> float:
    """Exponential backoff with jitter after ``failures`` failed tries, never shorter than ``Retry-After``."""
    first, cap = BACKOFF
    delay = min(cap, first * 2 ** min(failures - 1, 10)) * random.uniform(0.5, 1.0)
    after = _retry_after(exc)
    return max(delay, after) if after is not None else delay


def _describe(exc: Exception) -> str:
    status = getattr(exc, "status", None)
    return f"{status} {getattr(exc, 'reason', '')}" if status else f"{type(exc).__name__}: {exc}"


def _normal(status: dict) -> dict:
    """A status as compared with what was written (JSON round trip: tuples and lists alike)."""
    return json.loads(json.dumps(status, sort_keys=True))


def _condition(c: Condition) -> dict:
    out = {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}
    if c.transition is not None:
        out["lastTransitionTime"] = c.transition.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return out
