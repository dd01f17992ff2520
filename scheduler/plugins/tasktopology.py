"""task-topology: place a job's task roles together or apart, bucket by bucket.

A job (its PodGroup) says how its roles — a pod's role is its annotation
``volcano.sh/task-spec`` — relate, with Volcano's annotations::

    volcano.sh/task-topology-affinity: "ps,worker;ps,evaluator"   # groups that belong together
    volcano.sh/task-topology-anti-affinity: "ps;worker,chief"     # groups that belong apart
    volcano.sh/task-topology-task-order: "ps,worker,chief"        # which roles go first

A group of one role is about that role with itself (``ps``: ps pods apart).
An annotation naming a role no pod of the job has, or a role twice in one
group, is refused: the job is then scheduled without this plugin (and the
reason is logged once).

At session open the pending pods of each such job are dealt into *buckets*,
most constrained role first (self-anti-affinity, inter-affinity,
self-affinity, inter-anti-affinity; the task order before all): a pod goes to
the bucket it has most affinity with, the least loaded one on a tie, and to a
new bucket when it is anti-affine to every bucket.  Pods already on a node
form one bucket per node.  Then:

* task order — pods in a bucket before others, a fuller bucket first, an older
  one on a tie, within a bucket the more constrained role first;
* node order — for a pod in a bucket, a node scores the bucket's pods already
  on it, less the pods there its role is anti-affine to, plus the bucket's
  pending pods, less those that would not fit there beside it (idle plus
  releasing resources), × ``task-topology.weight`` × 100 / the largest
  bucket.  A node the pod alone does not fit scores 0.

Argument: ``task-topology.weight`` (default 1).

Where Scoria differs from Volcano, on purpose: pods of the job already running
count for anti-affinity (Volcano counts only pods placed in this session);
placements a statement undoes are taken back out of the buckets (Volcano keeps
them); when a bucket does not fit a node, the pods left out are taken in the
bucket's order (Volcano's is random).
"""

from __future__ import annotations

import logging
from collections import Counter
from functools import cmp_to_key
from typing import TYPE_CHECKING

import numpy as np

from proto.errors import InputError
from scheduler.framework.args import Arg
from scheduler.framework.plugin import Plugin
from scheduler.framework.resources import CPU, EPS, MEMORY, PODS
from scheduler.framework.snapshot import JobInfo, TaskInfo, TaskStatus

if TYPE_CHECKING:
    from scheduler.framework.session import Session

log = logging.getLogger(__name__)

TASK_SPEC_KEY = "volcano.sh/task-spec"
AFFINITY_KEY = "volcano.sh/task-topology-affinity"
ANTI_AFFINITY_KEY = "volcano.sh/task-topology-anti-affinity"
TASK_ORDER_KEY = "volcano.sh/task-topology-task-order"
MAX_NODE_SCORE = 100.0

# How constrained a role is, by the strongest relation it has (higher: placed earlier).
SELF_ANTI_AFFINITY, INTER_AFFINITY, SELF_AFFINITY, INTER_ANTI_AFFINITY = 4, 3, 2, 1
_warned: dict[tuple[str, str], None] = {}


class TopologyError(InputError):
    pass


def role(task: TaskInfo) -> str:
    """The role buckets use: the pod's ``volcano.sh/task-spec`` annotation ('' when none)."""
    return task.pod.annotations.get(TASK_SPEC_KEY, "")


def _job_roles(job: JobInfo) -> set[str]:
    """Every role the job's pods have (annotation, else label), which the annotations may name."""
    roles = set()
    for task in job.tasks.values():
        pod = task.pod
        roles.add(pod.annotations.get(TASK_SPEC_KEY) or pod.labels.get(TASK_SPEC_KEY) or "")
    return roles


def _check(groups: list[list[str]], roles: set[str], job: JobInfo) -> None:
    for group in groups:
        seen: set[str] = set()
        for name in group:
            if not name:
                continue
            if name not in roles:
                raise TopologyError(f"task {name} do not exist in job <{job.namespace}/{job.name}>")
            if name in seen:
                raise TopologyError(f"task {name} is duplicate in job <{job.namespace}/{job.name}>")
            seen.add(name)


