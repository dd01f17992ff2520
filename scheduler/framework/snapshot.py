"""A cycle's private copy of the cluster: nodes as arrays, jobs, tasks and queues.

The snapshot is taken under the cache lock and then owned by one session, so
actions mutate it freely; nothing here is written back except through the
binder, the evictor and the status writer when the session closes.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import IntEnum
from typing import TYPE_CHECKING

import numpy as np

from scheduler.api.objects import Node, Pod, PodGroup, Queue
from scheduler.cluster.cache import PodFacts
from scheduler.cluster.inventory import InventoryMemo
from scheduler.cluster.nodeview import NodeTelemetry
from scheduler.framework.nodeindex import NodeIndex
from scheduler.framework.resources import ResourceIndex

if TYPE_CHECKING:
    from scheduler.history import LoadHistory


class TaskStatus(IntEnum):
    PENDING = 0
    ALLOCATED = 1   # placed in this session, to be bound
    PIPELINED = 2   # placed on resources that are being released
    RUNNING = 3     # bound before this session
    RELEASING = 4   # being evicted
    SUCCEEDED = 5
    FAILED = 6


STATUS_COUNT = len(TaskStatus)  # (len() of an enum is a Python-level call: counted once)
# Statuses that hold node resources.
ON_NODE = (TaskStatus.ALLOCATED, TaskStatus.RUNNING, TaskStatus.RELEASING)
# Statuses that count towards the queue's and the job's allocation.
ALLOCATED_STATUSES = (TaskStatus.ALLOCATED, TaskStatus.RUNNING)


class TaskInfo:
    """One pod as this cycle sees it."""

    __slots__ = ("uid", "pod", "job", "req", "cols", "status", "node", "priority", "best_effort",
                 "sig", "fit_error", "nominated", "facts", "placement", "role")

    def __init__(self, pod: Pod, job: JobInfo, req: np.ndarray, cols: np.ndarray, priority: int,
                 best_effort: bool, sig: tuple, facts: PodFacts):
        self.uid = pod.uid
        self.pod = pod
        self.job = job
        self.req = req  # shared between tasks with equal requests: never modify in place
        self.cols = cols  # the resources this task needs (always includes pods)
        self.status = TaskStatus.PENDING
        self.node = -1
        self.priority = priority
        self.best_effort = best_effort
        self.sig = sig
        self.fit_error: str | None = None
        self.nominated = -1  # node reserved for it by last cycle's preemption or reclaim
        self.facts = facts  # the cache's PodFacts: what scheduling derives from the pod, computed once per change
        self.placement: dict[str, str] | None = None  # annotations recording its zones/devices, written at bind
        self.role = ""  # its task role (volcano.sh/task-spec): read by JobInfo.add_task only for jobs with minTaskMember

    @property
    def name(self) -> str:
        return self.pod.key

    def __repr__(self) -> str:
        return f"<Task {self.pod.key} {self.status.name} node={self.node}>"


class JobInfo:
    """A PodGroup (or a lone pod) and its tasks."""

    __slots__ = ("uid", "namespace", "name", "group", "queue", "priority", "min_member", "min_resources",
                 "created", "tasks", "counts", "allocated", "reserved", "phase", "enqueue_reason", "fit_error", "fit_count",
                 "conditions", "task_min", "role_counts")

    def __init__(self, uid: str, group: PodGroup | None, queue: str, index: ResourceIndex):
        self.uid = uid
        self.group = group
        self.namespace, _, self.name = uid.partition("/")
        self.queue = queue
        self.priority = 0
        self.min_member = group.min_member if group else 1
        self.min_resources = index.vector(group.min_resources) if group and group.min_resources else None
        self.created: datetime | None = group.created if group else None
        self.tasks: dict[str, TaskInfo] = {}
        self.counts = [0] * STATUS_COUNT
        self.allocated = index.zeros()
        self.reserved = index.zeros()  # requests of pending tasks nominated to a node (see NodeTable.reserved)
        self.phase = group.phase if group else "Pending"
        self.enqueue_reason: str | None = None
        self.fit_error: str | None = None  # why the job as a whole did not fit (set at close)
        self.fit_count: int | None = None  # members that fitted in the last failed attempt
        self.conditions: list = []  # PodGroup conditions concluded this session
        # spec.minTaskMember, honoured as Volcano does only while minMember covers the roles' sum (else
        # only minMember counts); role_counts then counts tasks by role and status, kept in step below.
        task_min = {r: n for r, n in group.min_task_member.items() if n > 0} if group and group.min_task_member else {}
        self.task_min = task_min if task_min and self.min_member >= sum(task_min.values()) else {}
        self.role_counts: dict[str, list[int]] | None = {} if self.task_min else None

    def fresh(self, vectors: bool = True) -> JobInfo:
        """A new job as ``__init__`` makes it from the same group, with this one's priority and no tasks;
        its phase read from the group now.  A snapshot keeper keeps one such template per job and hands
        each cycle a fresh copy (the template itself is never scheduled).  ``vectors=False`` leaves
        ``allocated`` and ``reserved`` to the caller (the keeper sets them, summed, for all jobs at once)."""
        job = JobInfo.__new__(JobInfo)
        job.uid, job.group, job.namespace, job.name, job.queue = self.uid, self.group, self.namespace, self.name, self.queue
        job.priority, job.min_member, job.min_resources = self.priority, self.min_member, self.min_resources
        job.created = self.created
        job.tasks = {}
        job.counts = [0] * STATUS_COUNT
        if vectors:
            job.allocated = np.zeros(len(self.allocated))
            job.reserved = np.zeros(len(self.reserved))
        group = self.group
        job.phase = group.phase if group else "Pending"
        job.enqueue_reason = job.fit_error = job.fit_count = None
        job.conditions = []
        job.task_min = self.task_min  # never changed after __init__
        job.role_counts = {} if self.task_min else None
        return job

    # -- counting -----------------------------------------------------------------------
    def add_task(self, task: TaskInfo) -> None:
        self.tasks[task.uid] = task
        self.counts[task.status] += 1
        if task.status in ALLOCATED_STATUSES:
            self.allocated += task.req
        if self.role_counts is not None:
            task.role = task.pod.task_role
            self.role_counts.setdefault(task.role, [0] * STATUS_COUNT)[task.status] += 1

    def set_status(self, task: TaskInfo, status: TaskStatus) -> None:
        old = task.status
        if old in ALLOCATED_STATUSES:
            self.allocated -= task.req
        self.counts[old] -= 1
        task.status = status
        self.counts[status] += 1
        if status in ALLOCATED_STATUSES:
            self.allocated += task.req
        if self.role_counts is not None:
            by_status = self.role_counts[task.role]
            by_status[old] -= 1
            by_status[status] += 1

    def role_shortfall(self, statuses: tuple[TaskStatus, ...]) -> tuple[str, int, int] | None:
        """The first task role (by name) with fewer tasks in ``statuses`` than its minTaskMember, as
        ``(role, have, need)``; None when every role has enough, or the job has no per-role minimums."""
        if self.role_counts is None:
            return None
        for role in sorted(self.task_min):
            by_status = self.role_counts.get(role)
            have = sum(by_status[s] for s in statuses) if by_status else 0
            if have < self.task_min[role]:
                return role, have, self.task_min[role]
        return None

    @property
    def ready_num(self) -> int:
        c = self.counts
        return c[TaskStatus.ALLOCATED] + c[TaskStatus.RUNNING] + c[TaskStatus.SUCCEEDED]

    @property
    def waiting_num(self) -> int:
        return self.counts[TaskStatus.PIPELINED]

    @property
    def valid_num(self) -> int:
        c = self.counts
        return len(self.tasks) - c[TaskStatus.FAILED] - c[TaskStatus.RELEASING]

    @property
    def pending_num(self) -> int:
        return self.counts[TaskStatus.PENDING]

    def pending_tasks(self) -> list[TaskInfo]:
        """Pending tasks the actions may place: not those held by ``spec.schedulingGates``."""
        return [t for t in self.tasks.values() if t.status == TaskStatus.PENDING and not t.pod.scheduling_gates]

    def tasks_in(self, *statuses: TaskStatus) -> list[TaskInfo]:
        return [t for t in self.tasks.values() if t.status in statuses]

    @property
    def key(self) -> str:
        return self.uid

    def __repr__(self) -> str:
        return f"<Job {self.uid} queue={self.queue} ready={self.ready_num}/{self.min_member}>"


class QueueInfo:
    """A queue with its limits as vectors (``inf`` where a limit is not set)."""

    __slots__ = ("name", "queue", "weight", "priority", "capability", "guarantee", "deserved", "reclaimable",
                 "parent", "children", "state")

    def __init__(self, queue: Queue, index: ResourceIndex):
        self.name = queue.name
        self.queue = queue
        self.weight = queue.weight
        self.priority = queue.priority
        self.capability = limit_vector(index, queue.capability)
        self.guarantee = index.vector(queue.guarantee).copy()
        self.deserved = limit_vector(index, queue.deserved) if queue.deserved else None
        self.reclaimable = queue.reclaimable
        self.parent = queue.parent
        self.children: list[str] = []
        self.state = queue.state


def limit_vector(index: ResourceIndex, amounts: dict[str, int]) -> np.ndarray:
    vec = np.full(index.size, np.inf)
    for name, amount in amounts.items():
        if name in index.column:
            vec[index.column[name]] = amount
    return vec


class NodeTable:
    """Nodes as arrays of shape (resources, nodes), updated as tasks move."""

    def __init__(self, nodes: list[Node], index: ResourceIndex):
        self.nodes = nodes
        self.names = [n.name for n in nodes]
        self.pos = {name: i for i, name in enumerate(self.names)}
        self.count = n = len(nodes)
        self.alloc = np.zeros((index.size, n))
        for i, node in enumerate(nodes):
            for name, amount in node.allocatable.items():
                self.alloc[index.column[name], i] = amount
        with np.errstate(divide="ignore"):
            self.inv_alloc = np.where(self.alloc > 0, 1.0 / np.where(self.alloc > 0, self.alloc, 1.0), 0.0)
        self._empty()

    def fresh(self) -> NodeTable:
        """A table of the same nodes with nothing placed, its arrays its own: a snapshot keeper keeps one
        table per set of nodes and hands each cycle a fresh one (this one stays as it is)."""
        table = NodeTable.__new__(NodeTable)
        table.nodes, table.names, table.pos, table.count = self.nodes, self.names, self.pos, self.count
        table.alloc, table.inv_alloc = self.alloc.copy(), self.inv_alloc.copy()
        table._empty()
        return table

    def _empty(self) -> None:
        """Everything but the nodes and what they offer: nothing placed, reserved or released yet."""
        self.used = np.zeros_like(self.alloc)
        self.idle = self.alloc.copy()
        self.releasing = np.zeros_like(self.alloc)
        self.pipelined = np.zeros_like(self.alloc)
        self.releasing_count = 0  # tasks being released: when 0, future idle == idle - pipelined
        self.pipelined_count = 0
        # Held for pending tasks nominated to a node (room made for them by evictions last cycle).
        self.reserved = np.zeros_like(self.alloc)
        self.reserved_count = 0
        # Each node's tasks (uid -> task), made when first read (see tasks): most sessions never read them.
        # Until then: the tasks a snapshot placed, in order, and the moves (place +1, unplace -1) since.
        self._tasks: list[dict[str, TaskInfo]] | None = None
        self._seated: tuple[list[int], list[TaskInfo]] = ([], [])
        self._moves: list[tuple[int, int, TaskInfo]] = []
        # Tasks on nodes whose NUMA zones or devices count (recorded decisions, device requests), and tasks
        # this scheduler bound recently (their usage may not be in the node's report yet), as (node, task).
        self.topology_tasks: list[TaskInfo] = []
        self.recent_binds: list[tuple[int, TaskInfo]] = []
        # Every change appends the node it touched; ``version`` is the log's length.  Score caches
        # use it to recompute only the nodes that changed since they were filled.
        self.changes: list[int] = []
        self._changed_memo: tuple = (-1, -1, None)

    @property
    def tasks(self) -> list[dict[str, TaskInfo]]:
        """Per node, the tasks on it (uid -> task) in the order they came: the snapshot's, then as placed."""
        tasks = self._tasks
        if tasks is None:
            tasks = self._tasks = [{} for _ in range(self.count)]
            for node, task in zip(*self._seated, strict=True):
                tasks[node][task.uid] = task
            for sign, node, task in self._moves:
                if sign > 0:
                    tasks[node][task.uid] = task
                else:
                    tasks[node].pop(task.uid, None)
            self._seated, self._moves = ([], []), []
        return tasks

    def seat(self, nodes: list[int], tasks: list[TaskInfo]) -> None:
        """The tasks a snapshot finds on ``nodes``, in order (they are already counted in ``used``)."""
        if self._tasks is None and not self._moves:
            self._seated[0].extend(nodes)
            self._seated[1].extend(tasks)
        else:
            for node, task in zip(nodes, tasks, strict=True):
                self.tasks[node][task.uid] = task

    @property
    def version(self) -> int:
        return len(self.changes)

    def changed_since(self, version: int) -> np.ndarray:
        """Nodes changed since ``version``; score caches of several plugins ask with the same one in a row."""
        memo = self._changed_memo
        if memo[0] == version and memo[1] == len(self.changes):
            return memo[2]
        recent = self.changes[version:]
        if len(recent) <= 16:  # the usual case: a placement or two
            out = np.array(sorted(set(recent)), dtype=np.intp)
        else:
            out = np.unique(np.fromiter(recent, dtype=np.intp))
        self._changed_memo = (version, len(self.changes), out)
        return out

    def place(self, task: TaskInfo, node: int) -> None:
        self.used[:, node] += task.req
        self.idle[:, node] -= task.req
        if self._tasks is None:
            self._moves.append((1, node, task))
        else:
            self._tasks[node][task.uid] = task
        self.changes.append(node)

    def unplace(self, task: TaskInfo, node: int) -> None:
        self.used[:, node] -= task.req
        self.idle[:, node] += task.req
        if self._tasks is None:
            self._moves.append((-1, node, task))
        else:
            self._tasks[node].pop(task.uid, None)
        self.changes.append(node)

    def add_pipelined(self, task: TaskInfo, node: int, sign: int) -> None:
        self.pipelined[:, node] += sign * task.req
        self.pipelined_count += sign
        self.changes.append(node)

    def add_releasing(self, task: TaskInfo, node: int, sign: int) -> None:
        self.releasing[:, node] += sign * task.req
        self.releasing_count += sign
        self.changes.append(node)

    def future_idle(self, task: TaskInfo | None = None) -> np.ndarray:
        """Free once what is being released is gone: ``free(task)`` plus releasing resources (read-only: it may
        be ``free(task)`` itself, when nothing is being released)."""
        if not self.releasing_count:  # (releasing then holds zeros: whole quantities add and subtract exactly)
            return self.free(task)
        return self.free(task) + self.releasing

    def future_idle_at(self, node: int, task: TaskInfo | None = None) -> np.ndarray:
        """``future_idle(task)`` for one node (a column), without building the whole array."""
        col = self.idle[:, node] + self.releasing[:, node] - self.pipelined[:, node] - self.reserved[:, node]
        if task is not None and task.nominated == node:
            col = col + task.req
        return col

    def free(self, task: TaskInfo | None = None) -> np.ndarray:
        """What a new allocation may use: idle minus what pipelined and nominated tasks were promised.

        A nominated ``task`` may of course use its own reservation.
        """
        if not self.pipelined_count and not self.reserved_count:
            return self.idle
        free = self.idle - self.pipelined
        if self.reserved_count:
            free -= self.reserved
        if task is not None and task.nominated >= 0:
            free[:, task.nominated] += task.req
        return free

    def reserve(self, task: TaskInfo, sign: int) -> None:
        """Hold (+1) or let go (-1) the room on ``task``'s nominated node; nothing if it has none."""
        if task.nominated < 0:
            return
        self.reserved[:, task.nominated] += sign * task.req
        self.reserved_count += sign
        self.changes.append(task.nominated)

    def total(self) -> np.ndarray:
        """What all nodes offer; a node whose offer is unknown (NaN, see set_capacity) adds nothing."""
        return np.nansum(self.alloc, axis=1)

    def set_capacity(self, col: int, values: np.ndarray | float) -> None:
        """Replace what nodes offer of one resource (a plugin that knows better than node allocatable:
        the agents' live batch allocatable, per-device accounting that makes a sum meaningless).

        NaN means unknown: the predicates plugin neither admits nor refuses on it
        (it refuses only a known shortage), the plugin that set it decides and
        says why, and totals leave it out.
        """
        self.alloc[col] = values
        np.subtract(self.alloc[col], self.used[col], out=self.idle[col])
        with np.errstate(divide="ignore"):
            alloc = self.alloc[col]
            self.inv_alloc[col] = np.where((alloc > 0) & np.isfinite(alloc), 1.0 / np.where(alloc > 0, alloc, 1.0), 0.0)

    def load_telemetry(self, telemetry: dict[str, NodeTelemetry], now: float | None, stale_intervals: int) -> None:
        """Reported usage and batch allocatable per node; NaN where unknown or stale — never zero."""
        n = self.count
        self.usage_cpu = np.full(n, np.nan)      # millicores in use, as the agent measured
        self.usage_memory = np.full(n, np.nan)   # bytes
        self.batch_cpu = np.full(n, np.nan)      # kubernetes.io/batch-cpu the agent offers, millicores
        self.batch_memory = np.full(n, np.nan)   # kubernetes.io/batch-memory, bytes
        self.evicting = np.zeros(n, dtype=bool)  # under pressure: no new offline work
        self.stale = np.ones(n, dtype=bool)      # no usable report
        for name, t in telemetry.items():
            i = self.pos.get(name)
            if i is None or (now is not None and t.stale(now, stale_intervals)):
                continue
            self.stale[i] = False
            self.usage_cpu[i] = t.cpu_used_cores * 1000
            self.usage_memory[i] = t.memory_used_bytes
            self.batch_cpu[i] = t.batch_cpu_millis
            self.batch_memory[i] = t.batch_memory_bytes
            self.evicting[i] = t.evicting


