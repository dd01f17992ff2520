"""Plugin hooks, one table per plugin: scores, shares, votes and victims."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from scheduler.api.objects import Queue
from scheduler.framework.config import SchedulerConfig, parse_config
from scheduler.framework.plugin import VoteKind
from scheduler.framework.resources import ResourceIndex
from scheduler.framework.snapshot import QueueInfo
from scheduler.plugins.proportion import QueueAttr, water_fill
from tests.support.builders import node, pod, podgroup, priority_class, queue
from tests.support.sessions import AT, config_with, open_session, task

GI = 2**30


def one_plugin(name: str, arguments: str = "") -> object:
    args = f"\n    arguments: {{{arguments}}}" if arguments else ""
    return parse_config(f'actions: "allocate"\ntiers:\n- plugins:\n  - name: {name}{args}\n')


def scores(ssn, plugin: str, key: str) -> dict[str, float]:
    t = task(ssn, key)
    cand = np.arange(ssn.nodes.count)
    return dict(zip(ssn.nodes.names, ssn.plugins[plugin].node_order(t, cand), strict=True))


# -- nodeorder ------------------------------------------------------------------------------------
TWO_NODES = [node("empty", cpu=4, memory="8Gi"), node("half", cpu=4, memory="8Gi"),
             pod("filler", cpu="2", memory="4Gi", nodeName="half")]


@pytest.mark.parametrize("arguments,prefer", [
    ("leastrequested.weight: 1, balancedresource.weight: 0", "empty"),
    ("leastrequested.weight: 0, mostrequested.weight: 1, balancedresource.weight: 0", "half"),
], ids=["least requested spreads", "most requested packs"])
def test_nodeorder_requested(arguments: str, prefer: str) -> None:
    ssn = open_session(TWO_NODES + [pod("p", cpu="1", memory="2Gi")], one_plugin("nodeorder", arguments))
    s = scores(ssn, "nodeorder", "default/p")
    assert max(s, key=s.get) == prefer


def test_nodeorder_least_requested_value() -> None:
    ssn = open_session(TWO_NODES + [pod("p", cpu="1", memory="2Gi")],
                       one_plugin("nodeorder", "leastrequested.weight: 2, balancedresource.weight: 0"))
    s = scores(ssn, "nodeorder", "default/p")
    assert s["empty"] == pytest.approx(2 * 75.0)  # after placing: 3/4 cpu and 6/8 memory free
    assert s["half"] == pytest.approx(2 * 25.0)


def test_nodeorder_balanced_resource() -> None:
    nodes = [node("cpu-heavy", cpu=4, memory="8Gi"), node("even", cpu=4, memory="8Gi"),
             pod("hog", cpu="3", memory="1Gi", nodeName="cpu-heavy")]
    ssn = open_session(nodes + [pod("p", cpu="1", memory="2Gi")],
                       one_plugin("nodeorder", "leastrequested.weight: 0, balancedresource.weight: 1"))
    s = scores(ssn, "nodeorder", "default/p")
    assert s["even"] == pytest.approx(100 - abs(0.25 - 0.25) * 50)
    assert s["cpu-heavy"] == pytest.approx(100 - abs(1.0 - 0.375) * 50)


def test_nodeorder_preferred_affinity_and_soft_taints() -> None:
    nodes = [node("plain", labels={"disk": "hdd"}), node("ssd", labels={"disk": "ssd"}),
             node("spot", labels={"disk": "ssd"}, taints=["spot=yes:PreferNoSchedule"])]
    pref = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 50, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}
    ssn = open_session(nodes + [pod("p", affinity=pref)],
                       one_plugin("nodeorder", "leastrequested.weight: 0, balancedresource.weight: 0"))
    s = scores(ssn, "nodeorder", "default/p")
    assert s == {"plain": 100.0, "ssd": 200.0, "spot": 100.0}  # affinity 0/100/100 + taint 100/100/0


def test_nodeorder_ignored_weights_warn(caplog) -> None:
    config = one_plugin("nodeorder", "podaffinity.weight: 2, imagelocality.weight: 1")
    assert config.plugin("nodeorder").args.warnings


# -- binpack --------------------------------------------------------------------------------------
def test_binpack_score_formula() -> None:
    nodes = [node("n1", cpu=4, memory="8Gi", extra={"nvidia.com/gpu": 4}),
             pod("used", cpu="2", memory="2Gi", extra={"nvidia.com/gpu": 2}, nodeName="n1")]
    ssn = open_session(nodes + [pod("p", cpu="1", memory="2Gi", extra={"nvidia.com/gpu": 1})],
                       one_plugin("binpack", "binpack.weight: 2, binpack.cpu: 1, binpack.memory: 3, "
                                             "binpack.resources: nvidia.com/gpu, binpack.resources.nvidia.com/gpu: 4"))
    s = scores(ssn, "binpack", "default/p")
    expected = (1 * 3 / 4 + 3 * 4 / 8 + 4 * 3 / 4) / (1 + 3 + 4) * 100 * 2
    assert s["n1"] == pytest.approx(expected)


def test_binpack_prefers_the_fuller_node() -> None:
    ssn = open_session(TWO_NODES + [pod("p", cpu="1", memory="1Gi")], one_plugin("binpack"))
    s = scores(ssn, "binpack", "default/p")
    assert s["half"] > s["empty"]


def test_binpack_weight_for_unlisted_resource_is_refused() -> None:
    with pytest.raises(ValueError, match="not listed in binpack.resources"):
        one_plugin("binpack", "binpack.resources.example.com/foo: 2")


# -- proportion: water-filling --------------------------------------------------------------------
def attr(index: ResourceIndex, name: str, weight: int, request: float, capability: float | None = None,
         guarantee: float = 0.0) -> QueueAttr:
    q = QueueInfo(Queue(name, weight=weight, capability={"cpu": capability} if capability else {},
                        guarantee={"cpu": guarantee} if guarantee else {}), index)
    total = index.vector({"cpu": 100})
    a = QueueAttr(q, total, index.zeros())
    a.request = index.vector({"cpu": request}).copy()
    return a


WATER = [
    ("weights 1:3, both hungry", [("a", 1, 1000, None, 0), ("b", 3, 1000, None, 0)], [25, 75]),
    ("a small request is met, the rest flows on", [("a", 1, 10, None, 0), ("b", 1, 1000, None, 0)], [10, 90]),
    ("capability caps the share", [("a", 3, 1000, 20, 0), ("b", 1, 1000, None, 0)], [20, 80]),
    ("guarantee is a floor", [("a", 1, 1000, None, 40), ("b", 9, 1000, None, 0)], [40, 60]),
    ("nobody asks", [("a", 1, 0, None, 0), ("b", 1, 0, None, 0)], [0, 0]),
    ("guarantees beyond the total are kept", [("a", 1, 1000, None, 70), ("b", 1, 1000, None, 70)], [70, 70]),
    ("an idle guarantee is still reserved", [("a", 1, 0, None, 30), ("b", 1, 1000, None, 0)], [30, 70]),
    ("three queues 1:1:2", [("a", 1, 1000, None, 0), ("b", 1, 1000, None, 0), ("c", 2, 1000, None, 0)],
     [25, 25, 50]),
]


@pytest.mark.parametrize("queues,expected", [c[1:] for c in WATER], ids=[c[0] for c in WATER])
def test_water_fill(queues, expected) -> None:
    index = ResourceIndex()
    attrs = [attr(index, *q) for q in queues]
    water_fill(attrs, index.vector({"cpu": 100}), index.share_mask)
    assert [round(a.deserved[0], 6) for a in attrs] == expected


def test_proportion_overused_and_allocatable() -> None:
    objs = [node("n1", cpu=8, memory="64Gi"), queue("a", 1), queue("b", 1),
            *[pod(f"a{i}", queue="a", cpu="1", memory=None, nodeName="n1") for i in range(4)],
            pod("a-new", queue="a", cpu="1", memory=None), pod("b-new", queue="b", cpu="4", memory=None),
            pod("b-more", queue="b", cpu="4", memory=None)]
    ssn = open_session(objs, config_with("proportion"))
    qa, qb = ssn.queues["a"], ssn.queues["b"]
    plugin = ssn.plugins["proportion"]
    assert plugin.attrs["a"].deserved[0] == pytest.approx(4000)
    assert ssn.overused(qa) and "deserved share" in ssn.overused(qa)
    assert ssn.overused(qb) is None
    assert "would exceed its deserved share" in ssn.allocatable(qa, task(ssn, "default/a-new"))
    assert ssn.compare_queues(qb, qa) < 0  # the emptier queue goes first


def test_proportion_enqueue_capability_vote() -> None:
    objs = [node("n1", cpu=16, memory="64Gi"), queue("q", capability={"cpu": "4"}),
            podgroup("small", queue="q", minResources={"cpu": "3"}), podgroup("large", queue="q", minResources={"cpu": "5"})]
    ssn = open_session(objs, config_with("proportion"))
    assert ssn.job_enqueueable(ssn.jobs["default/small"]).kind == VoteKind.PERMIT
    ssn.job_enqueued(ssn.jobs["default/small"])
    vote = ssn.job_enqueueable(ssn.jobs["default/large"])
    assert vote.kind == VoteKind.REJECT and "capability exceeded" in vote.reason


# -- gang, priority, conformance, drf: victims ----------------------------------------------------
def victims_world(min_member: int, running: int):
    return [node("n1", cpu=8, memory="64Gi"), priority_class("low", 1), priority_class("high", 100),
            podgroup("victim", minMember=min_member, priorityClassName="low"),
            *[pod(f"v{i}", group="victim", cpu="1", nodeName="n1", priorityClassName="low") for i in range(running)],
            podgroup("urgent", minMember=1, priorityClassName="high"),
            pod("u", group="urgent", cpu="1", priorityClassName="high")]


@pytest.mark.parametrize("min_member,running,allowed", [
    (3, 5, 2), (5, 5, 0), (1, 3, 3), (2, 2, 0),
], ids=["two above min", "at min", "min 1 may go entirely", "gang of 2 at min"])
def test_gang_keeps_min_member(min_member: int, running: int, allowed: int) -> None:
    ssn = open_session(victims_world(min_member, running), config_with("gang"))
    candidates = list(ssn.jobs["default/victim"].tasks.values())
    assert len(ssn.preemptable(task(ssn, "default/u"), candidates)) == allowed


def test_priority_victims_are_lower_priority_jobs_only() -> None:
    objs = victims_world(1, 2) + [podgroup("peer", priorityClassName="high"),
                                  pod("peer-0", group="peer", cpu="1", nodeName="n1", priorityClassName="high")]
    ssn = open_session(objs, config_with("priority"))
    candidates = [task(ssn, "default/v0"), task(ssn, "default/peer-0")]
    assert [t.pod.name for t in ssn.preemptable(task(ssn, "default/u"), candidates)] == ["v0"]


def test_conformance_spares_critical_pods() -> None:
    objs = [node("n1"), pod("dns", namespace="kube-system", nodeName="n1"),
            pod("critical", priorityClassName="system-node-critical", nodeName="n1"),
            pod("normal", nodeName="n1"), pod("p")]
    ssn = open_session(objs, config_with("conformance"))
    candidates = [task(ssn, k) for k in ("kube-system/dns", "default/critical", "default/normal")]
    assert [t.pod.name for t in ssn.preemptable(task(ssn, "default/p"), candidates)] == ["normal"]
    assert [t.pod.name for t in ssn.reclaimable(task(ssn, "default/p"), candidates)] == ["normal"]


def tiers(*groups: str) -> SchedulerConfig:
    """A preempt config with one tier per group of comma-separated plugin names."""
    lines = "".join("- plugins: [" + ", ".join("{name: " + n + "}" for n in g.split(",")) + "]\n" for g in groups)
    return parse_config('actions: "preempt"\ntiers:\n' + lines)


def victim_names(ssn, preemptor: str, *candidates: str) -> list[str]:
    return [t.pod.name for t in ssn.preemptable(task(ssn, preemptor), [task(ssn, c) for c in candidates])]


def test_the_first_tier_with_victims_decides() -> None:
    """Volcano's session_plugins.go Preemptable: conformance (tier 1) offers v0, so drf (tier 2), which would
    refuse it (taking v0's only pod leaves its job a smaller share than the preemptor's), is not asked; in one
    tier their answers are intersected."""
    objs = victims_world(1, 1)
    assert victim_names(open_session(objs, tiers("conformance", "drf")), "default/u", "default/v0") == ["v0"]
    assert victim_names(open_session(objs, tiers("conformance,drf")), "default/u", "default/v0") == []


def test_a_tier_with_no_victims_hands_over_to_the_next() -> None:
    """Priority (tier 1) refuses a job of equal priority, so drf (tier 2) decides by share (Volcano's
    TestUnifiedEvictable_EmptyCandidatesBlocksTier: an empty answer passes to the next tier); with both in one
    tier, priority's empty answer ends it."""
    objs = victims_world(1, 0) + [podgroup("peer", priorityClassName="high"),
                                  *[pod(f"peer-{i}", group="peer", cpu="1", nodeName="n1", priorityClassName="high")
                                    for i in range(3)]]
    assert victim_names(open_session(objs, tiers("priority", "drf")), "default/u", "default/peer-0") == ["peer-0"]
    assert victim_names(open_session(objs, tiers("priority,drf")), "default/u", "default/peer-0") == []


