"""Inter-pod affinity and anti-affinity as kube-scheduler's InterPodAffinity plugin decides them, vectorised.

One :class:`PodAffinityState` per session, shared by the plugins that ask
(predicates filters, nodeorder scores; :func:`state_of`).  It is inactive,
and costs nothing per placement, when no pod of the session carries a term.

What it keeps, as arrays over nodes kept in step with every placement of the
session (``on_allocate``/``on_deallocate``, so that members of a gang placed
by one statement constrain each other):

* per *matcher* (a pending pod's required affinity terms together, or one of
  its other terms): how many placed pods on each node it matches; built the
  first time a pod asks, by one pass over the placed pods;
* per term carried by placed pods (required anti-affinity, preferred affinity
  and anti-affinity): how many placed pods on each node carry it.

Counts per topology domain (the values of a node label) then come from one
``bincount`` of the node counts; a node's verdict is its domain's count.

A pod being evicted (``Releasing``) still counts, as kube-scheduler counts a
terminating pod, until it is gone: :meth:`PodAffinityState.verdict` with
``mode="future"`` (what preemption asks once its victims finish) leaves the
pods being released out, subtracting them from the counts (few: the current
evictions).  ``mode="reach"`` is an upper bound for preemption's search: any
anti-affinity, the pod's own or placed pods', might be cleared by evictions.

Namespaces not listed yet (``Snapshot.namespaces_known`` false: Kubernetes mode
before its Namespace informer's first list): a term's non-empty
``namespaceSelector`` cannot be matched, so, erring on the side of the rules,

* a pod whose own terms (required or preferred, affinity or anti-affinity) use
  one is not placed: every node is refused with :data:`NAMESPACES_REASON`
  (preemption too), until the namespaces are listed;
* a placed pod's *required* anti-affinity term that uses one is taken to select
  every namespace: it keeps any pod its label selector matches out of its
  domain (it blocks rather than allows);
* a placed pod's *preferred* term that uses one counts only the namespaces it
  names (scores alone: nothing is refused or allowed by it).

Pods whose terms select namespaces by name only (or none: their own
namespace, or ``namespaceSelector: {}`` for all) never wait for namespaces.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from scheduler.api.objects import Pod, PodAffinityTerm, Requirement, namespace_labels
from scheduler.framework.snapshot import TaskInfo, TaskStatus

if TYPE_CHECKING:
    from scheduler.framework.session import Session

AFFINITY_REASON = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_REASON = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY_REASON = "node(s) didn't satisfy existing pods anti-affinity rules"
NAMESPACES_REASON = "node(s) didn't match pod affinity rules: namespaces are not listed yet (namespaceSelector)"
_PLACED = (TaskStatus.ALLOCATED, TaskStatus.PIPELINED, TaskStatus.RUNNING, TaskStatus.RELEASING)
_STATES: weakref.WeakKeyDictionary[Session, PodAffinityState] = weakref.WeakKeyDictionary()


def selector_matches(selector: tuple[Requirement, ...] | None, labels: Mapping[str, str]) -> bool:
    """A label selector (None: matches nothing; empty: everything) against a pod's labels."""
    if selector is None:
        return False
    for req in selector:
        value = labels.get(req.key)
        op = req.operator
        if op == "In":
            if value is None or value not in req.values:
                return False
        elif op == "NotIn":
            if value is not None and value in req.values:
                return False
        elif op == "Exists":
            if value is None:
                return False
        elif value is not None:  # DoesNotExist
            return False
    return True


def term_matches(term: PodAffinityTerm, pod: Pod, ns_labels: Mapping[str, Mapping[str, str]] | None, *,
                 unlisted: bool = False) -> bool:
    """Does ``pod`` fall under ``term`` (its namespaces, namespace selector and label selector)?

    ``ns_labels``: the labels of each Namespace object by name; a namespace
    without one has only ``kubernetes.io/metadata.name``.  None: the namespaces
    are not listed yet, and a namespace selector then matches every namespace
    when ``unlisted`` (a filter that must not let a pod through by mistake),
    none otherwise.
    """
    if term.namespaces is not None and pod.namespace not in term.namespaces:
        ns_selector = term.namespace_selector
        if ns_selector is None or (ns_labels is None and not unlisted):
            return False
        if ns_labels is None:
            return selector_matches(term.selector, pod.labels)
        labels = ns_labels.get(pod.namespace)
        if not selector_matches(ns_selector, labels if labels is not None else namespace_labels(pod.namespace)):
            return False
    return selector_matches(term.selector, pod.labels)


