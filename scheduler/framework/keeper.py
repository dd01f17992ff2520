"""Snapshots taken incrementally: what one cycle derived from the cache is kept for the next.

Every cycle needs its own mutable snapshot (sessions change tasks, jobs and
node arrays freely), but most of what goes into one does not change from one
cycle to the next: each pod's facts (its job, priority, request vector,
signature), the resource columns, the node arrays, each job's group-derived
fields.  :class:`SnapshotKeeper` keeps those, reads the cache's
:class:`~scheduler.cluster.cache.ChangeJournal` to redo only the pods and
groups that changed, and builds each cycle's objects from what it kept:

* per pod, a :class:`_Seed` (the pod object, whether it is ours by scheduler
  name, its job, facts and request vector), in the order of the cache's pods
  dict, so tasks, jobs and nodes' task lists come out in the order a snapshot
  from scratch gives them;
* per job, a template :class:`JobInfo` (copied with :meth:`JobInfo.fresh`);
* per set of nodes (the cache's ``node_generation``) and resource columns, a
  template :class:`NodeTable` (copied with :meth:`NodeTable.fresh`);
* the resource names the pods request, counted, so the columns are known
  without reading every pod.

What changes without a new object — a pod's phase, node, nomination,
termination, eviction, bind time; a group's phase — is read live each cycle,
so the journal lists only new, replaced and removed objects (and pods whose
facts a bind changed).  :func:`take_snapshot` is a keeper's first snapshot:
everything read.  With :attr:`SnapshotKeeper.verify` set (the test suite sets
it) every incremental snapshot is compared with one taken from scratch and a
difference is an error naming it (:func:`snapshot_differences`).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from scheduler.api.objects import Node, Pod
from scheduler.cluster.cache import ClusterCache, JobRef, PodFacts
from scheduler.framework.nodeindex import NodeIndex
from scheduler.framework.resources import BASE, ResourceIndex
from scheduler.framework.snapshot import (
    DEFAULT_SCHEDULER_NAMES,
    RECENT_BIND_S,
    STATUS_COUNT,
    UNSET_PRIORITY,
    JobInfo,
    NodeTable,
    QueueInfo,
    Snapshot,
    TaskInfo,
    TaskStatus,
)


class SnapshotDiverged(AssertionError):
    """An incremental snapshot differs from one taken from scratch (only checked with ``verify``)."""


class _Seed:
    """What a snapshot derives from one pod object, kept until the object is replaced or its facts change."""

    __slots__ = ("pod", "ours", "facts", "job", "req", "cols", "shape", "topology", "task")

    def __init__(self, pod: Pod, ours: bool, facts: PodFacts):
        self.pod = pod
        self.ours = ours  # pending, it is ours to schedule (by its schedulerName); bound, every pod counts
        self.facts = facts
        self.job = facts.ref.uid
        self.req: np.ndarray | None = None  # set once the resource columns are known
        self.cols: np.ndarray | None = None
        self.shape = -1  # the row of req in the keeper's table of distinct requests
        self.topology = bool(facts.zones or facts.grants or facts.devices)
        # its TaskInfo, made by the first snapshot that needs it and handed to every later one with what a
        # session changes (status, node, job, fit error, nomination, placement, role) set afresh
        self.task: TaskInfo | None = None


class SnapshotKeeper:
    """Takes one cache's snapshots, redoing only what changed since the last one."""

    verify = False  # compare every snapshot with one from scratch (tests set it; it doubles the cost)

    def __init__(self, cache: ClusterCache, scheduler_names: Iterable[str] = DEFAULT_SCHEDULER_NAMES):
        self.cache = cache
        self.scheduler_names = frozenset(scheduler_names)
        self._journal = cache.journal()
        self._seeds: dict[str, _Seed] = {}  # pod uid -> seed, in the order of cache.pods
        self._members: dict[str, set[str]] = {}  # job uid -> its pods' uids
        self._requested: dict[str, int] = {}  # resource name -> how many pods request it
        self._templates: dict[str, JobInfo] = {}  # job uid -> template (see JobInfo.fresh)
        self._index: ResourceIndex | None = None
        self._shapes: dict[tuple, int] = {}  # request key -> row in _shape_rows (for the current columns)
        self._shape_rows: list[np.ndarray] = []
        self._shape_matrix: np.ndarray | None = None  # _shape_rows as one array (None: to be made again)
        self._nodes: NodeTable | None = None  # the template table of _nodes_at
        self._node_index: NodeIndex | None = None  # its masks, shared by the snapshots of the same nodes
        self._nodes_at = -1  # the cache's node_generation it was built at
        self._node_names: set[str] = set()  # the resources nodes offer, at _nodes_at
        self._ns_labels: dict[str, dict[str, str]] = {}  # Namespace name -> labels, redone when one changes
        self._ns_known = True  # whether those are every namespace (the cache's namespaces_known), redone with them
        self._not_ready: list[Node] = []  # nodes left out (not Ready), at _nodes_at

    def take(self, now: float | None = None) -> Snapshot:
        """This cycle's snapshot (see :func:`take_snapshot`)."""
        cache = self.cache
        with cache.lock:
            cache.ensure_default_queue()
            if self._journal.everything or self._journal.namespaces:  # (read before _catch_up clears them)
                self._ns_labels = {name: ns.labels for name, ns in cache.namespaces.items()}
                self._ns_known = cache.namespaces_known
            changed = self._catch_up()
            index = self._columns(changed)
            table = self._table(index)
            telemetry = dict(cache.telemetry)
            table.load_telemetry(telemetry, now, cache.stale_intervals)
            queues = {name: QueueInfo(q, index) for name, q in cache.queues.items()}
            for q in queues.values():
                if q.parent in queues:
                    queues[q.parent].children.append(q.name)
            jobs, foreign = self._jobs(index, table, now)
            assert self._node_index is not None  # made with the table
            self._node_index.trim()
            snapshot = Snapshot(index, table, jobs, queues, foreign, telemetry=telemetry, history=cache.history,
                                now=now, inventories=cache.inventories, node_generation=cache.node_generation,
                                node_index=self._node_index, not_ready=list(self._not_ready))
            snapshot.pod_affinity = bool(cache.affinity_pods)
            snapshot.namespace_labels = self._ns_labels
            snapshot.namespaces_known = self._ns_known
            if self.verify:
                scratch = SnapshotKeeper(cache, self.scheduler_names)
                scratch.verify = False
                other = scratch.take(now)
                problems = snapshot_differences(snapshot, other)
                for job in other.jobs.values():  # job <-> task cycles, as Session.release breaks them
                    job.tasks = {}
                if problems:
                    raise SnapshotDiverged("incremental snapshot differs from one from scratch:\n  "
                                           + "\n  ".join(problems[:20]))
        return snapshot

    # -- what changed ------------------------------------------------------------------------------
    def _catch_up(self) -> list[_Seed]:
        """Bring the seeds up to the cache; the new ones (which still need request vectors)."""
        journal, cache = self._journal, self.cache
        fresh: list[_Seed] = []
        if journal.everything:
            journal.clear()
            self._seeds.clear()
            self._members.clear()
            self._requested.clear()
            self._templates.clear()
            self._index = None
            for uid, pod in cache.pods.items():
                fresh.append(self._put(uid, pod))
            return fresh
        for uid in journal.pods:
            if uid in journal.removed:
                self._drop(uid)  # it left the dict: if it is back, it is back at the end
            now_there = cache.pods.get(uid)
            if now_there is None:
                self._drop(uid)
            else:
                fresh.append(self._put(uid, now_there))
        for key in journal.groups:  # its pods' facts name the group object (and its queue)
            self._templates.pop(key, None)
            for uid in list(self._members.get(key, ())):
                member = cache.pods.get(uid)
                if member is not None and uid not in journal.pods:  # (those were just put)
                    fresh.append(self._put(uid, member))
        journal.clear()
        return fresh

    def _put(self, uid: str, pod: Pod) -> _Seed:
        old = self._seeds.get(uid)
        if old is not None:
            self._forget(uid, old)
        names = self.scheduler_names
        seed = _Seed(pod, not pod.scheduler_name or pod.scheduler_name in names, self.cache.facts(pod))
        self._seeds[uid] = seed  # an existing key keeps its place
        self._members.setdefault(seed.facts.ref.uid, set()).add(uid)
        requested = self._requested
        for name in pod.requests:
            requested[name] = requested.get(name, 0) + 1
        return seed

    def _drop(self, uid: str) -> None:
        old = self._seeds.pop(uid, None)
        if old is not None:
            self._forget(uid, old)

    def _forget(self, uid: str, seed: _Seed) -> None:
        job = seed.facts.ref.uid
        members = self._members.get(job)
        if members is not None:
            members.discard(uid)
            if not members:
                del self._members[job]
        requested = self._requested
        for name in seed.pod.requests:
            left = requested[name] - 1
            if left:
                requested[name] = left
            else:
                del requested[name]

    # -- resource columns and nodes ----------------------------------------------------------------
    def _columns(self, fresh: list[_Seed]) -> ResourceIndex:
        """The resource columns (every name a node offers, a pod requests, a queue or group limits); when
        they change, every request vector and template is redone, else only the new seeds'."""
        cache = self.cache
        if self._nodes_at != cache.node_generation:
            self._node_names = {name for node in cache.nodes.values() for name in node.allocatable}
        names = set(self._node_names)
        names.update(self._requested)
        for queue in cache.queues.values():
            names.update(queue.capability, queue.guarantee, queue.deserved)
        for group in cache.podgroups.values():
            if group.min_resources:
                names.update(group.min_resources)
        index = self._index
        if len(self._shape_rows) > 2 * len(self._seeds) + 1024:  # requests no pod makes any more
            self._shapes, self._shape_rows, self._shape_matrix = {}, [], None
            fresh = list(self._seeds.values())
        if index is None or set(index.names) != names | set(BASE):
            index = self._index = ResourceIndex(names)
            self._templates.clear()
            self._nodes = None
            self._shapes, self._shape_rows, self._shape_matrix = {}, [], None
            fresh = list(self._seeds.values())
        shapes, rows = self._shapes, self._shape_rows
        for seed in fresh:
            key = seed.facts.request_key
            seed.req, seed.cols = index.shape(key)
            seed.task = None  # it holds the old vectors
            row = shapes.get(key)
            if row is None:
                row = shapes[key] = len(rows)
                rows.append(seed.req)
                self._shape_matrix = None
            seed.shape = row
        return index

    def _table(self, index: ResourceIndex) -> NodeTable:
        cache = self.cache
        if self._nodes is None or self._nodes_at != cache.node_generation:
            if self._node_index is None or self._nodes_at != cache.node_generation:
                # as Volcano's snapshot: Ready nodes only (a node lifecycle marks the others; their taints say why)
                nodes = [n for n in cache.nodes.values() if n.ready]
                self._not_ready = [n for n in cache.nodes.values() if not n.ready] if len(nodes) < len(cache.nodes) \
                    else []
                self._node_index = NodeIndex(nodes)
            else:  # the same nodes, new resource columns
                nodes = self._node_index.nodes
            self._nodes = NodeTable(nodes, index)
            self._nodes_at = cache.node_generation
        return self._nodes.fresh()

    # -- jobs and tasks ----------------------------------------------------------------------------
    def _template(self, ref: JobRef, index: ResourceIndex) -> JobInfo:
        template = self._templates.get(ref.uid)
        if template is None or template.group is not ref.group or template.queue != ref.queue:
            template = self._templates[ref.uid] = JobInfo(ref.uid, ref.group, ref.queue, index)
            group = ref.group
            if group is not None and group.priority_class_name:
                template.priority = self.cache.class_priority(group.priority_class_name)
            else:
                template.priority = UNSET_PRIORITY  # raised to the highest task priority below
        return template

    def _jobs(self, index: ResourceIndex, table: NodeTable, now: float | None) -> tuple[dict[str, JobInfo], list[Pod]]:
        cache = self.cache
        jobs: dict[str, JobInfo] = {}
        foreign: list[Pod] = []
        placed_nodes: list[int] = []
        placed_shapes: list[int] = []  # rows of self._shape_rows
        pos = table.pos
        seated: list[TaskInfo] = []  # the tasks on placed_nodes (the table makes each node's list when read)
        topology_tasks, recent_binds = table.topology_tasks, table.recent_binds
        succeeded, failed, releasing, running, pending = (TaskStatus.SUCCEEDED, TaskStatus.FAILED,
                                                          TaskStatus.RELEASING, TaskStatus.RUNNING, TaskStatus.PENDING)
        # a job's allocation and reservations are summed in one vectorised pass below: its row, and the rows
        # of running (reserving) tasks
        job_rows: list[JobInfo] = []
        row_of: dict[str, int] = {}
        held_rows: list[int] = []
        held_shapes: list[int] = []
        reserving_rows: list[int] = []
        reserving_shapes: list[int] = []
        for seed in self._seeds.values():
            pod = seed.pod
            node_name = pod.node_name
            if not (node_name or seed.ours):
                foreign.append(pod)  # pending, and another scheduler's
                continue
            if pod.evicted:
                continue
            facts = seed.facts
            uid = seed.job
            job = jobs.get(uid)
            if job is None:
                job = jobs[uid] = self._template(facts.ref, index).fresh(vectors=False)
                row_of[uid] = len(job_rows)
                job_rows.append(job)
            task = seed.task
            if task is None:  # made once per seed; later cycles reset what a session may have changed
                assert seed.req is not None and seed.cols is not None  # set by _columns
                task = seed.task = TaskInfo(pod, job, seed.req, seed.cols, facts.priority, facts.best_effort,
                                            facts.signature, facts)
            else:
                task.job = job
                task.node = task.nominated = -1
                task.fit_error = task.placement = None
                task.role = ""
            phase = pod.phase
            if phase == "Succeeded":
                status = task.status = succeeded
            elif phase == "Failed":
                status = task.status = failed
            elif node_name:
                status = task.status = releasing if pod.terminating else running
                if status is running:
                    held_rows.append(row_of[uid])
                    held_shapes.append(seed.shape)
                node = pos.get(node_name, -1)
                if node >= 0:
                    task.node = node
                    seated.append(task)
                    placed_nodes.append(node)
                    placed_shapes.append(seed.shape)
                    if status is releasing:
                        table.add_releasing(task, node, +1)
                    if seed.topology:
                        topology_tasks.append(task)
                    if pod.bound_at is not None and (now is None or now - pod.bound_at < RECENT_BIND_S):
                        recent_binds.append((node, task))
            else:
                status = task.status = pending
                if pod.nominated_node in pos:
                    task.nominated = pos[pod.nominated_node]
                    table.reserve(task, +1)
                    reserving_rows.append(row_of[uid])
                    reserving_shapes.append(seed.shape)
            job.tasks[task.uid] = task  # JobInfo.add_task, but for the allocation (summed below)
            job.counts[status] += 1
            if job.role_counts is not None:
                task.role = pod.task_role
                job.role_counts.setdefault(task.role, [0] * STATUS_COUNT)[status] += 1
            if job.priority < task.priority and (job.group is None or not job.group.priority_class_name):
                job.priority = task.priority
        table.seat(placed_nodes, seated)
        requests = self._shape_matrix
        if requests is None:
            requests = self._shape_matrix = np.array(self._shape_rows).reshape(len(self._shape_rows), index.size)
        if placed_nodes:  # one vectorised pass instead of a column update per running pod
            np.add.at(table.used.T, np.array(placed_nodes), requests[np.array(placed_shapes)])
            np.subtract(table.alloc, table.used, out=table.idle)
        if job_rows:  # each job's vectors are rows of one array (views: changed in place like their own)
            held = np.zeros((len(job_rows), index.size))
            if held_rows:
                np.add.at(held, np.array(held_rows), requests[np.array(held_shapes)])
            reserved = np.zeros((len(job_rows), index.size))
            if reserving_rows:
                np.add.at(reserved, np.array(reserving_rows), requests[np.array(reserving_shapes)])
            for row, job in enumerate(job_rows):
                job.allocated = held[row]
                job.reserved = reserved[row]
        table.changes.clear()
        for key, group in cache.podgroups.items():
            if key not in jobs:  # a group whose pods do not exist (yet): gang validity will say so
                jobs[key] = self._template(JobRef(key, group, group.queue), index).fresh()
        for job in jobs.values():
            if job.priority == UNSET_PRIORITY:
                job.priority = cache.class_priority(job.group.priority_class_name if job.group else "")
            if job.created is None:
                stamps = [t.pod.created for t in job.tasks.values() if t.pod.created]
                job.created = min(stamps) if stamps else None
        if len(self._templates) > 2 * len(jobs) + 64:  # jobs that are gone
            self._templates = {uid: t for uid, t in self._templates.items() if uid in jobs}
        return jobs, foreign