@pytest.mark.parametrize("running,expected", [(3, []), (4, ["v0"])], ids=["at minMember", "one above"])
def test_gang_refusal_holds_in_every_tier(running: int, expected: list[str]) -> None:
    """Unlike Volcano's fall-through, drf in tier 2 cannot take a gang below minMember once gang refused."""
    ssn = open_session(victims_world(3, running), tiers("gang", "drf"))
    assert victim_names(ssn, "default/u", "default/v0") == expected
    assert ssn.evictable(task(ssn, "default/v0"), "preemptable") == bool(expected)


def test_gang_counts_the_victims_a_later_tier_chose() -> None:
    """Priority (tier 1) refuses a job of equal priority and drf (tier 2) would take four of its five pods; gang
    still lets only two go, so the job keeps its minMember of 3."""
    objs = victims_world(1, 0) + [podgroup("peer", minMember=3, priorityClassName="high"),
                                  *[pod(f"peer-{i}", group="peer", cpu="1", nodeName="n1", priorityClassName="high")
                                    for i in range(5)]]
    candidates = [f"default/peer-{i}" for i in range(5)]
    assert len(victim_names(open_session(objs, tiers("priority", "drf")), "default/u", *candidates)) == 4
    assert victim_names(open_session(objs, tiers("priority,gang", "drf")), "default/u", *candidates) == [
        "peer-0", "peer-1"]


