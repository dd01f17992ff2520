"""Pod topology spread (kube-scheduler's PodTopologySpread), shared by predicates (the filter) and nodeorder (the score).

A pod's ``topologySpreadConstraints`` become :class:`Rule` objects: the
``matchLabelKeys`` merged into the selector with the pod's own label values,
the defaults filled in.  A pod without constraints of its own takes the
cluster's default constraints (a plugin argument), which select the pods of the
pod's own job (PodGroup) — Scoria's stand-in for the Service or ReplicaSet
kube-scheduler derives their selector from; a pod without a PodGroup gets none.

:class:`SpreadCounts` keeps, per session, the matching pods per node for each
(namespace, selector) asked about, and per topology domain for each (selector,
topology key, eligible nodes) — arrays built once from the nodes' tasks and
then moved by one element per placement event (``on_allocate`` /
``on_deallocate``), so the members of one gang spread among themselves inside
one statement, and undoing a statement restores the counts.  A pending pod
with no constraints (and no defaults) costs nothing.

Semantics follow kube-scheduler: pods counted are those of the incoming pod's
namespace that hold a node and are not terminating; a selector without
requirements counts no pod (kube-scheduler's ``countPodsMatchSelector``) but
matches the incoming pod; domains are the topology key's values among eligible
nodes — nodes carrying every constraint's key that pass the constraint's
``nodeAffinityPolicy`` (Honor, the default: the pod's nodeSelector and
required node affinity) and ``nodeTaintsPolicy`` (Honor: its untolerated
NoSchedule/NoExecute taints; Ignore, the default); skew is the domain's count,
plus one when the pod matches its own selector, minus the smallest count
among eligible domains (0 while there are fewer than ``minDomains``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from proto.errors import InputError
from scheduler.api.manifests import spread_constraints
from scheduler.api.objects import LabelSelector, Pod, SpreadConstraint
from scheduler.framework.args import ArgError
from scheduler.framework.nodeindex import NodeIndex
from scheduler.framework.snapshot import NodeTable, TaskInfo, TaskStatus

HARD_REASON = "node(s) didn't match pod topology spread constraints"
LABEL_REASON = "node(s) didn't match pod topology spread constraints (missing required label)"
HOSTNAME = "kubernetes.io/hostname"
MAX_NODE_SCORE = 100
_COUNTED = (TaskStatus.ALLOCATED, TaskStatus.PIPELINED, TaskStatus.RUNNING)


@dataclass(frozen=True, slots=True)
class Rule:
    """One constraint as the scheduler applies it to one pod (selector final, defaults filled in)."""

    max_skew: int
    key: str
    selector: LabelSelector | None  # None: selects no pod
    group: str = ""  # a default constraint: selects the pods of this PodGroup instead
    min_domains: int = 1
    honor_affinity: bool = True
    honor_taints: bool = False

    def matches(self, pod: Pod) -> bool:
        if self.group:
            return pod.group_name == self.group
        return self.selector is not None and self.selector.matches(pod.labels)

    @property
    def counts_pods(self) -> bool:
        """kube-scheduler counts no pod for a selector without requirements (nor for none)."""
        return bool(self.group) or (self.selector is not None and not self.selector.empty)

    @property
    def selector_key(self) -> tuple:
        return (self.selector, self.group)


def rules(pod: Pod, hard: bool, defaults: tuple[SpreadConstraint, ...] = ()) -> tuple[Rule, ...]:
    """The pod's constraints of one kind (``hard``: DoNotSchedule) as rules; the defaults when it has none at all."""
    own = pod.spread_constraints
    if own:
        return tuple(_rule(c, pod) for c in own if c.hard == hard)
    if not defaults or not pod.group_name:
        return ()
    return tuple(_rule(c, pod, group=pod.group_name) for c in defaults if c.hard == hard)


def _rule(c: SpreadConstraint, pod: Pod, group: str = "") -> Rule:
    selector = c.selector
    if selector is not None and c.match_label_keys:
        extra = tuple((k, pod.labels[k]) for k in c.match_label_keys if k in pod.labels)
        if extra:
            selector = LabelSelector(tuple(sorted(selector.match_labels + extra)), selector.match_expressions)
    return Rule(c.max_skew, c.topology_key, selector, group, c.min_domains,
                c.node_affinity_policy == "Honor", c.node_taints_policy == "Honor")


