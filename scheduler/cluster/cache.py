"""The scheduler's cluster cache: the one place cluster objects live.

A source (the simulator's manifests now; Kubernetes informers or the
embedded store later) writes objects in; each scheduling cycle takes a
snapshot out.  The binder and evictor write decisions back through the
methods at the bottom, which is how the simulator sees its own binds.

Linking follows Volcano: a pod joins the PodGroup named by its
``scheduling.k8s.io/group-name`` annotation; a pod without one forms a group
of one (kept here as an *implicit* group so its phase survives cycles); the
queue is the PodGroup's, else the pod's ``scheduling.volcano.sh/queue-name``
annotation, else ``default``.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from proto.model import Eviction, NodeReport, QosLevel
from proto.vocab.placement import (
    DEVICES_ANNOTATION,
    EXPECTED_DURATION_ANNOTATION,
    GPU_SHARE_RESOURCES,
    NUMA_NODES_ANNOTATION,
    NUMA_POLICY_ANNOTATION,
    PREEMPTABLE_ANNOTATION,
    VGPU_RESOURCES,
    WHOLE_DEVICE_RESOURCES,
    DeviceGrant,
    DeviceRequest,
    decode_devices,
    decode_zones,
    device_requests,
    expected_duration,
    numa_policy,
    preemptable,
)
from proto.vocab.qos import BATCH_RESOURCES, qos_level
from scheduler.api.loader import BUILTIN_PRIORITY_CLASSES, Workload
from scheduler.api.objects import (
    DEFAULT_QUEUE,
    QUEUE_NAME_ANNOTATION,
    Condition,
    Namespace,
    Node,
    Pod,
    PodGroup,
    PriorityClass,
    Queue,
)
from scheduler.cluster.inventory import InventoryMemo
from scheduler.cluster.nodeview import NodeTelemetry, node_allocatable

if TYPE_CHECKING:
    from scheduler.history import LoadHistory

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class JobRef:
    """How a pod is grouped: the job's id, its PodGroup and its queue."""

    uid: str
    group: PodGroup | None
    queue: str


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What scheduling derives from a pod and its links, computed once per change, not per cycle."""

    ref: JobRef
    priority: int
    signature: tuple  # everything the node-independent predicates read
    request_key: tuple  # the pod's requests as a hashable, sorted tuple
    best_effort: bool
    offline: bool = False  # QoS level BE: fits against batch allocatable, kept off evicting nodes
    numa_policy: str = ""  # volcano.sh/numa-topology-policy ("" unset)
    devices: tuple[DeviceRequest, ...] = ()  # whole or shared devices it asks for
    zones: tuple[int, ...] | None = None  # NUMA zones it was placed in (scoria.io/numa-nodes), None: not pinned
    grants: tuple[DeviceGrant, ...] = ()  # devices it was given (scoria.io/devices)
    duration: float | None = None  # seconds it says it runs (scoria.io/expected-duration)
    preemptable: bool | None = None  # volcano.sh/preemptable


class ChangeJournal:
    """What changed in a cache since its reader last looked (:meth:`ClusterCache.journal`).

    ``pods``: pods added, replaced, removed or given new facts (a bind's
    annotations), in the order the cache's ``pods`` dict now holds the new ones
    (a pod inserted again moves to the end, as in the dict); ``removed``: those
    that left the dict at some point; ``groups``: PodGroup keys upserted or
    removed; ``namespaces``: a Namespace was added, removed or relabelled, or
    whether namespaces are known changed (:meth:`ClusterCache.set_namespaces_known`);
    ``everything``: read the whole cache again (at first, and after a
    PriorityClass changed every pod's priority).  A pod's phase, node,
    nomination and termination are not journalled: readers read them live.
    Written under the cache's lock; the reader clears it under the same lock.
    """

    __slots__ = ("pods", "removed", "groups", "namespaces", "everything", "__weakref__")

    def __init__(self) -> None:
        self.pods: dict[str, None] = {}
        self.removed: set[str] = set()
        self.groups: set[str] = set()
        self.namespaces = False
        self.everything = True

    def clear(self) -> None:
        self.pods.clear()
        self.removed.clear()
        self.groups.clear()
        self.namespaces = False
        self.everything = False


class ClusterCache:
    """Nodes, pods, groups, queues, priority classes and namespaces, guarded by one lock."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.nodes: dict[str, Node] = {}
        self.pods: dict[str, Pod] = {}
        self.podgroups: dict[str, PodGroup] = {}
        self.implicit_groups: dict[str, PodGroup] = {}
        self.queues: dict[str, Queue] = {}
        self.priority_classes: dict[str, PriorityClass] = dict(BUILTIN_PRIORITY_CLASSES)
        # Namespace objects by name: their labels are what pod affinity terms' namespaceSelectors match
        self.namespaces: dict[str, Namespace] = {}
        # Whether ``namespaces`` holds every Namespace of the cluster.  The simulator and embedded mode know them
        # from the start; Kubernetes mode once its informer listed them (it does not wait for that to schedule:
        # only pods whose affinity terms select namespaces by label need them, see set_namespaces_known).
        self.namespaces_known = True
        self.generation = 0
        self.node_generation = 0  # changes when a Node is added or replaced
        # set when new work comes in — a pod that waits for a node, a PodGroup that waits for admission, neither
        # waiting before: the scheduling loop (Scheduler.run) wakes for it rather than waiting out its interval
        self.arrived = threading.Event()
        # set while the scheduling loop is about to run, or runs, a cycle: the embedded controllers' look at their
        # own writes waits for it (one core between them: the cycle binding the pods they made goes first)
        self.scheduling = threading.Event()
        self._facts: dict[str, PodFacts] = {}
        # pods with inter-pod affinity terms: when none, a session skips that machinery without looking at pods
        self.affinity_pods: set[str] = set()
        # Latest accepted report per node. Entries are replaced whole (atomic under the GIL), so the
        # report stream updates it without the lock; readers copy the dict first.
        self.telemetry: dict[str, NodeTelemetry] = {}
        # Nodes that exist because they reported (no API object), with what their allocatable was computed from.
        self.registered: dict[str, tuple] = {}
        # Whether a node that registers by reporting takes pods at once (embedded mode: not until its node
        # lifecycle has found it Ready — an agent that runs no pods must never take one)
        self.register_ready = True
        self.stale_intervals = 3  # a node's telemetry is stale after this many of its report intervals
        # Evictions agents reported (each once: a report carries those since the last acknowledged one).
        self.node_evictions: deque[tuple[str, Eviction]] = deque(maxlen=10_000)
        # What each queue deserved at the last cycle's close (None: no plugin shares the cluster between queues).
        self.queue_deserved: dict[str, dict[str, int] | None] = {}
        # Online load learned by time of week from the reports (scheduler.history.LoadHistory), or None.
        self.history: LoadHistory | None = None
        # Pods this scheduler asked the API server to evict, and when (Kubernetes mode): counted as leaving
        # until they are gone, or until the eviction is refused.
        self.evicting: dict[str, float] = {}
        self.inventories = InventoryMemo()  # nodes' hardware as placement reads it, rebuilt when a report's changes
        self._journals: weakref.WeakSet[ChangeJournal] = weakref.WeakSet()  # its readers' (incremental snapshots)
        self.ensure_default_queue()

    # -- sources write ------------------------------------------------------------------
    @classmethod
    def from_workload(cls, work: Workload) -> ClusterCache:
        cache = cls()
        for group in (work.namespaces, work.priority_classes, work.queues, work.nodes, work.podgroups, work.pods):
            for obj in group:
                cache.upsert(obj)
        return cache

    def upsert(self, obj: Node | Pod | PodGroup | Queue | PriorityClass | Namespace) -> None:
        with self.lock:
            if isinstance(obj, Node):
                self.nodes[obj.name] = obj
                self.node_generation += 1
            elif isinstance(obj, Pod):
                was = self.pods.get(obj.uid)
                inserted = was is None
                if not obj.node_name and obj.active and (was is None or was.node_name or not was.active):
                    self.arrived.set()
                self.pods[obj.uid] = obj
                self._facts.pop(obj.uid, None)
                self._note_pod(obj.uid, inserted)
                if obj.pod_affinity is not None:
                    self.affinity_pods.add(obj.uid)
                else:
                    self.affinity_pods.discard(obj.uid)
                if not obj.group_name:
                    self.implicit_groups.setdefault(obj.uid, PodGroup(
                        namespace=obj.namespace, name=obj.name, implicit=True,
                        queue=obj.annotations.get(QUEUE_NAME_ANNOTATION) or DEFAULT_QUEUE,
                        min_member=1, created=obj.created,
                        phase="Running" if obj.node_name else "Pending"))
            elif isinstance(obj, PodGroup):
                before = self.podgroups.get(obj.key)
                if obj.phase == "Pending" and (before is None or before.phase != "Pending"):
                    self.arrived.set()
                self.podgroups[obj.key] = obj  # facts of its pods notice the new object (see facts())
                for journal in self._journals:
                    journal.groups.add(obj.key)
            elif isinstance(obj, Queue):
                self.queues[obj.name] = obj
            elif isinstance(obj, PriorityClass):
                self.priority_classes[obj.name] = obj
                self._facts.clear()
                for journal in self._journals:
                    journal.everything = True
            elif isinstance(obj, Namespace):
                old = self.namespaces.get(obj.name)
                self.namespaces[obj.name] = obj
                if old is None or old.labels != obj.labels:  # a resync of the same labels changes nothing
                    for journal in self._journals:
                        journal.namespaces = True
            else:
                raise TypeError(f"cannot cache {type(obj).__name__}")
            self.generation += 1

    def set_namespaces_known(self, known: bool) -> None:
        """Say whether ``namespaces`` holds every Namespace (Kubernetes mode: not before its first list).

        While they are not known, a pod whose own affinity terms select namespaces by label
        (``namespaceSelector``) waits, and placed pods' required anti-affinity terms that do are taken to
        match every namespace (:mod:`scheduler.plugins.shared.podaffinity`).  Journalled with the labels.
        """
        with self.lock:
            if self.namespaces_known == known:
                return
            self.namespaces_known = known
            for journal in self._journals:
                journal.namespaces = True
            self.generation += 1

    def accept_report(self, view: Any, received: float, *, register: bool,
                      capacity_key: object, decode: Callable[[], NodeReport] | None = None) -> bool:
        """Keep a validated report; register its node if allowed. False if the node is unknown.

        ``view`` is a NodeReport, or a received message with the same field names
        and ``decode`` to build the NodeReport when the whole of it is needed.
        Runs for every report of every node (thousands a second), so a
        registered node's allocatable is recomputed only when its capacity
        (``capacity_key``), device health or offered batch resources changed.
        """
        name = view.identity.node_name
        telemetry = NodeTelemetry(view, received, decode, capacity_key)
        if name not in self.nodes or name in self.registered:
            if not register:
                return False
            # its allocatable follows its capacity, devices and offered batch resources (which its agent
            # changes only when they move by more than its profile's minChangePercent)
            key = (telemetry.inventory_key, telemetry.batch_cpu_millis, telemetry.batch_memory_bytes)
            if self.registered.get(name) != key or name not in self.nodes:
                allocatable = node_allocatable(telemetry.report)
                node = self.nodes.get(name)
                if node is None or node.allocatable != allocatable:
                    # what node lifecycle decided (taints, readiness) stays until it decides again
                    self.upsert(Node(name=name, allocatable=allocatable, labels={"kubernetes.io/hostname": name},
                                     taints=node.taints if node else (),
                                     ready=node.ready if node else self.register_ready))
                self.registered[name] = key
        self.telemetry[name] = telemetry
        self.inventories.note(name, telemetry)
        if self.history is not None:  # samples online load once a minute per node; a dict lookup otherwise
            self.history.observe_report(telemetry)
        if len(view.colocation.evictions):
            self.node_evictions.extend((name, e) for e in telemetry.report.colocation.evictions)
        return True

    def remove_pod(self, uid: str) -> None:
        with self.lock:
            if self.pods.pop(uid, None) is not None:
                for journal in self._journals:
                    journal.removed.add(uid)
                    journal.pods.setdefault(uid)
            self.affinity_pods.discard(uid)
            self.implicit_groups.pop(uid, None)
            self._facts.pop(uid, None)
            self.generation += 1

    def remove(self, kind: str, key: str) -> None:
        """Forget a Node, PodGroup (namespace/name), Queue, PriorityClass or Namespace that was deleted."""
        with self.lock:
            tables: dict[str, dict[str, Node] | dict[str, PodGroup] | dict[str, Queue] | dict[str, PriorityClass]
                         | dict[str, Namespace]] = {
                "Node": self.nodes, "PodGroup": self.podgroups, "Queue": self.queues,
                "PriorityClass": self.priority_classes, "Namespace": self.namespaces}
            table = tables[kind]
            if table.pop(key, None) is not None:
                if kind == "Node":
                    self.node_generation += 1
                    self.telemetry.pop(key, None)
                if kind == "PriorityClass":
                    self._facts.clear()
                for journal in self._journals:
                    if kind == "PriorityClass":
                        journal.everything = True
                    elif kind == "PodGroup":
                        journal.groups.add(key)
                    elif kind == "Namespace":
                        journal.namespaces = True
                self.generation += 1

    def has_pending_work(self) -> bool:
        """Is any pod waiting for a node, or any PodGroup waiting for admission?"""
        with self.lock:
            return (any(not p.node_name and p.active for p in self.pods.values())
                    or any(g.phase == "Pending" for g in self.podgroups.values()))

    def ensure_default_queue(self) -> None:
        """Volcano always has a ``default`` queue; so do we."""
        if DEFAULT_QUEUE not in self.queues:
            self.queues[DEFAULT_QUEUE] = Queue(name=DEFAULT_QUEUE, implicit=True)

    def journal(self) -> ChangeJournal:
        """A new journal of this cache's changes, kept for as long as its reader keeps it (it starts
        with ``everything``: the reader reads the whole cache first)."""
        with self.lock:
            journal = ChangeJournal()
            self._journals.add(journal)
            return journal

    def _note_pod(self, uid: str, inserted: bool = False) -> None:
        for journal in self._journals:
            if inserted:  # a new key goes to the end of the pods dict: so it does in the journal
                journal.pods.pop(uid, None)
                journal.pods[uid] = None
            else:
                journal.pods.setdefault(uid)

    # -- linking ------------------------------------------------------------------------
    def job_of(self, pod: Pod) -> JobRef:
        name = pod.group_name
        if name:
            key = f"{pod.namespace}/{name}"
            group = self.podgroups.get(key)
            return JobRef(key, group, group.queue if group else DEFAULT_QUEUE)
        group = self.implicit_groups[pod.uid]
        return JobRef(f"{pod.namespace}/pod:{pod.name}", group, group.queue)

    def facts(self, pod: Pod) -> PodFacts:
        facts = self._facts.get(pod.uid)
        if facts is not None and pod.group_name:
            current = self.podgroups.get(f"{pod.namespace}/{pod.group_name}")
            if facts.ref.group is not current:  # the group was created or replaced since
                facts = None
        if facts is None:
            facts = self._facts[pod.uid] = PodFacts(
                ref=self.job_of(pod), priority=self.pod_priority(pod),
                signature=(tuple(sorted(pod.node_selector.items())), pod.affinity_terms, pod.tolerations),
                request_key=tuple(sorted((k, v) for k, v in pod.requests.items() if v)),
                best_effort=pod.best_effort, **_placement_facts(pod))
        return facts

    def pod_priority(self, pod: Pod) -> int:
        if pod.priority is not None:
            return pod.priority
        return self.class_priority(pod.priority_class_name)

    def class_priority(self, name: str) -> int:
        if name and name in self.priority_classes:
            return self.priority_classes[name].value
        for pc in self.priority_classes.values():
            if pc.global_default:
                return pc.value
        return 0

    # -- the binder, evictor and status writer -------------------------------------------
    def bind(self, uid: str, node: str, annotations: dict[str, str] | None = None, at: float | None = None) -> bool:
        """Place a pod, writing the placement decisions (NUMA zones, devices) onto it; ``at``: Unix seconds.

        False when the pod is gone (deleted while the cycle ran): nothing to bind."""
        with self.lock:
            pod = self.pods.get(uid)
            if pod is None:
                return False
            pod.node_name, pod.phase, pod.reason, pod.nominated_node = node, "Running", None, ""
            # the decisions of this bind, and none left over from a manifest or an earlier life of the pod
            stale = [k for k in _DECISIONS if k in pod.annotations and k not in (annotations or {})]
            if annotations or stale:
                for key in stale:
                    del pod.annotations[key]
                pod.annotations.update(annotations or {})
                self._facts.pop(uid, None)
                self._note_pod(uid)
            pod.bound_at = at
            self.generation += 1
            return True

    def unbind(self, uid: str) -> None:
        """An assumed bind the API server refused: the pod is pending again."""
        with self.lock:
            pod = self.pods.get(uid)
            if pod is not None and pod.node_name:
                pod.node_name, pod.phase, pod.bound_at = "", "Pending", None
                self.generation += 1

    def evict(self, uid: str, reason: str) -> None:
        """The simulator's eviction: the pod terminates at once and frees its node."""
        with self.lock:
            pod = self.pods.get(uid)
            if pod is None or pod.evicted:
                return
            pod.evicted, pod.phase, pod.reason = True, "Failed", reason
            pod.node_name = ""
            self.generation += 1

    def nominate(self, uid: str, node: str | None) -> None:
        with self.lock:
            pod = self.pods.get(uid)
            if pod is not None:
                pod.nominated_node = node or ""

    def set_pod_reason(self, uid: str, reason: str | None) -> None:
        with self.lock:
            pod = self.pods.get(uid)
            if pod is not None and pod.reason != reason:
                pod.reason = reason

    def set_group_status(self, group: PodGroup, phase: str, conditions: list[Condition]) -> bool:
        """Write a group's phase and conditions; return whether the phase changed."""
        with self.lock:
            changed = group.phase != phase
            group.phase = phase
            group.conditions = conditions
            if changed:
                self.generation += 1
            return changed

    def set_queue_allocated(self, name: str, allocated: dict[str, int]) -> None:
        with self.lock:
            queue = self.queues.get(name)
            if queue is not None:
                queue.allocated = allocated


def _placement_facts(pod: Pod) -> dict[str, Any]:
    """What placement reads from a pod's requests and annotations.

    Manifests are checked when they enter (a bad request never gets here from
    YAML or the API); a value that is unreadable anyway — a hand-edited
    decision on a running pod — is logged and read as unset, so one bad pod
    cannot stop scheduling.
    """
    a, requests = pod.annotations, pod.requests
    batch = any(requests.get(r) for r in BATCH_RESOURCES)
    out: dict[str, Any] = {"offline": qos_level(a, pod.qos_class, batch) == QosLevel.BE}
    if not _PLACEMENT_KEYS.isdisjoint(a):
        for key, read, field in _ANNOTATION_READERS:
            if key in a:
                try:
                    out[field] = read(a)
                except ValueError as exc:
                    log.warning("pod %s: ignoring %s", pod.key, exc)
    if not _DEVICE_RESOURCES.isdisjoint(requests):
        try:
            out["devices"] = device_requests(requests)
        except ValueError as exc:
            log.warning("pod %s: ignoring its device requests: %s", pod.key, exc)
    return out


# annotation -> (reader of the annotations, PodFacts field); decisions are read from the value, requests
# from the annotations
_ANNOTATION_READERS: tuple[tuple[str, Callable[[Mapping[str, str]], object], str], ...] = (
    (NUMA_POLICY_ANNOTATION, numa_policy, "numa_policy"), (EXPECTED_DURATION_ANNOTATION, expected_duration, "duration"),
    (PREEMPTABLE_ANNOTATION, preemptable, "preemptable"),
    (NUMA_NODES_ANNOTATION, lambda a: decode_zones(a[NUMA_NODES_ANNOTATION]), "zones"),
    (DEVICES_ANNOTATION, lambda a: decode_devices(a[DEVICES_ANNOTATION]), "grants"))
_DECISIONS = frozenset({NUMA_NODES_ANNOTATION, DEVICES_ANNOTATION})
_PLACEMENT_KEYS = frozenset(key for key, _, _ in _ANNOTATION_READERS)
_DEVICE_RESOURCES = frozenset(WHOLE_DEVICE_RESOURCES + VGPU_RESOURCES + GPU_SHARE_RESOURCES)