class Snapshot:
    """Everything one session schedules over."""

    def __init__(self, index: ResourceIndex, nodes: NodeTable, jobs: dict[str, JobInfo],
                 queues: dict[str, QueueInfo], foreign: list[Pod] | None = None, *,
                 telemetry: dict[str, NodeTelemetry] | None = None, history: LoadHistory | None = None,
                 now: float | None = None, inventories: InventoryMemo | None = None, node_generation: int = 0,
                 node_index: NodeIndex | None = None, not_ready: list[Node] | None = None):
        self.index = index
        self.nodes = nodes
        # label, affinity and taint masks over the nodes: a keeper's, shared while the nodes stay the same
        self.node_index = node_index if node_index is not None else NodeIndex(nodes.nodes)
        self.jobs = jobs
        self.queues = queues
        self.total = nodes.total()
        self.foreign = foreign or []  # pending pods that name another scheduler: left alone
        self.telemetry = telemetry or {}  # node name -> its last accepted report (stale ones included)
        self.history = history  # the cache's LoadHistory (learned online load by time of week), or None
        self.now = now  # Unix seconds the snapshot was taken at (the scheduler's clock)
        self.inventories = inventories  # the cache's InventoryMemo: nodes' zones and devices
        self.node_generation = node_generation  # the cache's: changes when a node does
        self.pod_affinity = True  # whether any pod may carry inter-pod affinity terms (False: none does)
        # Namespace name -> its labels, for pod affinity terms' namespaceSelectors (namespaces without a
        # Namespace object are not listed: they have only kubernetes.io/metadata.name)
        self.namespace_labels: Mapping[str, Mapping[str, str]] = {}
        # whether those are every namespace (False: Kubernetes mode has not listed them yet; pods whose affinity
        # terms select namespaces by label wait, see scheduler.plugins.shared.podaffinity)
        self.namespaces_known = True
        self.not_ready = not_ready or []  # nodes left out because they are not Ready (reasons name their taints)


DEFAULT_SCHEDULER_NAMES = frozenset({"scoria"})
RECENT_BIND_S = 600.0  # binds this recent are listed for plugins comparing them with report times
UNSET_PRIORITY = -(2**63)  # a job without a priority class: raised to its highest task priority