def test_conformance_refusal_holds_in_every_tier() -> None:
    objs = victims_world(1, 0) + [podgroup("sys", namespace="kube-system"),
                                  *[pod(f"sys-{i}", namespace="kube-system", group="sys", cpu="1", nodeName="n1")
                                    for i in range(3)]]
    ssn = open_session(objs, tiers("conformance", "drf"))
    assert victim_names(ssn, "default/u", "kube-system/sys-0") == []
    ssn = open_session(objs, tiers("drf"))
    assert victim_names(ssn, "default/u", "kube-system/sys-0") == ["sys-0"]  # drf alone would take it


def test_no_opinion_means_no_victims() -> None:
    ssn = open_session(victims_world(1, 2), config_with("predicates"))
    assert ssn.preemptable(task(ssn, "default/u"), list(ssn.jobs["default/victim"].tasks.values())) == []


def test_drf_orders_by_dominant_share_and_guards_preemption() -> None:
    objs = [node("n1", cpu=10, memory="10Gi"),
            podgroup("rich"), *[pod(f"r{i}", group="rich", cpu="2", memory="1Gi", nodeName="n1") for i in range(3)],
            podgroup("poor"), pod("p0", group="poor", cpu="1", memory="1Gi", nodeName="n1"),
            pod("p-new", group="poor", cpu="1", memory="1Gi")]
    ssn = open_session(objs, config_with("drf"))
    rich, poor = ssn.jobs["default/rich"], ssn.jobs["default/poor"]
    assert ssn.compare_jobs(poor, rich) < 0
    victims = ssn.preemptable(task(ssn, "default/p-new"), [task(ssn, "default/r0"), task(ssn, "default/p0")])
    assert [t.pod.name for t in victims] == ["r0"]  # taking from itself would never lower a share


