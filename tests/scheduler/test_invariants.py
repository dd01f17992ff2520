"""Property tests: on random clusters and workloads the scheduler never breaks its promises.

Whatever the mix of nodes, taints, selectors, queues, capabilities, gangs,
priorities and pods already running, after the scheduler settles:

* no node holds more than its allocatable of any resource (pods included);
* every pod placed by the scheduler passes its node's predicates;
* a gang is never newly placed below its minMember, and never evicted below it;
* no queue's capability is exceeded by what the scheduler placed;
* critical pods are never evicted, and evictions only hit lower priority (preempt; or, where drf decides in a
  later tier what priority refuses, as in Volcano, any job of the queue) or other queues (reclaim);
* every pod left pending carries a reason.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.api.objects import Node, Pod, PodGroup, Queue, Taint, Toleration
from scheduler.cluster.cache import ClusterCache
from scheduler.cycle import Scheduler
from scheduler.framework.config import default_config, parse_config
from tests.support.worlds import check_no_node_over, first_fit, seeded_cache

AT = datetime(2026, 1, 1, tzinfo=UTC)
GI = 2**30
CAPACITY_CONFIG = """
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: capacity}, {name: nodeorder}, {name: binpack}]
"""


@st.composite
def clusters(draw):
    nodes = []
    for i in range(draw(st.integers(1, 6))):
        taints = (Taint("gpu", "true", "NoSchedule"),) if draw(st.booleans()) and i % 3 == 0 else ()
        nodes.append(Node(name=f"n{i}", labels={"zone": draw(st.sampled_from("ab"))}, taints=taints,
                          unschedulable=draw(st.integers(0, 9)) == 0,
                          allocatable={"cpu": draw(st.integers(1, 8)) * 1000, "memory": draw(st.integers(1, 8)) * GI,
                                       "pods": draw(st.integers(2, 10))}))
    queues = []
    for q in range(draw(st.integers(1, 3))):
        cap = {"cpu": draw(st.integers(1, 12)) * 1000} if draw(st.booleans()) else {}
        deserved = {"cpu": draw(st.integers(0, 8)) * 1000} if draw(st.booleans()) else {}
        queues.append(Queue(name=f"q{q}", weight=draw(st.integers(1, 4)), capability=cap, deserved=deserved,
                            reclaimable=draw(st.booleans())))
    groups, pods = [], []
    used = {n.name: defaultdict(int) for n in nodes}
    for j in range(draw(st.integers(1, 8))):
        size = draw(st.integers(1, 4))
        group = PodGroup(namespace="ns", name=f"j{j}", queue=draw(st.sampled_from(queues)).name,
                         min_member=draw(st.integers(1, size)), created=AT,
                         priority_class_name=draw(st.sampled_from(["", "low", "high"])))
        groups.append(group)
        cpu = draw(st.sampled_from([0, 500, 1000, 2000]))
        mem = draw(st.sampled_from([0, GI // 2, GI]))
        selector = {"zone": draw(st.sampled_from("ab"))} if draw(st.integers(0, 3)) == 0 else {}
        tolerate = draw(st.booleans())
        critical = draw(st.integers(0, 9)) == 0
        bound_all = draw(st.integers(0, 3)) == 0
        for k in range(size):
            node = first_fit(nodes, used, cpu, mem) if bound_all else ""  # pre-existing running pods, where they fit
            pods.append(Pod(namespace="kube-system" if critical else "ns", name=f"j{j}-{k}",
                            uid=f"j{j}-{k}", requests={"cpu": cpu, "memory": mem},
                            annotations={"scheduling.k8s.io/group-name": f"j{j}"} if not critical else {},
                            node_selector=dict(selector), created=AT, node_name=node,
                            phase="Running" if node else "Pending",
                            tolerations=(Toleration("gpu", "Exists", "", "NoSchedule"),) if tolerate else ()))
    return nodes, queues, groups, pods


def run(nodes, queues, groups, pods, config):
    cache = seeded_cache(*queues, *nodes, *groups, *pods)
    before = {p.uid: p.node_name for p in pods}
    sched = Scheduler(cache, config=config, clock=lambda: AT)
    for _ in range(20):
        if not sched.run_once().changed:
            break
    return cache, before


def check_invariants(cache: ClusterCache, before: dict[str, str], capacity: bool, *, by_priority: bool = True) -> None:
    nodes = cache.nodes
    check_no_node_over(cache)
    for pod in cache.pods.values():
        if pod.node_name and not before[pod.uid]:  # placed by the scheduler
            node = nodes[pod.node_name]
            assert not node.unschedulable, f"{pod.key} placed on cordoned {node.name}"
            for key, value in pod.node_selector.items():
                assert node.labels.get(key) == value, f"{pod.key} placed against its nodeSelector"
            for taint in node.taints:
                assert any(t.tolerates(taint) for t in pod.tolerations), f"{pod.key} placed on untolerated taint"
        if not pod.node_name and not pod.evicted:
            assert pod.reason, f"pending pod {pod.key} has no reason"
        if pod.evicted:
            assert not pod.critical, f"critical pod {pod.key} evicted"
            check_eviction(cache, pod, by_priority)
    by_group: dict[str, list[Pod]] = defaultdict(list)
    for pod in cache.pods.values():
        if pod.group_name:
            by_group[pod.group_name].append(pod)
    for group in cache.podgroups.values():
        members = by_group[group.name]
        bound = sum(1 for p in members if p.node_name and p.active)
        newly = sum(1 for p in members if p.node_name and p.active and not before[p.uid])
        evicted = sum(1 for p in members if p.evicted)
        if newly:
            assert bound >= group.min_member, f"gang {group.key} placed {bound} < minMember {group.min_member}"
        if evicted and group.min_member > 1:
            assert bound >= group.min_member, f"gang {group.key} evicted below minMember"
    if not capacity:
        return
    per_queue: dict[str, int] = defaultdict(int)
    grew: set[str] = set()
    for pod in cache.pods.values():
        if pod.node_name and pod.active:
            queue = cache.job_of(pod).queue
            per_queue[queue] += pod.requests.get("cpu", 0)
            if not before[pod.uid] and pod.requests.get("cpu", 0) > 0:
                grew.add(queue)
    for queue in grew:
        cap = cache.queues[queue].capability.get("cpu")
        if cap is not None:
            assert per_queue[queue] <= cap, f"queue {queue} over its capability"


def job_priority(cache: ClusterCache, pod: Pod) -> int:
    ref = cache.job_of(pod)
    if ref.group is not None and ref.group.priority_class_name:
        return cache.class_priority(ref.group.priority_class_name)
    members = [p for p in cache.pods.values() if cache.job_of(p).uid == ref.uid]
    return max(cache.pod_priority(p) for p in members)


def check_eviction(cache: ClusterCache, victim: Pod, by_priority: bool = True) -> None:
    """A victim made room for a placed pod of higher priority (preempt) or of another queue (reclaim).

    With drf's victim hook enabled in a later tier than priority, the first tier with victims decides
    (Volcano's rule): where priority offers none, drf may pick a job of equal or higher priority by share.
    """
    reason = victim.reason or ""
    by_key = {p.key: p for p in cache.pods.values()}
    if reason.startswith("Evicted: preempted by "):
        winner = by_key[reason.split()[3]]
        assert cache.job_of(winner).queue == cache.job_of(victim).queue, f"{victim.key} preempted across queues"
        assert not by_priority or job_priority(cache, winner) > job_priority(cache, victim), \
            f"{victim.key} preempted by no higher priority"
    elif reason.startswith("Evicted: reclaimed by queue "):
        winner = by_key[reason.split()[-1]]
        assert cache.job_of(winner).queue != cache.job_of(victim).queue, f"{victim.key} reclaimed by its own queue"
        assert cache.queues[cache.job_of(victim).queue].reclaimable, f"{victim.key} reclaimed from unreclaimable queue"
    else:
        raise AssertionError(f"{victim.key} evicted for an unknown reason: {reason!r}")
    # The winner ran: it is bound now, or it ran and was itself evicted later (only running pods are victims).
    ran = (winner.node_name and winner.active) or winner.evicted
    assert ran, f"{victim.key} evicted for {winner.key}, which did not run"


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(clusters())
def test_invariants_with_proportion(world) -> None:
    cache, before = run(*world, default_config())
    check_invariants(cache, before, capacity=True)


@SETTINGS
@given(clusters())
def test_invariants_with_capacity(world) -> None:
    cache, before = run(*world, parse_config(CAPACITY_CONFIG))
    check_invariants(cache, before, capacity=True, by_priority=False)


DRF_CONFIG = """
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}, {name: sla, arguments: {sla-waiting-time: 1m}}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion}, {name: binpack}]
"""


@SETTINGS
@given(clusters())
def test_invariants_with_drf_preemption_and_sla(world) -> None:
    cache, before = run(*world, parse_config(DRF_CONFIG))
    check_invariants(cache, before, capacity=True, by_priority=False)