class Topology:
    """A job's annotations, read: groups as written (empty names kept, as Volcano keeps them)."""

    def __init__(self, affinity: list[list[str]], anti_affinity: list[list[str]], task_order: list[str]):
        self.affinity = affinity
        self.anti_affinity = anti_affinity
        self.task_order = task_order

    @classmethod
    def read(cls, job: JobInfo) -> Topology | None:
        """The job's topology; None without any of the annotations; TopologyError when they are wrong."""
        ann = job.group.annotations if job.group is not None else {}
        if not any(key in ann for key in (AFFINITY_KEY, ANTI_AFFINITY_KEY, TASK_ORDER_KEY)):
            return None
        roles = _job_roles(job)
        groups = []
        for key in (AFFINITY_KEY, ANTI_AFFINITY_KEY):
            text = ann.get(key)
            parsed = [part.split(",") for part in text.split(";")] if text is not None else []
            _check(parsed, roles, job)
            groups.append(parsed)
        order = ann[TASK_ORDER_KEY].split(",") if TASK_ORDER_KEY in ann else []
        _check([order], roles, job)
        return cls(groups[0], groups[1], order)


class Bucket:
    """Pods that should share a node: the pending ones, their summed request, and where the placed ones are."""

    __slots__ = ("index", "pending", "roles", "req_score", "request", "bound", "nodes")

    def __init__(self, index: int, size: int):
        self.index = index
        self.pending: dict[str, TaskInfo] = {}
        self.roles: Counter[str] = Counter()
        self.req_score = 0.0  # 1 millicore, 1 MiB and 1/1000 of a device weigh the same
        self.request = np.zeros(size)
        self.bound = 0
        self.nodes: Counter[int] = Counter()

    def add_request(self, task: TaskInfo, sign: int) -> None:
        self.request += sign * task.req
        self.req_score += sign * _req_score(task.req)


def _req_score(req: np.ndarray) -> float:
    # Volcano's weighing: millicores, MiB, one per pod, thousandths of every other resource
    other = float(req.sum() - req[CPU] - req[MEMORY] - req[PODS])
    return float(req[CPU] + req[MEMORY] / 2**20 + req[PODS] + 1000 * other)