# -- sla and overcommit ---------------------------------------------------------------------------
def test_sla_orders_by_deadline_and_permits_overdue() -> None:
    old = (AT - timedelta(hours=3)).isoformat()
    new = (AT - timedelta(minutes=5)).isoformat()
    objs = [podgroup("fresh", creationTimestamp=new, minResources={"cpu": "1"}),
            podgroup("overdue", creationTimestamp=old, minResources={"cpu": "1"}),
            podgroup("custom", creationTimestamp=new, annotations={"sla-waiting-time": "1m"},
                     minResources={"cpu": "1"}),
            podgroup("none", creationTimestamp=old)]
    ssn = open_session(objs, one_plugin("sla", "sla-waiting-time: 1h"))
    j = ssn.jobs
    assert ssn.compare_jobs(j["default/overdue"], j["default/fresh"]) < 0
    assert ssn.compare_jobs(j["default/custom"], j["default/fresh"]) < 0  # deadline 1m after creation
    plugin = ssn.plugins["sla"]
    assert plugin.job_enqueueable(j["default/overdue"]).kind == VoteKind.PERMIT
    assert plugin.job_enqueueable(j["default/custom"]).kind == VoteKind.PERMIT
    assert plugin.job_enqueueable(j["default/fresh"]).kind == VoteKind.ABSTAIN


