"""What the property tests' drawn clusters share (tests/scheduler/test_invariants.py,
tests/scheduler/actions/test_properties.py): running pods put only where they fit, the cache they start
from, and the check that no node holds more than it has."""

from __future__ import annotations

from collections import defaultdict

from scheduler.api.objects import Namespace, Node, Pod, PodGroup, PriorityClass, Queue
from scheduler.cluster.cache import ClusterCache


def first_fit(nodes: list[Node], used: dict[str, dict[str, int]], cpu: int, memory: int) -> str:
    """The first node with room for a pod of ``cpu`` and ``memory`` (and a pod slot) beyond ``used``, which
    it is then charged to; "" when none has."""
    for n in nodes:
        u = used[n.name]
        if (u["cpu"] + cpu <= n.allocatable["cpu"] and u["memory"] + memory <= n.allocatable["memory"]
                and u["pods"] + 1 <= n.allocatable["pods"]):
            u["cpu"] += cpu
            u["memory"] += memory
            u["pods"] += 1
            return n.name
    return ""


def seeded_cache(*objects: Node | Pod | PodGroup | Queue | PriorityClass | Namespace) -> ClusterCache:
    """A cache holding the priority classes ``low`` (10) and ``high`` (1000), then ``objects`` in order."""
    cache = ClusterCache()
    cache.upsert(PriorityClass("low", 10))
    cache.upsert(PriorityClass("high", 1000))
    for obj in objects:
        cache.upsert(obj)
    return cache


def check_no_node_over(cache: ClusterCache) -> None:
    """No node's active pods request more of a resource (pods counted as ``pods``) than it has allocatable."""
    held: dict[str, dict[str, int]] = {name: defaultdict(int) for name in cache.nodes}
    for pod in cache.pods.values():
        if pod.node_name and pod.active:
            for res, amount in pod.requests.items():
                held[pod.node_name][res] += amount
            held[pod.node_name]["pods"] += 1
    for name, amounts in held.items():
        for res, amount in amounts.items():
            assert amount <= cache.nodes[name].allocatable.get(res, 0), f"node {name} over-committed on {res}"