def all_match(terms: tuple[PodAffinityTerm, ...], pod: Pod, ns_labels: Mapping[str, Mapping[str, str]] | None) -> bool:
    return all(term_matches(t, pod, ns_labels) for t in terms)


def selects_namespaces(pod: Pod) -> bool:
    """Does one of ``pod``'s own affinity or anti-affinity terms, required or preferred, select namespaces by
    label (a non-empty ``namespaceSelector``)?"""
    aff = pod.pod_affinity
    return aff is not None and any(t.namespace_selector is not None for terms in (
        aff.required, aff.preferred, aff.anti_required, aff.anti_preferred) for t in terms)


def state_of(ssn: Session) -> PodAffinityState:
    """The session's state (made on first use); every plugin asking gets the same one."""
    state = _STATES.get(ssn)
    if state is None:
        state = _STATES[ssn] = PodAffinityState(ssn)
    return state


class InterPodVerdict:
    """Where one pod may go: nodes failing its affinity, its anti-affinity, existing pods' anti-affinity (and
    ``namespaces``: no node, while its terms need namespaces not listed yet)."""

    __slots__ = ("affinity", "anti", "existing", "namespaces", "ok")

    def __init__(self, affinity: np.ndarray | None, anti: np.ndarray | None, existing: np.ndarray | None,
                 namespaces: np.ndarray | None = None):
        # bool masks of nodes that pass (None: all)
        self.affinity, self.anti, self.existing, self.namespaces = affinity, anti, existing, namespaces
        ok = None
        for mask in (namespaces, affinity, anti, existing):
            if mask is not None:
                ok = mask.copy() if ok is None else ok & mask
        self.ok = ok