def test_overcommit_admits_up_to_factor() -> None:
    objs = [node("n1", cpu=10, memory="100Gi"), pod("busy", cpu="6", nodeName="n1"),
            podgroup("a", minResources={"cpu": "5"}), podgroup("b", minResources={"cpu": "2"})]
    ssn = open_session(objs, one_plugin("overcommit", "overcommit-factor: 1.2"))
    assert ssn.job_enqueueable(ssn.jobs["default/a"]).kind == VoteKind.PERMIT  # 12 - 6 = 6 >= 5
    ssn.job_enqueued(ssn.jobs["default/a"])
    vote = ssn.job_enqueueable(ssn.jobs["default/b"])  # 1 left < 2
    assert vote.kind == VoteKind.REJECT and "overcommit-factor 1.2" in vote.reason


# -- capacity ---------------------------------------------------------------------------------------
HIER = parse_config('actions: "allocate"\ntiers:\n- plugins:\n  - {name: capacity, enableHierarchy: true}\n')


def test_capacity_inherits_and_clamps_limits() -> None:
    objs = [node("n1", cpu=32, memory="128Gi"), queue("parent", capability={"cpu": "10"}),
            queue("child", parent="parent"), queue("greedy", parent="parent", capability={"cpu": "20"})]
    ssn = open_session(objs, HIER)
    attrs = ssn.plugins["capacity"].attrs
    cpu = ssn.index.column["cpu"]
    assert attrs["child"].capability[cpu] == 10000
    assert attrs["greedy"].capability[cpu] == 10000
    assert attrs["root"].capability[cpu] == 32000


def test_capacity_refuses_guarantees_beyond_the_parent() -> None:
    objs = [node("n1", cpu=32, memory="128Gi"), queue("parent", guarantee={"cpu": "4"}),
            queue("a", parent="parent", guarantee={"cpu": "3"}), queue("b", parent="parent", guarantee={"cpu": "3"}),
            pod("p", queue="a")]
    ssn = open_session(objs, HIER)
    reason = ssn.allocatable(ssn.queues["a"], task(ssn, "default/p"))
    assert reason and "children of queue parent guarantee cpu 6" in reason


@pytest.mark.parametrize("min_member,running,evictable", [(3, 5, True), (3, 3, False), (1, 1, True)],
                         ids=["above min", "at min", "plain pod"])
def test_gang_evictable_prefilter(min_member: int, running: int, evictable: bool) -> None:
    ssn = open_session(victims_world(min_member, running), config_with("gang", "conformance"))
    assert ssn.evictable(task(ssn, "default/v0"), "preemptable") is evictable


def test_evictable_ignores_plugins_whose_victim_hook_is_off() -> None:
    config = parse_config('actions: "preempt"\ntiers:\n- plugins:\n  - {name: gang, enablePreemptable: false}\n'
                          '  - {name: priority}\n')
    ssn = open_session(victims_world(3, 3), config)
    assert ssn.evictable(task(ssn, "default/v0"), "preemptable") is True
    assert ssn.evictable(task(ssn, "default/v0"), "reclaimable") is False


def test_conformance_evictable() -> None:
    ssn = open_session([node("n1"), pod("dns", namespace="kube-system", nodeName="n1"), pod("web", nodeName="n1")],
                       config_with("conformance"))
    assert not ssn.evictable(task(ssn, "kube-system/dns"), "reclaimable")
    assert ssn.evictable(task(ssn, "default/web"), "reclaimable")


def test_sla_absurd_annotation_is_ignored_not_fatal() -> None:
    objs = [podgroup("odd", creationTimestamp=AT.isoformat(), annotations={"sla-waiting-time": "99999999h"})]
    ssn = open_session(objs, one_plugin("sla", "sla-waiting-time: 1h"))
    assert ssn.plugins["sla"].deadlines["default/odd"] == AT + timedelta(hours=1)  # fell back to the argument


def test_sla_absurd_argument_is_refused() -> None:
    with pytest.raises(ValueError, match="longer than 100 years"):
        one_plugin("sla", "sla-waiting-time: 99999999h")
