"""The session: one cycle's snapshot, its plugins, and the answers actions ask for.

Actions never look at plugins directly: they ask the session ("which job
first?", "where does this task fit?", "who may be evicted for it?") and the
session combines the enabled plugins' hooks tier by tier, as Volcano does.
Placement changes go through :mod:`statement` and land here, in
``_allocate``/``_evict`` and their inverses, which keep the node arrays, the
job counts and the plugins' own accounting (``on_allocate``) in step.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Hashable
from datetime import datetime
from functools import cmp_to_key
from typing import Any, NoReturn, Protocol, cast

import numpy as np

from scheduler.cluster.effects import Effects
from scheduler.framework.config import SchedulerConfig
from scheduler.framework.ledger import Topology
from scheduler.framework.plugin import HOOK_FLAGS, Plugin, Vote, VoteKind
from scheduler.framework.resources import EPS, PODS
from scheduler.framework.scores import ScoreCache, Scorer
from scheduler.framework.snapshot import JobInfo, QueueInfo, Snapshot, TaskInfo, TaskStatus
from scheduler.framework.status import write_status
from scheduler.framework.util import count_reason

log = logging.getLogger(__name__)


# The signatures of the hooks the session calls by name (the table in scheduler.framework.plugin).
# register_plugin checked that a plugin naming a hook defines it, so the session's list of a hook's
# plugins is cast to that hook's protocol to call it.
class _JobValid(Protocol):
    def job_valid(self, job: JobInfo) -> str | None: ...


class _JobReady(Protocol):
    def job_ready(self, job: JobInfo) -> bool: ...


class _JobStarving(Protocol):
    def job_starving(self, job: JobInfo) -> bool: ...


class _JobEnqueued(Protocol):
    def job_enqueued(self, job: JobInfo) -> None: ...


class _Overused(Protocol):
    def overused(self, queue: QueueInfo) -> str | None: ...


class _Allocatable(Protocol):
    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> str | None: ...


class _Preemptive(Protocol):
    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool: ...


class _Evictable(Protocol):
    def evictable(self, task: TaskInfo) -> bool: ...


class _VictimKey(Protocol):
    def victim_key(self, preemptor: TaskInfo) -> Hashable: ...


class _VictimQueueOrder(Protocol):
    def victim_queue_order(self, a: QueueInfo, b: QueueInfo, preemptor: QueueInfo) -> int: ...


class _VictimTasks(Protocol):
    def victim_tasks(self, ssn: Session) -> list[tuple[TaskInfo, str]]: ...


class _Predicate(Protocol):
    def predicate(self, task: TaskInfo, avail: np.ndarray | None) -> np.ndarray: ...


class _ModalPredicate(Protocol):  # a plugin with predicate_modes
    def predicate(self, task: TaskInfo, avail: np.ndarray | None, mode: str = ...) -> np.ndarray: ...


class _PredicateReasons(Protocol):
    def predicate_reasons(self, task: TaskInfo, avail: np.ndarray | None, among: np.ndarray) -> Counter: ...


def _released(item: object) -> NoReturn:
    """The orderings of a session after ``release``."""
    raise RuntimeError("the session was released")


class Session:
    def __init__(self, snapshot: Snapshot, config: SchedulerConfig, *, now: datetime, effects: Effects,
                 state: dict[str, dict] | None = None):
        self.snapshot = snapshot
        self.index = snapshot.index
        self.nodes = snapshot.nodes
        self.node_index = snapshot.node_index
        self.score_cache = ScoreCache(snapshot.nodes)
        self.jobs = snapshot.jobs
        self.queues = snapshot.queues
        self.total = snapshot.total
        self.now = now
        self.config = config
        self.effects = effects
        self._state = state if state is not None else {}
        self.tiers: list[list[Plugin]] = config.build_tiers()
        self.plugins = {p.name: p for tier in self.tiers for p in tier}
        self._hooks = {hook: [[p for p in tier if hook in p.hooks and p.enabled(hook)] for tier in self.tiers]
                       for hook in HOOK_FLAGS}
        self._flat = {hook: [p for tier in tiers for p in tier] for hook, tiers in self._hooks.items()}
        self.binds = 0
        self.commits = 0  # statements committed: what the cluster looks like changes only then
        self.evictions: list[tuple[TaskInfo, str]] = []
        self.phase_changes = 0
        self.job_key = cmp_to_key(self.compare_jobs)
        self.task_key = cmp_to_key(self.compare_tasks)
        self.queue_key = cmp_to_key(self.compare_queues)
        self.bound: set[str] = set()
        self.nominated: set[str] = set()
        self.held: list = []  # statements of pipelined jobs: reserved for this session, not bound
        self._topology: Topology | None = None
        # told of every eviction (+1) and its undoing (-1) in this session: keeps action-side indexes in step
        self.eviction_listeners: list[Callable[[TaskInfo, int], None]] = []

    # -- lifecycle ----------------------------------------------------------------------
    def open(self) -> None:
        plugins = [p for tier in self.tiers for p in tier]
        adjusting = [p for p in plugins if type(p).adjust_nodes is not Plugin.adjust_nodes]
        for plugin in adjusting:
            plugin.adjust_nodes(self)
        if adjusting:
            self.total = self.snapshot.total = self.nodes.total()
        for plugin in plugins:
            plugin.open(self)
        if self._topology is not None:  # plugins said what they count; now count what is already placed
            self._topology.load(self.nodes.topology_tasks)

    @property
    def topology(self) -> Topology:
        """NUMA zones and devices, built when a plugin first asks (only numa-aware and deviceshare do)."""
        if self._topology is None:
            snap = self.snapshot
            inventories = snap.inventories
            assert inventories is not None  # snapshots carry the cache's
            self._topology = Topology(inventories.static(self.nodes.nodes, snap.node_generation), self.index)
        return self._topology

    def close(self) -> None:
        for tier in self.tiers:
            for plugin in tier:
                plugin.close(self)
        write_status(self)

    def release(self) -> None:
        """Drop this cycle's reference cycles (job <-> task, session <-> plugins, orderings) once it is over.

        Tens of thousands of tasks and jobs then go back to the allocator at
        once by reference counting instead of waiting for, and slowing, the
        cycle collector, which otherwise walks the whole cache again and again.
        """
        for job in self.jobs.values():
            job.tasks = {}
        self.tiers, self.plugins, self._hooks, self._flat = [], {}, {}, {}
        self.held.clear()
        self.eviction_listeners.clear()  # action-side indexes (VictimIndex) refer back to the session
        self.job_key = self.task_key = self.queue_key = _released

    def has_action(self, name: str) -> bool:
        return name in self.config.actions

    def state(self, plugin: str) -> dict:
        """What ``plugin`` keeps from one cycle to the next (last eviction times, …); lives as long as the scheduler."""
        return self._state.setdefault(plugin, {})

    # -- ordering -----------------------------------------------------------------------
    def _compare(self, hook: str, a: Any, b: Any) -> int:
        for plugin in self._flat[hook]:
            r = getattr(plugin, hook)(a, b)
            if r:
                return r
        return 0

    def compare_jobs(self, a: JobInfo, b: JobInfo) -> int:
        r = self._compare("job_order", a, b)
        if r:
            return r
        ca, cb = a.created, b.created
        if ca != cb and ca is not None and cb is not None:
            return -1 if ca < cb else 1
        return -1 if a.uid < b.uid else (1 if a.uid > b.uid else 0)

    def compare_tasks(self, a: TaskInfo, b: TaskInfo) -> int:
        r = self._compare("task_order", a, b)
        if r:
            return r
        return -1 if a.pod.name < b.pod.name else (1 if a.pod.name > b.pod.name else 0)

    def compare_victim_queues(self, a: QueueInfo, b: QueueInfo, preemptor: QueueInfo) -> int:
        """Negative when ``a``'s tasks are evicted before ``b``'s for a preemptor of queue ``preemptor``:
        the plugins' say first (capacity: queues nearer the preemptor's in the tree), then the queue
        served last goes first (Volcano's VictimQueueOrderFn)."""
        for plugin in cast("list[_VictimQueueOrder]", self._flat["victim_queue_order"]):
            r = plugin.victim_queue_order(a, b, preemptor)
            if r:
                return r
        return -self.compare_queues(a, b)

    def compare_queues(self, a: QueueInfo, b: QueueInfo) -> int:
        r = self._compare("queue_order", a, b)
        if r:
            return r
        return -1 if a.name < b.name else (1 if a.name > b.name else 0)

    # -- job-level answers ----------------------------------------------------------------
    def job_valid(self, job: JobInfo) -> str | None:
        for plugin in cast("list[_JobValid]", self._flat["job_valid"]):
            reason = plugin.job_valid(job)
            if reason:
                return reason
        return None

    def job_ready(self, job: JobInfo) -> bool:
        return all(p.job_ready(job) for p in cast("list[_JobReady]", self._flat["job_ready"]))

    def job_starving(self, job: JobInfo) -> bool:
        plugins = cast("list[_JobStarving]", self._flat["job_starving"])
        return bool(plugins) and all(p.job_starving(job) for p in plugins)

    def _vote(self, hook: str, job: JobInfo) -> Vote:
        """Volcano's tiered vote: a reject ends it; a tier with a permit decides."""
        for tier in self._hooks[hook]:
            permitted = False
            for plugin in tier:
                vote = getattr(plugin, hook)(job)
                if vote.kind == VoteKind.REJECT:
                    return vote
                permitted |= vote.kind == VoteKind.PERMIT
            if permitted:
                return Vote(VoteKind.PERMIT)
        return Vote(VoteKind.PERMIT)

    def job_pipelined(self, job: JobInfo) -> bool:
        return self._vote("job_pipelined", job).kind == VoteKind.PERMIT

    def job_enqueueable(self, job: JobInfo) -> Vote:
        return self._vote("job_enqueueable", job)

    def job_enqueued(self, job: JobInfo) -> None:
        for plugin in cast("list[_JobEnqueued]", self._flat["job_enqueued"]):
            plugin.job_enqueued(job)

    # -- queue-level answers --------------------------------------------------------------
    def queue_deserved(self, name: str) -> np.ndarray | None:
        """What queue ``name`` deserves, by the first plugin that shares the cluster between queues; None when none
        does."""
        for plugin in self.plugins.values():
            deserved = plugin.queue_deserved(name)
            if deserved is not None:
                return deserved
        return None

    def overused(self, queue: QueueInfo) -> str | None:
        for plugin in cast("list[_Overused]", self._flat["overused"]):
            reason = plugin.overused(queue)
            if reason:
                return reason
        return None

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> str | None:
        for plugin in cast("list[_Allocatable]", self._flat["allocatable"]):
            reason = plugin.allocatable(queue, task)
            if reason:
                return reason
        return None

    def preemptive(self, queue: QueueInfo, task: TaskInfo) -> bool:
        """May ``queue`` reclaim resources for ``task``?"""
        plugins = cast("list[_Preemptive]", self._flat["preemptive"])
        if plugins:
            return all(p.preemptive(queue, task) for p in plugins)
        return self.overused(queue) is None

    def _victims(self, hook: str, task: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Volcano's rule (session_plugins.go Preemptable/Reclaimable): the first tier with victims decides.

        Tier by tier, each plugin with an opinion filters what the previous ones
        in its tier let through (Volcano intersects the answers; a filter in turn
        gives the same set, and lets a counting plugin such as gang count only
        victims that will really go).  A plugin answering none ends its tier
        with no answer and the next tier is asked; None abstains; no opinion at
        all means no victims.  So a later tier is heard only when no earlier one
        offers victims — drf in tier 2 judges jobs of equal priority, which
        priority in tier 1 refuses — and is not heard otherwise: in Volcano's
        default layout proportion (tier 2) is never asked whether a reclaim
        victim's queue stays above its share once gang and conformance (tier 1)
        agreed on victims (volcano-sh/volcano#5896), which is why Scoria's default
        puts proportion in the first tier: plugins that must all agree belong in one.

        Unlike Volcano, the plugins that protect pods whoever asks — those with
        an ``evictable`` hook: gang (minMember), conformance (critical pods) —
        also filter the deciding tier's victims wherever they sit: Volcano's
        fall-through lets, say, drf in tier 2 take a gang below minMember once
        gang in tier 1 refused.
        """
        guards = [p for p in self._flat[hook] if "evictable" in p.hooks]
        candidates = [c for c in candidates if all(cast(_Evictable, g).evictable(c) for g in guards)]
        if not candidates:
            return []
        for tier in self._hooks[hook]:
            chosen = _tier_victims(hook, tier, task, candidates)
            for guard in guards:
                if chosen and guard not in tier:
                    chosen = _tier_victims(hook, [guard], task, chosen)
            if chosen:
                return chosen
        return []

    def evictable(self, task: TaskInfo, hook: str) -> bool:
        """Could ``task`` be a victim under ``hook`` (preemptable/reclaimable) for any preemptor?

        A plugin decides victims under ``hook`` and none refuses the task through ``evictable``.
        """
        plugins = self._flat[hook]
        return bool(plugins) and all("evictable" not in p.hooks or cast(_Evictable, p).evictable(task)
                                     for p in plugins)

    def victim_key(self, preemptor: TaskInfo, hook: str) -> tuple:
        """What the plugins deciding victims under ``hook`` read of the preemptor (equal keys, equal answers)."""
        return tuple(cast(_VictimKey, plugin).victim_key(preemptor) for plugin in self._flat[hook]
                     if "victim_key" in plugin.hooks)

    def victim_tasks(self) -> list[tuple[TaskInfo, str]]:
        """Running tasks plugins want gone regardless of any preemptor (tdm: a closed window), with reasons."""
        out: list[tuple[TaskInfo, str]] = []
        seen: set[str] = set()
        for plugin in cast("list[_VictimTasks]", self._flat["victim_tasks"]):
            for task, reason in plugin.victim_tasks(self):
                if task.uid not in seen:
                    seen.add(task.uid)
                    out.append((task, reason))
        return out

    def preemptable(self, preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        return self._victims("preemptable", preemptor, candidates)

    def reclaimable(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        return self._victims("reclaimable", reclaimer, candidates)

    # -- nodes ----------------------------------------------------------------------------
    @staticmethod
    def fit(task: TaskInfo, avail: np.ndarray) -> np.ndarray:
        """Boolean mask of nodes whose ``avail`` holds ``task``'s request in every resource it asks for (pods too).

        The session checks this itself, whatever plugins are configured, as
        Volcano's actions compare a request with the node's idle (allocate) or
        future idle (pipelining, preempt, reclaim) before asking any plugin.
        Unknown (NaN) capacity is not refused here: the plugin that set it decides.
        """
        if task.pod.resource_claims:  # dynamic resource allocation: nothing here can allocate a claim
            return np.zeros(avail.shape[1], dtype=bool)
        req, cols = task.req, task.cols
        short = avail[cols[0]] + EPS < req[cols[0]]
        for col in cols[1:]:
            short |= avail[col] + EPS < req[col]
        return ~short

    def feasible(self, task: TaskInfo, avail: np.ndarray, mode: str = "now") -> np.ndarray:
        """Boolean mask of nodes where ``avail`` holds ``task`` (:meth:`fit`) and every predicate admits it.

        ``mode`` says what ``avail`` is, for plugins that count resources of
        their own (NUMA zones, devices): ``now`` what allocation may use,
        ``future`` once evictions under way finish, ``reach`` an upper bound
        (``avail`` includes what evicting possible victims would free).
        """
        mask = self.fit(task, avail)
        for plugin in self._flat["predicate"]:
            mask &= (cast(_ModalPredicate, plugin).predicate(task, avail, mode=mode) if plugin.predicate_modes
                     else cast(_Predicate, plugin).predicate(task, avail))
        return mask

    def fits_after_evictions(self, task: TaskInfo, node: int) -> bool:
        """Do the plugins counting resources of their own admit ``task`` on ``node`` once evictions finish?"""
        return all(cast(_ModalPredicate, p).predicate(task, None, mode="future")[node]
                   for p in self._flat["predicate"] if p.predicate_modes)

    def explain(self, task: TaskInfo, avail: np.ndarray) -> str:
        """Why no node fits, kube-scheduler style: ``0/5 nodes are available: 3 Insufficient cpu, …``.

        A node is counted under the first predicate plugin that refuses it; one
        they all admit, under every resource it lacks (kube-scheduler checks
        resources after the node's own filters).
        """
        if task.pod.resource_claims:
            return (f"dynamic resource allocation is not supported: the pod claims "
                    f"{', '.join(task.pod.resource_claims)} (spec.resourceClaims), which Scoria cannot allocate")
        reasons = self._reasons(task, avail, np.ones(self.nodes.count, dtype=bool))
        for node in self.snapshot.not_ready:  # left out of the snapshot: named by the taint that says why
            taint = next((t for t in node.taints if t.effect in ("NoSchedule", "NoExecute")), None)
            reasons[f"node(s) had untolerated taint {taint.describe()}" if taint else "node(s) were not ready"] += 1
        return summarize(self.nodes.count + len(self.snapshot.not_ready), reasons)

    def refusals(self, task: TaskInfo, avail: np.ndarray) -> list[str | None]:
        """Per node, why ``task`` cannot go there (None where it can), worded and ordered as :meth:`explain`
        counts it: one node at a time (a diagnosis, not for the scheduling path)."""
        if task.pod.resource_claims:
            return [self.explain(task, avail)] * self.nodes.count
        feasible = self.feasible(task, avail)
        out: list[str | None] = []
        for node in range(self.nodes.count):
            if feasible[node]:
                out.append(None)
                continue
            remaining = np.zeros(self.nodes.count, dtype=bool)
            remaining[node] = True
            found = [reason for reason, n in self._reasons(task, avail, remaining).items() if n]
            out.append("; ".join(found) or "refused by a filter that gives no reason")
        return out

    def _reasons(self, task: TaskInfo, avail: np.ndarray, remaining: np.ndarray) -> Counter:
        """How many of the nodes marked in ``remaining`` each reason refuses: a node under the first predicate
        plugin that refuses it; one they all admit, under every resource it lacks.  ``remaining`` is narrowed
        in place to the nodes every predicate admits."""
        reasons: Counter = Counter()
        for plugin in self._flat["predicate"]:
            if "predicate_reasons" in plugin.hooks:
                reasons.update(cast(_PredicateReasons, plugin).predicate_reasons(task, avail, remaining))
            remaining &= cast(_Predicate, plugin).predicate(task, avail)
        names = self.index.names
        for col in task.cols:
            label = "Too many pods" if col == PODS else f"Insufficient {names[col]}"
            count_reason(reasons, label, remaining & (avail[col] + EPS < task.req[col]))
        return reasons

    def node_scores(self, task: TaskInfo) -> np.ndarray | None:
        """Summed plugin scores of every node (the caller's copy); None when no plugin scores nodes."""
        total = self.score_cache.total(cast("list[Scorer]", self._flat["node_order"]), task)
        return None if total is None else total.copy()

    def best_node(self, task: TaskInfo, mask: np.ndarray) -> int:
        """The highest-scoring node in ``mask`` (lowest index on ties), or -1."""
        total = self.score_cache.total(cast("list[Scorer]", self._flat["node_order"]), task)
        if total is None:
            cand = np.flatnonzero(mask)
            return int(cand[0]) if cand.size else -1
        best = int(np.argmax(np.where(mask, total, -np.inf)))
        return best if mask[best] else -1

    # -- placement (called by Statement) ---------------------------------------------------
    def _fire(self, hook: str, task: TaskInfo) -> None:
        for plugin in self._flat[hook]:
            getattr(plugin, hook)(task)

    def _allocate(self, task: TaskInfo, node: int) -> None:
        self.nodes.reserve(task, -1)
        task.job.set_status(task, TaskStatus.ALLOCATED)
        task.node = node
        self.nodes.place(task, node)
        if self._topology is not None:
            self._topology.place(task, node)
        self._fire("on_allocate", task)

    def _unallocate(self, task: TaskInfo) -> None:
        if self._topology is not None:
            self._topology.release(task)
        self.nodes.unplace(task, task.node)
        task.job.set_status(task, TaskStatus.PENDING)
        task.node = -1
        self.nodes.reserve(task, +1)
        self._fire("on_deallocate", task)

    def _pipeline(self, task: TaskInfo, node: int) -> None:
        self.nodes.reserve(task, -1)
        task.job.set_status(task, TaskStatus.PIPELINED)
        task.node = node
        self.nodes.add_pipelined(task, node, +1)
        if self._topology is not None:
            self._topology.place(task, node)
        self._fire("on_allocate", task)

    def _unpipeline(self, task: TaskInfo) -> None:
        if self._topology is not None:
            self._topology.release(task)
        self.nodes.add_pipelined(task, task.node, -1)
        task.job.set_status(task, TaskStatus.PENDING)
        task.node = -1
        self.nodes.reserve(task, +1)
        self._fire("on_deallocate", task)

    def _evict(self, task: TaskInfo) -> TaskStatus:
        for listener in self.eviction_listeners:
            listener(task, +1)
        previous = task.status
        task.job.set_status(task, TaskStatus.RELEASING)
        self.nodes.add_releasing(task, task.node, +1)
        if self._topology is not None:
            self._topology.mark_releasing(task, +1)
        self._fire("on_deallocate", task)
        return previous

    def _unevict(self, task: TaskInfo, previous: TaskStatus) -> None:
        for listener in self.eviction_listeners:
            listener(task, -1)
        self.nodes.add_releasing(task, task.node, -1)
        if self._topology is not None:
            self._topology.mark_releasing(task, -1)
        task.job.set_status(task, previous)
        self._fire("on_allocate", task)

    # -- effects (called by Statement.commit) ------------------------------------------------
    def _commit_bind(self, task: TaskInfo) -> None:
        self.effects.bind(task.pod, self.nodes.names[task.node], task.placement or {})
        self.bound.add(task.uid)
        self.binds += 1

    def _commit_pipeline(self, task: TaskInfo) -> None:
        """Room was made for the task: reserve that node for it in the next cycle."""
        self.effects.nominate(task.pod, self.nodes.names[task.node])
        self.nominated.add(task.uid)

    def _commit_evict(self, task: TaskInfo, reason: str) -> None:
        self.effects.evict(task.pod, reason)
        self.evictions.append((task, reason))


def _tier_victims(hook: str, tier: list[Plugin], task: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
    """What the plugins of one tier agree on, each filtering what the previous let through; [] for no answer."""
    chosen: list[TaskInfo] | None = None
    for plugin in tier:
        victims = getattr(plugin, hook)(task, candidates if chosen is None else chosen)
        if victims is None:
            continue
        chosen = list(victims)
        if not chosen:
            return []
    return chosen or []


def summarize(total: int, reasons: Counter) -> str:
    """``0/N nodes are available: <count> <reason>, …`` with the largest counts first."""
    if not reasons:
        return f"0/{total} nodes are available" + ("" if total else ": the cluster has no nodes")
    parts = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
    return f"0/{total} nodes are available: " + ", ".join(f"{n} {reason}" for reason, n in parts)