def parse_defaults(raw: dict[str, Any] | None, key: str, hard: bool, other: str) -> tuple[dict[str, Any] | None,
                                                                                          tuple[SpreadConstraint, ...]]:
    """Take the default constraints argument ``key`` out of a plugin's ``raw`` arguments.

    Written as a pod's ``topologySpreadConstraints`` without ``labelSelector``
    (kube-scheduler's ``defaultConstraints``); every entry must be of this
    plugin's kind (``hard``: DoNotSchedule), ``other`` names where the other kind goes.
    """
    if not isinstance(raw, dict) or key not in raw:
        return raw, ()
    rest = dict(raw)
    value = rest.pop(key)
    if value is None:
        return rest, ()
    try:
        parsed = spread_constraints(value, "arguments", key)
    except InputError as exc:
        raise ArgError(f"argument {key!r}: {exc}") from None
    for i, c in enumerate(parsed):
        if c.selector is not None:
            raise ArgError(f"argument {key!r}: [{i}].labelSelector must not be set: default constraints select "
                           "the pods of the pod's own PodGroup")
        if c.hard != hard:
            raise ArgError(f"argument {key!r}: [{i}] is whenUnsatisfiable {c.when_unsatisfiable}; this argument "
                           f"takes {'DoNotSchedule' if hard else 'ScheduleAnyway'} constraints ({other} takes the other)")
    return rest, parsed


class _DomainCounts:
    """Matching pods per domain of one topology key, counted over one set of eligible nodes."""

    __slots__ = ("dom", "eligible", "counts", "present")

    def __init__(self, dom: np.ndarray, size: int, eligible: np.ndarray, per_node: np.ndarray):
        self.dom = dom
        self.eligible = eligible
        ids = dom[eligible]
        self.counts = np.bincount(ids, weights=per_node[eligible], minlength=size)
        self.present = np.bincount(ids, minlength=size) > 0