class JobTopology:
    """One job's roles, relations and buckets (Volcano's JobManager)."""

    def __init__(self, topology: Topology, size: int, node_pos: dict[str, int]):
        self.size = size
        self.buckets: list[Bucket] = []
        self.bucket_of: dict[str, int] = {}  # pods in a bucket -> its index
        self.role_of: dict[str, str] = {}
        self.priority: dict[str, int] = {}
        self.order: dict[str, int] = {}
        self.inter_affinity: dict[str, set[str]] = {}
        self.self_affinity: set[str] = set()
        self.inter_anti: dict[str, set[str]] = {}
        self.self_anti: set[str] = set()
        self.max_size = 0
        self.node_roles: dict[int, Counter[str]] = {}  # node -> roles of the job's pods running there
        self.placed: dict[str, int] = {}  # pods counted in node_roles -> their node
        self.node_pos = node_pos
        self._apply(topology)

    def _mark(self, name: str, priority: int) -> None:
        if priority > self.priority.get(name, 0):
            self.priority[name] = priority

    def _apply(self, topology: Topology) -> None:
        for groups, pair, single, inter, self_kind in (
                (topology.affinity, self.inter_affinity, self.self_affinity, INTER_AFFINITY, SELF_AFFINITY),
                (topology.anti_affinity, self.inter_anti, self.self_anti, INTER_ANTI_AFFINITY, SELF_ANTI_AFFINITY)):
            for group in groups:
                if len(group) == 1:
                    single.add(group[0])
                    self._mark(group[0], self_kind)
                    continue
                for i, src in enumerate(group):
                    for dst in group[:i]:
                        pair.setdefault(src, set()).add(dst)
                        pair.setdefault(dst, set()).add(src)
                    self._mark(src, inter)
        n = len(topology.task_order)
        for i, name in enumerate(topology.task_order):
            self.order[name] = n - i

    # -- relations ----------------------------------------------------------------------------
    def affinity_order(self, a: TaskInfo, b: TaskInfo) -> int:
        """Which role is more constrained: > 0 when ``a``'s, < 0 when ``b``'s, 0 when alike."""
        ra, rb = self.role_of.get(a.uid, ""), self.role_of.get(b.uid, "")
        if ra == rb:
            return 0
        oa, ob = self.order.get(ra, 0), self.order.get(rb, 0)
        if oa != ob:
            return 1 if oa > ob else -1
        pa, pb = self.priority.get(ra, 0), self.priority.get(rb, 0)
        if pa != pb:
            return 1 if pa > pb else -1
        return 0

    def anti_affine(self, name: str, other: str) -> bool:
        return name in self.self_anti if name == other else other in self.inter_anti.get(name, ())

    def set_affinity(self, name: str, roles: Counter[str], *, only_anti: bool = False) -> int:
        """Affinity of a pod of role ``name`` to pods of ``roles``: +1 per affine pod, -1 per anti-affine one."""
        if not name:
            return 0
        score = 0
        for other, count in roles.items():
            if not only_anti and (name in self.self_affinity if name == other
                                  else other in self.inter_affinity.get(name, ())):
                score += count
            if self.anti_affine(name, other):
                score -= count
        return score

    # -- buckets ------------------------------------------------------------------------------
    def bucket(self, task: TaskInfo) -> Bucket | None:
        index = self.bucket_of.get(task.uid)
        return None if index is None else self.buckets[index]

    def build(self, job: JobInfo) -> None:
        """Deal the job's pods with a role that has a relation into buckets (Volcano's order and rule)."""
        tasks = []
        for task in job.tasks.values():
            name = role(task)
            if name and name in self.priority:
                self.role_of[task.uid] = name
                tasks.append(task)

        def before(a: TaskInfo, b: TaskInfo) -> int:
            na, nb = a.pod.node_name, b.pod.node_name
            if na or nb:
                if bool(na) != bool(nb):
                    return -1 if na else 1  # placed pods first, by node name
                return (na > nb) - (na < nb)
            r = self.affinity_order(a, b)
            if r:
                return -r  # the more constrained role first
            return (a.pod.name > b.pod.name) - (a.pod.name < b.pod.name)

        by_node: dict[str, Bucket] = {}
        for task in sorted(tasks, key=cmp_to_key(before)):
            name = self.role_of[task.uid]
            node_name = task.pod.node_name
            chosen: Bucket | None = None
            best = -(2**31)
            if node_name:
                best, chosen = 0, by_node.get(node_name)
            else:
                for bucket in self.buckets:
                    aff = self.set_affinity(name, bucket.roles)
                    if aff > best or (aff == best and chosen is not None and bucket.req_score < chosen.req_score):
                        best, chosen = aff, bucket
            if best < 0 or chosen is None:
                chosen = Bucket(len(self.buckets), self.size)
                self.buckets.append(chosen)
                if node_name:
                    by_node[node_name] = chosen
            self._add(chosen, name, task)
        for task in job.tasks.values():  # the job's pods already running count for anti-affinity
            if task.status == TaskStatus.RUNNING and task.node >= 0:
                self._place_role(task, task.node)

    def _add(self, bucket: Bucket, name: str, task: TaskInfo) -> None:
        self.bucket_of[task.uid] = bucket.index
        bucket.roles[name] += 1
        if task.pod.node_name:
            pos = self.node_pos.get(task.pod.node_name)
            if pos is not None:
                bucket.nodes[pos] += 1
            bucket.bound += 1
        else:
            bucket.pending[task.uid] = task
            bucket.add_request(task, +1)
        self.max_size = max(self.max_size, len(bucket.pending) + bucket.bound)

    def _place_role(self, task: TaskInfo, node: int) -> None:
        self.placed[task.uid] = node
        name = role(task)
        if name:
            self.node_roles.setdefault(node, Counter())[name] += 1

    def placed_on(self, task: TaskInfo, node: int) -> None:
        """The task was placed (allocated, pipelined, or its eviction undone)."""
        if task.uid in self.placed:
            return
        self._place_role(task, node)
        bucket = self.bucket(task)
        if bucket is not None:
            if bucket.pending.pop(task.uid, None) is not None:
                bucket.add_request(task, -1)
            bucket.nodes[node] += 1
            bucket.bound += 1

    def left(self, task: TaskInfo) -> None:
        """The task left its node: a placement undone (pending again) or an eviction."""
        node = self.placed.pop(task.uid, None)
        if node is None:
            return
        name = role(task)
        if name:
            self.node_roles[node][name] -= 1
        bucket = self.bucket(task)
        if bucket is not None:
            bucket.nodes[node] -= 1
            bucket.bound -= 1
            if task.status == TaskStatus.PENDING:
                bucket.pending[task.uid] = task
                bucket.add_request(task, +1)