def take_snapshot(cache: ClusterCache, scheduler_names: Iterable[str] = DEFAULT_SCHEDULER_NAMES,
                  now: float | None = None) -> Snapshot:
    """Copy the cache into arrays and task/job objects for one cycle, reading all of it.

    Bound pods count whatever scheduler placed them; pending pods are ours when
    their ``spec.schedulerName`` is one of ``scheduler_names`` or unset.  Node
    telemetry older than the cache's staleness limit at ``now`` (Unix seconds)
    reads as unknown.  A scheduler that cycles keeps a :class:`SnapshotKeeper`
    instead, which reads only what changed.
    """
    keeper = SnapshotKeeper(cache, scheduler_names)
    keeper.verify = False
    return keeper.take(now)


# -- comparing snapshots ---------------------------------------------------------------------------
_TASK_FIELDS = ("uid", "status", "node", "priority", "best_effort", "sig", "nominated", "fit_error", "placement", "role")
_JOB_FIELDS = ("uid", "namespace", "name", "queue", "priority", "min_member", "created", "counts", "phase",
               "enqueue_reason", "fit_error", "fit_count", "conditions", "task_min", "role_counts")
_QUEUE_FIELDS = ("name", "weight", "priority", "reclaimable", "parent", "children", "state")
_TABLE_ARRAYS = ("alloc", "inv_alloc", "used", "idle", "releasing", "pipelined", "reserved")
_TABLE_FIELDS = ("names", "count", "pos", "releasing_count", "pipelined_count", "reserved_count", "changes")