class PodAffinityState:
    def __init__(self, ssn: Session):
        self.count = ssn.nodes.count
        self.nodes = ssn.nodes.nodes
        # None while the namespaces are not listed yet (see the module's docstring)
        self.ns_labels = ssn.snapshot.namespace_labels if ssn.snapshot.namespaces_known else None
        self.version = 0  # changes whenever a placement this state counts changes
        self._domains: dict[str, tuple[np.ndarray, np.ndarray, int]] = {}
        self._matchers: dict[tuple[PodAffinityTerm, ...], np.ndarray] = {}
        # terms carried by placed pods, by kind: term -> placed carriers per node
        self._carried: dict[str, dict[PodAffinityTerm, np.ndarray]] = {
            "anti_required": {}, "preferred": {}, "anti_preferred": {}}
        self._placed: dict[str, tuple[TaskInfo, int]] = {}
        self._leaving: dict[str, tuple[TaskInfo, int]] = {}  # placed pods being released (counted until gone)
        self._verdicts: dict[tuple, InterPodVerdict] = {}
        self._scores: dict[tuple, np.ndarray | None] = {}
        self.active = ssn.snapshot.pod_affinity and any(
            t.pod.pod_affinity is not None for job in ssn.jobs.values() for t in job.tasks.values())
        if not self.active:
            return
        for job in ssn.jobs.values():
            for task in job.tasks.values():
                if task.status in _PLACED and task.node >= 0:
                    self._add(task, task.node)
                    if task.status == TaskStatus.RELEASING:
                        self._leaving[task.uid] = (task, task.node)

    # -- placements ---------------------------------------------------------------------
    def on_allocate(self, task: TaskInfo) -> None:
        if not self.active:
            return
        if task.uid in self._leaving:  # an eviction undone: it stays for good
            del self._leaving[task.uid]
            self.version += 1
        elif task.node >= 0 and task.uid not in self._placed:
            self._add(task, task.node)

    def on_deallocate(self, task: TaskInfo) -> None:
        if not self.active or task.uid not in self._placed:
            return
        if task.status == TaskStatus.RELEASING:  # evicted: it holds its place until it is gone
            self._leaving[task.uid] = self._placed[task.uid]
            self.version += 1
            return
        self._leaving.pop(task.uid, None)
        _, node = self._placed.pop(task.uid)
        self._count(task.pod, node, -1)

    def _add(self, task: TaskInfo, node: int) -> None:
        self._placed[task.uid] = (task, node)
        self._count(task.pod, node, +1)

    def _count(self, pod: Pod, node: int, sign: int) -> None:
        self.version += 1
        ns_labels = self.ns_labels
        for terms, counts in self._matchers.items():
            if all_match(terms, pod, ns_labels):
                counts[node] += sign
        aff = pod.pod_affinity
        if aff is not None:
            for kind, table in self._carried.items():
                for term in getattr(aff, kind):
                    carriers = table.get(term)
                    if carriers is None:
                        carriers = table[term] = np.zeros(self.count, dtype=np.int64)
                    carriers[node] += sign

    # -- counting -----------------------------------------------------------------------
    def _matched(self, terms: tuple[PodAffinityTerm, ...], future: bool = False) -> np.ndarray:
        """Placed pods per node matching every one of ``terms`` (``future``: those being released left out)."""
        counts = self._matchers.get(terms)
        if counts is None:
            counts = np.zeros(self.count, dtype=np.int64)
            for task, node in self._placed.values():
                if all_match(terms, task.pod, self.ns_labels):
                    counts[node] += 1
            self._matchers[terms] = counts
        if future and self._leaving:
            counts = counts.copy()
            for task, node in self._leaving.values():
                if all_match(terms, task.pod, self.ns_labels):
                    counts[node] -= 1
        return counts

    def _carriers(self, term: PodAffinityTerm, future: bool) -> np.ndarray:
        """Placed pods per node carrying required anti-affinity ``term`` (``future``: those being released left
        out)."""
        carriers = self._carried["anti_required"][term]
        if future and self._leaving:
            carriers = carriers.copy()
            for task, node in self._leaving.values():
                aff = task.pod.pod_affinity
                if aff is not None and term in aff.anti_required:
                    carriers[node] -= 1
        return carriers

    def domains(self, key: str) -> tuple[np.ndarray, np.ndarray, int]:
        """Per node its domain id under label ``key`` (0 for nodes without it), which nodes have it, and the
        number of ids."""
        entry = self._domains.get(key)
        if entry is None:
            ids: dict[str, int] = {}
            out = np.zeros(self.count, dtype=np.int64)
            for i, node in enumerate(self.nodes):
                value = node.labels.get(key)
                if value is not None:
                    out[i] = ids.setdefault(value, len(ids) + 1)
            entry = self._domains[key] = (out, out > 0, len(ids) + 1)
        return entry

    def in_domain(self, key: str, per_node: np.ndarray) -> np.ndarray:
        """For every node, the sum of ``per_node`` over the nodes of its domain (0 where the node lacks ``key``)."""
        ids, has, size = self.domains(key)
        totals = np.bincount(ids, weights=per_node, minlength=size)
        totals[0] = 0
        return totals[ids]

    # -- the filter ---------------------------------------------------------------------
    def verdict(self, pod: Pod, mode: str = "now") -> InterPodVerdict | None:
        """The nodes ``pod`` may take under required terms, its own and placed pods'; None when nothing constrains
        it.

        ``mode``: ``now`` counts every placed pod, those being evicted too;
        ``future`` leaves out the pods being evicted (they will be gone);
        ``reach`` is an upper bound over any evictions: anti-affinity either
        way is left to the node's own check after its evictions, and required
        affinity, which evictions cannot satisfy, keeps its ``now`` nodes plus,
        for a pod matching its own terms, the nodes it could take were every
        matching pod evicted.
        """
        if not self.active:
            return None
        aff = pod.pod_affinity
        if self.ns_labels is None and selects_namespaces(pod):  # it waits for the namespaces, whatever the mode
            return InterPodVerdict(None, None, None, np.zeros(self.count, dtype=bool))
        if mode == "reach":
            if aff is None or not aff.required:
                return None
            existing_terms = []
        else:
            existing_terms = [t for t in self._carried["anti_required"]
                              if term_matches(t, pod, self.ns_labels, unlisted=True)]
            if aff is None and not existing_terms:
                return None
        future = mode == "future" and bool(self._leaving)
        key = (aff, pod.namespace, tuple(sorted(pod.labels.items())), self.version,
               mode if mode == "reach" else future)
        verdict = self._verdicts.get(key)
        if verdict is None:
            if len(self._verdicts) > 256:
                self._verdicts.clear()
            if mode == "reach":
                assert aff is not None
                verdict = InterPodVerdict(self._affinity_reach(aff.required, pod), None, None)
            else:
                verdict = InterPodVerdict(
                    self._affinity_ok(aff.required, pod, future) if aff and aff.required else None,
                    self._anti_ok(aff.anti_required, future) if aff and aff.anti_required else None,
                    self._existing_ok(existing_terms, future) if existing_terms else None)
            self._verdicts[key] = verdict
        return verdict

    def _affinity_reach(self, terms: tuple[PodAffinityTerm, ...], pod: Pod) -> np.ndarray:
        """An upper bound of :meth:`_affinity_ok` over any evictions: evicting only removes matching pods."""
        ok = self._affinity_ok(terms, pod, False)
        if all_match(terms, pod, self.ns_labels):
            has_all = np.ones(self.count, dtype=bool)
            for term in terms:
                has_all &= self.domains(term.topology_key)[1]
            ok = ok | has_all
        return ok

    def _affinity_ok(self, terms: tuple[PodAffinityTerm, ...], pod: Pod, future: bool) -> np.ndarray:
        """Every term's domain holds a pod matching all terms; or, when no pod anywhere does (in a domain of a
        term's key), the pod matches its own terms (the first of a group affine to itself) and the node has every
        key."""
        matched = self._matched(terms, future)
        exist = np.ones(self.count, dtype=bool)
        has_all = np.ones(self.count, dtype=bool)
        anywhere = False
        for term in terms:
            _, has, _ = self.domains(term.topology_key)
            in_dom = self.in_domain(term.topology_key, matched)
            exist &= in_dom > 0
            has_all &= has
            anywhere = anywhere or bool(matched[has].any())
        if not anywhere and all_match(terms, pod, self.ns_labels):
            return has_all
        return exist

    def _anti_ok(self, terms: tuple[PodAffinityTerm, ...], future: bool) -> np.ndarray:
        ok = np.ones(self.count, dtype=bool)
        for term in terms:
            ok &= self.in_domain(term.topology_key, self._matched((term,), future)) == 0
        return ok

    def _existing_ok(self, terms: list[PodAffinityTerm], future: bool) -> np.ndarray:
        ok = np.ones(self.count, dtype=bool)
        for term in terms:
            ok &= self.in_domain(term.topology_key, self._carriers(term, future)) == 0
        return ok

    # -- the score ----------------------------------------------------------------------
    def scores_matter(self, pod: Pod) -> bool:
        """Could ``pod`` get a non-zero affinity score (its preferred terms, or placed pods' preferred terms)?"""
        if not self.active:
            return False
        aff = pod.pod_affinity
        return (aff is not None and bool(aff.preferred or aff.anti_preferred)) \
            or bool(self._carried["preferred"]) or bool(self._carried["anti_preferred"])

    def raw_score(self, pod: Pod) -> np.ndarray | None:
        """kube-scheduler's InterPodAffinity score before normalising: per node, the weights of the pod's
        preferred terms times the matching pods in the node's domain (anti-affinity negative), plus the weights
        of placed pods' preferred terms matching the pod, per carrier in the node's domain.  Existing pods'
        required affinity adds nothing (Volcano runs the plugin with HardPodAffinityWeight 0).  None: all 0."""
        if not self.scores_matter(pod):
            return None
        key = (pod.pod_affinity, pod.namespace, tuple(sorted(pod.labels.items())), self.version)
        if key in self._scores:
            return self._scores[key]
        if len(self._scores) > 256:
            self._scores.clear()
        per_node = np.zeros(self.count)
        touched: dict[str, np.ndarray] = {}  # topology key -> weighted counts per node, summed before bincount

        def add(term: PodAffinityTerm, counts: np.ndarray, sign: int) -> None:
            acc = touched.get(term.topology_key)
            if acc is None:
                acc = touched[term.topology_key] = np.zeros(self.count)
            acc += sign * term.weight * counts

        aff = pod.pod_affinity
        if aff is not None:
            for term in aff.preferred:
                add(term, self._matched((term,)), +1)
            for term in aff.anti_preferred:
                add(term, self._matched((term,)), -1)
        for kind, sign in (("preferred", +1), ("anti_preferred", -1)):
            for term, carriers in self._carried[kind].items():
                if term_matches(term, pod, self.ns_labels):
                    add(term, carriers, sign)
        for topology_key, acc in touched.items():
            per_node += self.in_domain(topology_key, acc)
        result = per_node if touched else None
        self._scores[key] = result
        return result


def normalized(raw: np.ndarray) -> np.ndarray:
    """kube-scheduler's InterPodAffinity NormalizeScore: 0-100 from the lowest to the highest, truncated; all 0
    when every node scores alike.  Over every node (kube-scheduler: over the nodes that passed the filters), so
    that a node's score depends on that node and the placements alone."""
    low, high = raw.min(), raw.max()
    if high <= low:
        return np.zeros(raw.size)
    return np.floor(100.0 * (raw - low) / (high - low))