class TaskTopology(Plugin):
    name = "task-topology"
    hooks = ("task_order", "node_order", "on_allocate", "on_deallocate")
    arguments = {"weight": Arg("task-topology.weight", "int", 1, minimum=0, help="multiplies the bucket score")}

    def open(self, ssn: Session) -> None:
        self.nodes = ssn.nodes
        self.jobs: dict[str, JobTopology] = {}
        for uid, job in ssn.jobs.items():
            if not job.pending_num:
                continue
            try:
                topology = Topology.read(job)
            except TopologyError as exc:
                key = (uid, str(exc))
                if key not in _warned:
                    if len(_warned) > 10000:
                        _warned.clear()
                    _warned[key] = None
                    log.warning("task-topology: job %s: %s; its task topology is not used", uid, exc)
                continue
            if topology is None:
                continue
            manager = JobTopology(topology, ssn.index.size, ssn.nodes.pos)
            manager.build(job)
            self.jobs[uid] = manager

    # -- task order ------------------------------------------------------------------------------
    def task_order(self, a: TaskInfo, b: TaskInfo) -> int:
        ma, mb = self.jobs.get(a.job.uid), self.jobs.get(b.job.uid)
        if ma is None or mb is None:
            return 0
        ba, bb = ma.bucket(a), mb.bucket(b)
        if (ba is None) != (bb is None):
            return -1 if ba is not None else 1
        if a.job is not b.job or ba is None or bb is None:
            return 0
        if len(ba.pending) != len(bb.pending):
            return -1 if len(ba.pending) > len(bb.pending) else 1
        if ba.index == bb.index:
            return -ma.affinity_order(a, b)
        return -1 if ba.index < bb.index else 1

    # -- node order ------------------------------------------------------------------------------
    def node_order(self, task: TaskInfo, nodes: np.ndarray | None) -> np.ndarray | None:
        manager = self.jobs.get(task.job.uid)
        if manager is None or not self.args.weight:
            return None
        bucket = manager.bucket(task)
        if bucket is None:
            return None
        table = self.nodes
        sel: slice | np.ndarray = slice(None) if nodes is None else nodes
        room = table.idle[:, sel] + table.releasing[:, sel]
        room = np.where(np.isnan(room), np.inf, room)  # unknown capacity is not held against a node
        cols = task.cols
        never = (room[cols] + EPS < task.req[cols, None]).any(axis=0)

        base = np.zeros(table.count)
        for node, count in bucket.nodes.items():
            base[node] += count
        name = manager.role_of.get(task.uid, "")
        if name:
            for node, roles in manager.node_roles.items():
                anti = manager.set_affinity(name, roles, only_anti=True)
                if anti < 0:
                    base[node] += anti
        score = base[sel] + len(bucket.pending)
        score -= self._left_out(task, bucket, room)
        score[never] = 0.0
        factor = float(self.args.weight)
        if manager.max_size:
            factor *= MAX_NODE_SCORE / manager.max_size
        return score * factor

    @staticmethod
    def _left_out(task: TaskInfo, bucket: Bucket, room: np.ndarray) -> np.ndarray:
        """Per node, how many of the bucket's other pending pods must be left out for the rest to fit."""
        others = [t.req for uid, t in bucket.pending.items() if uid != task.uid]
        remain = np.vstack([bucket.request, bucket.request - np.cumsum(others, axis=0)]) if others \
            else bucket.request[None, :]  # remain[k]: the bucket's request with k others left out
        count = remain.shape[0] - 1
        need = np.zeros(room.shape[1], dtype=np.intp)
        for col in range(remain.shape[1]):
            # remain[:, col] only falls as k grows: the first k that fits, by binary search per node
            first = np.searchsorted(-remain[:, col], -(room[col] + EPS), side="left")
            np.maximum(need, first, out=need)
        return np.minimum(need, count).astype(float)

    # -- events ----------------------------------------------------------------------------------
    def on_allocate(self, task: TaskInfo) -> None:
        manager = self.jobs.get(task.job.uid)
        if manager is not None and task.node >= 0:
            manager.placed_on(task, task.node)

    def on_deallocate(self, task: TaskInfo) -> None:
        manager = self.jobs.get(task.job.uid)
        if manager is not None:
            manager.left(task)