def _same(a: object, b: object) -> bool:
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return False
    return a == b


def snapshot_differences(a: Snapshot, b: Snapshot) -> list[str]:
    """Where two snapshots differ (empty when they are the same): every task, job, queue and node
    array, and the order of jobs, of each job's tasks and of each node's tasks."""
    out: list[str] = []
    if a.index.names != b.index.names:
        return [f"resource columns {a.index.names} != {b.index.names}"]
    ta, tb = a.nodes, b.nodes
    for name in _TABLE_FIELDS:
        if getattr(ta, name) != getattr(tb, name):
            out.append(f"nodes.{name}: {getattr(ta, name)!r} != {getattr(tb, name)!r}")
    if ta.names != tb.names:
        return out
    for name in _TABLE_ARRAYS:
        if not _same(getattr(ta, name), getattr(tb, name)):
            out.append(f"nodes.{name} differ")
    if [n is m for n, m in zip(ta.nodes, tb.nodes, strict=True)].count(False):
        out.append("node objects differ")
    if [n.name for n in a.not_ready] != [n.name for n in b.not_ready]:
        out.append("nodes left out as not Ready differ")
    for i, (on_a, on_b) in enumerate(zip(ta.tasks, tb.tasks, strict=True)):
        if list(on_a) != list(on_b):
            out.append(f"tasks on {ta.names[i]}: {list(on_a)} != {list(on_b)}")
    if [t.uid for t in ta.topology_tasks] != [t.uid for t in tb.topology_tasks]:
        out.append("nodes.topology_tasks differ")
    if [(n, t.uid) for n, t in ta.recent_binds] != [(n, t.uid) for n, t in tb.recent_binds]:
        out.append("nodes.recent_binds differ")
    if list(a.jobs) != list(b.jobs):
        out.append(f"jobs (in order): {list(a.jobs)} != {list(b.jobs)}")
    for uid in a.jobs.keys() & b.jobs.keys():
        ja, jb = a.jobs[uid], b.jobs[uid]
        for name in _JOB_FIELDS:
            if not _same(getattr(ja, name), getattr(jb, name)):
                out.append(f"job {uid}.{name}: {getattr(ja, name)!r} != {getattr(jb, name)!r}")
        if ja.group is not jb.group:
            out.append(f"job {uid}.group is another object")
        for name in ("min_resources", "allocated", "reserved"):
            if not _same(getattr(ja, name), getattr(jb, name)):
                out.append(f"job {uid}.{name}: {getattr(ja, name)} != {getattr(jb, name)}")
        if list(ja.tasks) != list(jb.tasks):
            out.append(f"job {uid} tasks (in order): {list(ja.tasks)} != {list(jb.tasks)}")
            continue
        for tid, x in ja.tasks.items():
            y = jb.tasks[tid]
            for name in _TASK_FIELDS:
                if getattr(x, name) != getattr(y, name):
                    out.append(f"task {tid}.{name}: {getattr(x, name)!r} != {getattr(y, name)!r}")
            if x.pod is not y.pod or x.facts != y.facts:
                out.append(f"task {tid}: pod object or facts differ")
            if not (np.array_equal(x.req, y.req) and np.array_equal(x.cols, y.cols)):
                out.append(f"task {tid}: request vector differs")
    if list(a.queues) != list(b.queues):
        out.append(f"queues {list(a.queues)} != {list(b.queues)}")
    for name in a.queues.keys() & b.queues.keys():
        qa, qb = a.queues[name], b.queues[name]
        for field in _QUEUE_FIELDS:
            if getattr(qa, field) != getattr(qb, field):
                out.append(f"queue {name}.{field} differs")
        for field in ("capability", "guarantee", "deserved"):
            if not _same(getattr(qa, field), getattr(qb, field)):
                out.append(f"queue {name}.{field} differs")
    if [p.uid for p in a.foreign] != [p.uid for p in b.foreign]:
        out.append("foreign pods differ")
    for name in ("total", "now", "node_generation", "pod_affinity", "namespace_labels", "namespaces_known"):
        if not _same(getattr(a, name), getattr(b, name)):
            out.append(f"snapshot.{name} differs")
    return out
