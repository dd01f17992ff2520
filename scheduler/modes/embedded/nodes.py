"""Embedded mode's nodes over their life: registered by reports, kept in the store, their conditions and
taints kept current, and the pods of a node that is gone dealt with as Kubernetes deals with them.

:class:`NodeLifecycle` applies :mod:`.lifecycle`'s decisions once a second (:meth:`NodeLifecycle.tick`,
from a thread of its own: a silent node sends no report that could trigger anything):

* a node registered by its agent's reports is stored (``kind: Node``, its labels and allocatable), so a
  restarted scheduler lists it, can delete it, and knows where its pods were bound;
* each node's condition (Ready, NotReady, Unknown) sets its taints and whether it takes new pods;
* the pods bound to a node that is not Ready turn Unknown, and are evicted when their toleration of
  its ``NoExecute`` taint runs out: deleted, since nothing on that node can confirm they stopped (its
  agent, if it comes back, is told to stop them: their uid is unknown by then).  A pod a controller
  owns is made again by that controller; a plain pod is gone for good — apply it again.
* a pod deleted, or evicted by preemption, while its node is not Ready is gone at once: the agent that
  would have confirmed it is not there;
* pods bound to a node that no longer exists (``delete node``, or a store from before nodes were
  stored) are deleted once the node has stayed away for the grace period, as Kubernetes' pod garbage
  collector deletes orphaned pods after its quarantine; a node back in time keeps them.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import TYPE_CHECKING, Any

from scheduler.api.objects import Node, Pod
from scheduler.modes.embedded.events import NODE_CONTROLLER, NORMAL, WARNING, Ref
from scheduler.modes.embedded.lifecycle import (
    LIFECYCLE_TAINTS,
    NOT_READY,
    LifecycleConfig,
    NodeCondition,
    default_tolerations,
    eviction_time,
    node_condition,
    taints_for,
)
from scheduler.modes.embedded.store import Stored

if TYPE_CHECKING:
    from scheduler.modes.embedded.mode import Embedded

log = logging.getLogger(__name__)

FINISHED = ("Succeeded", "Failed")
TICK_S = 1.0


def node_manifest(node: Node) -> dict:
    """How a node registered by reports is stored: its name, labels and allocatable (canonical quantities)."""
    allocatable = {name: f"{amount}m" if name == "cpu" else str(amount) for name, amount in sorted(node.allocatable.items())}
    meta: dict[str, Any] = {"name": node.name}
    if node.labels:
        meta["labels"] = dict(node.labels)
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "status": {"allocatable": allocatable}}


class NodeLifecycle:
    def __init__(self, embedded: Embedded, config: LifecycleConfig | None = None):
        self.embedded, self.config = embedded, config or LifecycleConfig()
        self.started = embedded.clock()
        self.conditions: dict[str, NodeCondition] = {}
        self._missing: dict[str, float] = {}  # nodes pods are bound to that do not exist, since when
        self._stored: dict[str, dict] = {}  # what is stored of each registered node
        self._thread: threading.Thread | None = None

    # -- reading ---------------------------------------------------------------------------------
    def condition(self, name: str) -> NodeCondition | None:
        return self.conditions.get(name)

    def gone(self, name: str) -> bool:
        """Whether nothing on node ``name`` can confirm a pod stopped: its condition is in force, or it does not
        exist."""
        cond = self.conditions.get(name)
        return name not in self.embedded.cache.nodes or (cond is not None and cond.tainted)

    # -- the loop --------------------------------------------------------------------------------
    def start(self, stop: threading.Event) -> None:
        def loop() -> None:
            while not stop.wait(TICK_S):
                try:
                    self.tick()
                except Exception:  # a bug in one tick must not end node lifecycle for good
                    log.exception("node lifecycle tick failed")
        self._thread = threading.Thread(target=loop, name="node-lifecycle", daemon=True)
        self._thread.start()

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join(timeout=5)

    def tick(self, now: float | None = None) -> None:
        """Conditions, taints and pods brought up to date at ``now`` (the embedded clock's)."""
        emb = self.embedded
        now = emb.clock() if now is None else now
        with emb._lock, emb.cache.lock:
            self._store_nodes()
            for name, node in list(emb.cache.nodes.items()):
                self._update(name, node, now)
            changes: list[tuple[str, str, dict]] = []
            gone: list[tuple[Pod, str]] = []
            bound = self._bound()
            for node_name, pods in bound.items():
                cond = self.conditions.get(node_name) if node_name in emb.cache.nodes else None
                if cond is None:
                    since = self._missing.setdefault(node_name, now)
                    if now - since > self.config.grace:
                        gone += [(p, f"its node {node_name} no longer exists") for p in pods]
                    continue
                for pod in pods:
                    self._pod_on(pod, node_name, cond, now, changes, gone)
            self._missing = {n: t for n, t in self._missing.items() if n in bound and n not in emb.cache.nodes}
            emb.store.update_status(changes)
            for pod, why in gone:
                emb.forget_pod(pod)
                log.warning("pod %s deleted: %s", pod.key, why)
                emb.events.record(Ref("Pod", pod.namespace, pod.name, pod.uid), NORMAL, "TaintManagerEviction",
                                  f"Marking for deletion Pod {pod.key}: {why}", source=NODE_CONTROLLER)
        emb.events.flush()

    # -- nodes -----------------------------------------------------------------------------------
    def _update(self, name: str, node: Node, now: float) -> None:
        emb = self.embedded
        t = emb.cache.telemetry.get(name)
        cond = node_condition(heard=t.received if t is not None else None, runs_pods=bool(t and t.runs_pods),
                              started=self.started, now=now, grace=self.config.grace,
                              previous=self.conditions.get(name))
        old = self.conditions.get(name)
        self.conditions[name] = cond
        taints = tuple(t for t in node.taints if t.key not in LIFECYCLE_TAINTS) + taints_for(cond)
        if node.ready != cond.ready or node.taints != taints:
            emb.cache.upsert(dataclasses.replace(node, ready=cond.ready, taints=taints))
        if old is None or (old.status, old.reason) != (cond.status, cond.reason):
            level = logging.INFO if cond.ready or old is None else logging.WARNING
            log.log(level, "node %s is %s (%s): %s", name, cond.status, cond.reason, cond.message)
            if old is None or old.ready != cond.ready or cond.tainted != old.tainted:
                word = "NodeReady" if cond.ready else "NodeNotReady"
                emb.events.record(Ref("Node", "", name, name), NORMAL if cond.ready else WARNING, word,
                                  f"Node {name} status is now: {word} ({cond.status}, {cond.reason}: {cond.message})",
                                  source=NODE_CONTROLLER)
            emb.changes.bump()  # nothing is stored of a condition: the watchers are told here

    def _store_nodes(self) -> None:
        """Nodes registered by reports, stored when new or changed (their allocatable follows their reports)."""
        emb = self.embedded
        writes = []
        for name in list(emb.cache.registered):
            node = emb.cache.nodes.get(name)
            if node is None:
                continue
            doc = node_manifest(node)
            if self._stored.get(name) == doc:
                continue
            stored = emb.store.get("Node", name)
            if stored is None or stored.manifest != doc:
                writes.append(Stored("Node", name, doc, {}))
            self._stored[name] = doc
        if writes:
            emb.store.put(writes)

    def forget(self, name: str) -> None:
        self.conditions.pop(name, None)
        self._stored.pop(name, None)

    # -- pods --------------------------------------------------------------------------------------
    def _bound(self) -> dict[str, list[Pod]]:
        out: dict[str, list[Pod]] = {}
        for pod in self.embedded.cache.pods.values():
            if pod.node_name and not pod.evicted:
                out.setdefault(pod.node_name, []).append(pod)
        return out

    def _pod_on(self, pod: Pod, node: str, cond: NodeCondition, now: float, changes: list, gone: list) -> None:
        emb = self.embedded
        if cond.ready:
            if pod.phase == "Unknown":  # its node is back: its agent's reports say the rest
                pod.phase, pod.reason = "Running", None
                changes.append(("Pod", pod.key, {"phase": "Running", "reason": None}))
                emb.cache.generation += 1
            return
        if not cond.tainted or pod.phase in FINISHED:
            return
        stored = emb.store.get("Pod", pod.key)
        status = stored.status if stored else {}
        if status.get("deleting"):
            gone.append((pod, f"deleted while its node {node} is {cond.status} ({cond.reason}): nothing there can "
                              "confirm it stopped (its agent stops it if it comes back)"))
            return
        if status.get("evicting"):
            changes.append(("Pod", pod.key, {"evicting": None, "evicted": True, "phase": "Failed"}))
            emb.evicted(pod, status.get("reason") or "Evicted")
            return
        if pod.phase != "Unknown":
            word = "NodeNotReady" if cond.status == NOT_READY else "NodeLost"
            pod.phase, pod.reason = "Unknown", f"{word}: node {node} is {cond.status}: {cond.message}"
            changes.append(("Pod", pod.key, {"phase": "Unknown", "reason": pod.reason}))
            emb.cache.generation += 1
            emb.events.record(Ref("Pod", pod.namespace, pod.name, pod.uid), WARNING, "NodeNotReady",
                              f"Node {node} is not ready", source=NODE_CONTROLLER)
        due = eviction_time(taints_for(cond), default_tolerations(pod.tolerations, self.config), cond.since)
        if due is not None and now >= due:
            gone.append((pod, f"evicted from node {node}, {cond.status} since {now - cond.since:.0f} s ago "
                              f"({cond.reason}), past its toleration of the {taints_for(cond)[0].key} taint"))