class SpreadCounts:
    """Matching pods per node and per topology domain, kept in step with the session's placements."""

    def __init__(self, nodes: NodeTable, index: NodeIndex):
        self.nodes = nodes
        self.index = index
        self.version = 0  # changes whenever a count does (score caches key on it)
        self._per_node: dict[str, dict[tuple, np.ndarray]] = {}  # namespace -> selector key -> pods per node
        self._domains: dict[str, tuple[np.ndarray, int]] = {}  # topology key -> (domain per node or -1, domains)
        self._domain_counts: dict[tuple, _DomainCounts] = {}
        self._by_selector: dict[tuple, list[_DomainCounts]] = {}  # (namespace, selector key) -> its domain counts
        self._placed: dict[str, int] = {}  # tasks placed in this session -> node (an undone one has lost it)
        self._pipelined: dict[str, TaskInfo] = {}  # not in NodeTable.tasks, yet counted as kube counts assumed pods
        self._eligible: dict[tuple, np.ndarray] = {}

    # -- the placement events ----------------------------------------------------------------
    def on_allocate(self, task: TaskInfo) -> None:
        node = task.node
        if task.status in (TaskStatus.ALLOCATED, TaskStatus.PIPELINED):
            self._placed[task.uid] = node
        if task.status == TaskStatus.PIPELINED:
            self._pipelined[task.uid] = task
        self._move(task, node, +1)

    def on_deallocate(self, task: TaskInfo) -> None:
        node = task.node if task.node >= 0 else self._placed.get(task.uid, -1)
        self._pipelined.pop(task.uid, None)
        if task.status == TaskStatus.PENDING:
            self._placed.pop(task.uid, None)
        if node >= 0:
            self._move(task, node, -1)

    def _move(self, task: TaskInfo, node: int, delta: int) -> None:
        selectors = self._per_node.get(task.pod.namespace)
        if not selectors:
            return
        pod = task.pod
        for skey, per_node in selectors.items():
            if not _selects(skey, pod):
                continue
            per_node[node] += delta
            self.version += 1
            for dc in self._by_selector[(pod.namespace, skey)]:
                if dc.eligible[node]:
                    dc.counts[dc.dom[node]] += delta

    # -- counts ------------------------------------------------------------------------------
    def per_node(self, namespace: str, rule: Rule) -> np.ndarray:
        """Pods of ``namespace`` matching ``rule``'s selector, per node."""
        skey = rule.selector_key
        selectors = self._per_node.setdefault(namespace, {})
        counts = selectors.get(skey)
        if counts is None:
            counts = np.zeros(self.nodes.count)
            if rule.counts_pods:
                for i, tasks in enumerate(self.nodes.tasks):
                    for t in tasks.values():
                        if t.status in _COUNTED and t.pod.namespace == namespace and _selects(skey, t.pod):
                            counts[i] += 1
                for t in self._pipelined.values():
                    if t.pod.namespace == namespace and _selects(skey, t.pod):
                        counts[t.node] += 1
            selectors[skey] = counts
            self._by_selector[(namespace, skey)] = []
        return counts

    def domains(self, key: str) -> tuple[np.ndarray, int]:
        """Each node's domain under topology ``key`` (an index; -1 without the label) and how many there are."""
        found = self._domains.get(key)
        if found is None:
            dom = np.full(self.nodes.count, -1, dtype=np.intp)
            values: dict[str, int] = {}
            for i, node in enumerate(self.nodes.nodes):
                value = node.labels.get(key)
                if value is not None:
                    dom[i] = values.setdefault(value, len(values))
            found = self._domains[key] = (dom, len(values))
        return found

    def eligible(self, task: TaskInfo, rule: Rule, keys: tuple[str, ...]) -> tuple[tuple, np.ndarray]:
        """Nodes whose pods count for ``rule`` (every key in ``keys`` present, and the rule's inclusion
        policies), and a key naming that set."""
        selector, terms, tolerations = task.sig
        ekey = (keys, (selector, terms) if rule.honor_affinity else None, tolerations if rule.honor_taints else None)
        mask = self._eligible.get(ekey)
        if mask is None:
            mask = np.ones(self.nodes.count, dtype=bool)
            for key in keys:
                mask &= self.domains(key)[0] >= 0
            if rule.honor_affinity:
                mask &= self.index.affinity_mask(selector, terms)
            if rule.honor_taints:
                mask &= self.index.tolerated_mask(tolerations)
            self._eligible[ekey] = mask
        return ekey, mask

    def domain_counts(self, task: TaskInfo, rule: Rule, keys: tuple[str, ...]) -> _DomainCounts:
        namespace = task.pod.namespace
        ekey, eligible = self.eligible(task, rule, keys)
        ckey = (namespace, rule.selector_key, rule.key, ekey)
        dc = self._domain_counts.get(ckey)
        if dc is None:
            per_node = self.per_node(namespace, rule)
            dom, size = self.domains(rule.key)
            dc = self._domain_counts[ckey] = _DomainCounts(dom, size, eligible, per_node)
            self._by_selector[(namespace, rule.selector_key)].append(dc)
        return dc

    # -- the filter (DoNotSchedule) -------------------------------------------------------------
    def _rule_masks(self, task: TaskInfo, hard: tuple[Rule, ...]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Per rule: nodes with its topology key, and nodes where the rule admits the task."""
        keys = tuple(r.key for r in hard)
        for rule in hard:
            dc = self.domain_counts(task, rule, keys)
            dom = dc.dom
            has_key = dom >= 0
            present = dc.present
            n_domains = int(np.count_nonzero(present))
            if n_domains == 0:
                yield has_key, has_key
                continue
            low = 0.0 if n_domains < rule.min_domains else float(dc.counts[present].min())
            own = 1 if rule.matches(task.pod) else 0
            ok_domain = dc.counts + own - low <= rule.max_skew
            yield has_key, has_key & ok_domain[np.where(has_key, dom, 0)]

    def filter_mask(self, task: TaskInfo, hard: tuple[Rule, ...]) -> np.ndarray:
        """Nodes where placing ``task`` keeps every DoNotSchedule rule within its maxSkew."""
        mask = np.ones(self.nodes.count, dtype=bool)
        for _, ok in self._rule_masks(task, hard):
            mask &= ok
        return mask

    def filter_reasons(self, task: TaskInfo, hard: tuple[Rule, ...], among: np.ndarray) -> Counter:
        """Why nodes in ``among`` fail: the first rule refusing each, as kube-scheduler words it."""
        reasons: Counter = Counter()
        left = among.copy()
        for has_key, ok in self._rule_masks(task, hard):
            missing = int(np.count_nonzero(left & ~has_key))
            if missing:
                reasons[LABEL_REASON] += missing
            left &= has_key
            skewed = int(np.count_nonzero(left & ~ok))
            if skewed:
                reasons[HARD_REASON] += skewed
            left &= ok
        return reasons

    # -- the score (ScheduleAnyway) -------------------------------------------------------------
    def scores(self, task: TaskInfo, soft: tuple[Rule, ...], filtered: np.ndarray) -> np.ndarray:
        """kube-scheduler's normalised spread score (0-100, higher for less crowded domains) of every node;
        ``filtered`` are the candidate nodes (those missing a topology key score 0, the others are normalised
        among themselves)."""
        keys = tuple(r.key for r in soft)
        scored = filtered.copy()
        for key in keys:
            scored &= self.domains(key)[0] >= 0
        raw = np.zeros(self.nodes.count)
        n_scored = int(np.count_nonzero(scored))
        if not n_scored:
            return raw
        for rule in soft:
            if rule.key == HOSTNAME:
                counts = self.per_node(task.pod.namespace, rule)
                size = n_scored
            else:
                dc = self.domain_counts(task, rule, keys)
                counts = dc.counts[np.where(scored, dc.dom, 0)]
                size = int(np.unique(dc.dom[scored]).size)
            raw += counts * math.log(size + 2) + (rule.max_skew - 1)
        raw = np.floor(raw + 0.5)  # Go's math.Round on non-negative numbers
        top = raw[scored].max()
        low = raw[scored].min()
        out = np.zeros(self.nodes.count)
        if top == 0:
            out[scored] = MAX_NODE_SCORE
        else:
            out[scored] = np.floor(MAX_NODE_SCORE * (top + low - raw[scored]) / top)
        return out


def _selects(skey: tuple, pod: Pod) -> bool:
    selector, group = skey
    if group:
        return pod.group_name == group
    return selector is not None and not selector.empty and selector.matches(pod.labels)
