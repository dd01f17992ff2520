"""task-topology, nodegroup, resource-strategy-fit and cdp: Volcano's plugins, with its unit cases ported.

A case ported from Volcano names its Go file, test function and case; the
placement cases (objects in, binds out) are data under
``tests/fixtures/volcano/plugins/`` and run by ``test_volcano_conformance.py``.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
import yaml

from scheduler.actions.allocate import Allocate
from scheduler.actions.enqueue import Enqueue
from scheduler.api.manifests import ManifestError, parse_object
from scheduler.cluster.effects import CacheEffects
from scheduler.framework.config import ConfigError, parse_config
from scheduler.framework.keeper import take_snapshot
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement
from scheduler.plugins import cdp as cdp_module
from scheduler.plugins.resourcefit import LEAST, MOST, Strategy, match
from scheduler.plugins.tasktopology import Topology, TopologyError
from tests.support.builders import node, pod, podgroup, queue
from tests.support.sessions import AT, cache_of, open_session, task

GI = 2**30


def config(name: str, arguments: dict | None = None, *, flags: str = "", extra: str = "") -> object:
    args = f"\n    arguments: {json.dumps(arguments)}" if arguments is not None else ""
    return parse_config(f'actions: "allocate, preempt"\ntiers:\n- plugins:\n  - name: {name}{flags}{args}\n{extra}')


def scores(ssn, plugin: str, key: str) -> dict[str, float]:
    out = ssn.plugins[plugin].node_order(task(ssn, key), None)
    return dict(zip(ssn.nodes.names, out if out is not None else np.zeros(ssn.nodes.count), strict=True))


def admitted(ssn, plugin: str, key: str, avail=None) -> dict[str, bool]:
    mask = ssn.plugins[plugin].predicate(task(ssn, key), avail)
    return dict(zip(ssn.nodes.names, (bool(m) for m in mask), strict=True))


# == cdp ===========================================================================================
@pytest.mark.parametrize("text,seconds", [
    ("600s", 600.0), ("10m", 600.0), ("1h30m", 5400.0), ("1.5h", 5400.0), ("300ms", 0.3), ("0", 0.0),
    ("-5s", -5.0), ("600abcde", None), ("600", None), ("", None), ("s", None), ("1d", None),
])
def test_cdp_reads_go_durations(text: str, seconds: float | None) -> None:
    # Test_CooldownTimePlugin_podPreemptStableTime (cdp_test.go): "normal" 600s, "not-enabled" 600abcde
    got = cdp_module.go_duration(text)
    assert got == (pytest.approx(seconds) if seconds is not None else None)


def _running(name: str, *, age_s: float, labels: dict | None = None, annotations: dict | None = None) -> dict:
    doc = pod(name, cpu="1", nodeName="n1", annotations=annotations,
              creationTimestamp=(AT - timedelta(seconds=age_s)).isoformat())
    if labels:
        doc["metadata"]["labels"] = labels
    return doc


def test_cdp_preemptable_leaves_out_pods_in_their_cooldown() -> None:
    # cdp_test.go TestPreemptableFn: task1 (600s, scheduled 100s ago) is protected; task2 (a cool-down that is
    # not a duration) and task3 (600s, scheduled 800s ago) are victims
    objs = [node("n1", cpu=8),
            _running("task1", age_s=100, labels={"volcano.sh/preemptable": "true"},
                     annotations={"volcano.sh/cooldown-time": "600s"}),
            _running("task2", age_s=100, annotations={"volcano.sh/cooldown-time": "600abcde"}),
            _running("task3", age_s=800, annotations={"volcano.sh/cooldown-time": "600s"}),
            pod("preemptor", cpu="1")]
    ssn = open_session(objs, config("cdp"))
    plugin = ssn.plugins["cdp"]
    cands = [task(ssn, f"default/task{i}") for i in (1, 2, 3)]
    victims = plugin.preemptable(task(ssn, "default/preemptor"), cands)
    assert [v.pod.name for v in victims] == ["task2", "task3"]
    assert [v.pod.name for v in plugin.reclaimable(task(ssn, "default/preemptor"), cands)] == ["task2", "task3"]
    assert [plugin.evictable(t) for t in cands] == [False, True, True]
    assert ssn.evictable(cands[0], "preemptable") is False  # the session's prefilter asks it too


def test_cdp_label_before_annotation_and_only_running_pods() -> None:
    objs = [node("n1", cpu=8),
            # the label (1s, long over) wins over the annotation (600s)
            _running("labelled", age_s=100, labels={"volcano.sh/cooldown-time": "1s"},
                     annotations={"volcano.sh/cooldown-time": "600s"}),
            _running("plain", age_s=1),  # no cool-down at all
            pod("pending", cpu="1", annotations={"volcano.sh/cooldown-time": "600s"},
                creationTimestamp=AT.isoformat())]
    ssn = open_session(objs, config("cdp"))
    plugin = ssn.plugins["cdp"]
    assert not plugin.protected(task(ssn, "default/labelled"))
    assert not plugin.protected(task(ssn, "default/plain"))
    assert not plugin.protected(task(ssn, "default/pending"))


def test_cdp_counts_from_when_the_scheduler_bound_the_pod() -> None:
    cache = cache_of([node("n1", cpu=8), _running("old", age_s=3600, annotations={"volcano.sh/cooldown-time": "10m"})])

    def protected() -> bool:
        ssn = Session(take_snapshot(cache), config("cdp"), now=AT, effects=CacheEffects(cache))
        ssn.open()
        return ssn.plugins["cdp"].protected(task(ssn, "default/old"))

    assert not protected()  # created an hour ago, bound by someone else: the cool-down is over
    cache.pods["default/old"].bound_at = AT.timestamp() - 60  # this scheduler bound it a minute ago
    assert protected()
    cache.pods["default/old"].bound_at = AT.timestamp() - 601
    assert not protected()


def test_cdp_takes_no_arguments() -> None:
    with pytest.raises(ConfigError, match="cdp.*unknown argument 'cooldown'"):
        config("cdp", {"cooldown": "10m"})


# == nodegroup ======================================================================================
QUEUE_API = "scheduling.volcano.sh/v1beta1"
FULL = {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["group1", "group3"],
                              "preferredDuringSchedulingIgnoredDuringExecution": ["group3"]},
        "nodeGroupAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["group2", "group4"],
                                  "preferredDuringSchedulingIgnoredDuringExecution": ["group4"]}}


def ng_queue(name: str, affinity: dict | None = None, parent: str | None = None) -> dict:
    spec: dict = {"weight": 1}
    if affinity is not None:
        spec["affinity"] = affinity
    if parent:
        spec["parent"] = parent
    return {"apiVersion": QUEUE_API, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


NG_NODES = [node("n1", cpu=2, memory="4Gi", labels={"volcano.sh/nodegroup-name": "group1"}),
            node("n2", cpu=4, memory="16Gi", labels={"volcano.sh/nodegroup-name": "group2"}),
            node("n3", cpu=4, memory="16Gi", labels={"volcano.sh/nodegroup-name": "group3"}),
            node("n4", cpu=4, memory="16Gi", labels={"volcano.sh/nodegroup-name": "group4"}),
            node("n5", cpu=4, memory="16Gi")]
Q2 = {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["group1"],
                            "preferredDuringSchedulingIgnoredDuringExecution": ["group3"]},
      "nodeGroupAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["group2"],
                                "preferredDuringSchedulingIgnoredDuringExecution": ["group4"]}}
Q3 = {"nodeGroupAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": ["group1", "group3"]}}

# nodegroup_test.go TestNodeGroup: (case, queues, the pod's queue, arguments, enableHierarchy,
# scores n1..n5, admitted n1..n5)
NODEGROUP_CASES = [
    ("case: soft constraints is subset of hard constraints", [ng_queue("q1", FULL, "root")], "q1", {}, False,
     [100, 0, 150, -1, 0], [True, False, True, True, False]),
    ("case: soft constraints is not subset of hard constraints", [ng_queue("q2", Q2, "root")], "q2", {}, False,
     [100, 0, 50, -1, 0], [True, False, True, True, False]),
    ("case: affinity is not set for the queue, pods still cannot be scheduled to nodes with the nodegroup label "
     "when strict=false", [ng_queue("root-no-affinity")], "root-no-affinity", {"strict": False}, False,
     [0, 0, 0, 0, 0], [False, False, False, False, True]),
    ("case: affinity inherits from parent queue",
     [ng_queue("root", FULL), ng_queue("q1", FULL, "root"), ng_queue("q1-child", None, "q1")], "q1-child", {}, True,
     [100, 0, 150, -1, 0], [True, False, True, True, False]),
    ("case: affinity inherits from ancestor queue if parent queue has no affinity",
     [ng_queue("root", FULL), ng_queue("q-no-affinity", None, "root"),
      ng_queue("q-no-affinity-child", None, "q-no-affinity")], "q-no-affinity-child", {}, True,
     [100, 0, 150, -1, 0], [True, False, True, True, False]),
    ("case: queue without affinity", [ng_queue("q-no-affinity", None, "root")], "q-no-affinity-child", {}, False,
     [0, 0, 0, 0, 0], [False, False, False, False, False]),
    ("case: preferred nodegroup priority ordering", [ng_queue("q3", Q3)], "q3", {"enablePreferredOrder": True}, False,
     [50, 0, 25, 0, 0], [True, False, True, False, False]),
]


@pytest.mark.parametrize("queues,queue_name,arguments,hierarchy,want_scores,want_admitted",
                         [c[1:] for c in NODEGROUP_CASES], ids=[c[0] for c in NODEGROUP_CASES])
def test_nodegroup_volcano_cases(queues, queue_name, arguments, hierarchy, want_scores, want_admitted) -> None:
    objs = NG_NODES + queues + [podgroup("pg", queue=queue_name), pod("p", cpu="2", memory="4Gi", group="pg")]
    flags = "\n    enableHierarchy: true" if hierarchy else ""
    ssn = open_session(objs, config("nodegroup", arguments, flags=flags))
    assert scores(ssn, "nodegroup", "default/p") == dict(zip(["n1", "n2", "n3", "n4", "n5"], want_scores, strict=True))
    assert admitted(ssn, "nodegroup", "default/p") == dict(zip(["n1", "n2", "n3", "n4", "n5"], want_admitted,
                                                                   strict=True))


def test_nodegroup_without_hierarchy_a_child_queue_inherits_nothing() -> None:
    objs = NG_NODES + [ng_queue("root", FULL), ng_queue("child", None, "root"),
                       podgroup("pg", queue="child"), pod("p", cpu="2", memory="4Gi", group="pg")]
    ssn = open_session(objs, config("nodegroup"))
    assert not any(admitted(ssn, "nodegroup", "default/p").values())
    assert set(scores(ssn, "nodegroup", "default/p").values()) == {0.0}


def test_nodegroup_anti_affinity_outweighs_affinity_and_preferred_anti_admits() -> None:
    both = {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["group1", "group2"]},
            "nodeGroupAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["group1"],
                                      "preferredDuringSchedulingIgnoredDuringExecution": ["group3"]}}
    objs = NG_NODES + [ng_queue("q", both), podgroup("pg", queue="q"), pod("p", cpu="1", group="pg")]
    ssn = open_session(objs, config("nodegroup"))
    assert admitted(ssn, "nodegroup", "default/p") == {"n1": False, "n2": True, "n3": True, "n4": False, "n5": False}
    assert scores(ssn, "nodegroup", "default/p") == {"n1": 100.0, "n2": 100.0, "n3": -1.0, "n4": 0.0, "n5": 0.0}


def test_nodegroup_reasons_say_why_each_node_is_refused() -> None:
    objs = NG_NODES + [ng_queue("q1", FULL), podgroup("pg", queue="q1"), pod("p", cpu="1", group="pg"),
                       podgroup("other", queue="default"), pod("o", cpu="1", group="other")]
    ssn = open_session(objs, config("nodegroup"))
    plugin = ssn.plugins["nodegroup"]
    everywhere = np.ones(ssn.nodes.count, dtype=bool)
    assert plugin.predicate_reasons(task(ssn, "default/p"), None, everywhere) == {
        "node does not satisfy the node group affinity": 1, "node group label not found": 1}
    assert plugin.predicate_reasons(task(ssn, "default/o"), None, everywhere) == {
        "node group affinity not specified": 4, "node group label not found": 1}


def test_nodegroup_placement_follows_the_queue() -> None:
    cfg = parse_config('actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n'
                       '- plugins:\n  - name: predicates\n  - name: nodegroup\n')
    objs = NG_NODES + [ng_queue("q1", FULL), podgroup("pg", queue="q1", minMember=2),
                       *[pod(f"p{i}", cpu="1", memory="1Gi", group="pg") for i in range(2)]]
    ssn = open_session(objs, cfg)
    Enqueue(cfg.action_args["enqueue"]).execute(ssn)
    Allocate(cfg.action_args["allocate"]).execute(ssn)
    placed = {t.pod.name: ssn.nodes.names[t.node] for j in ssn.jobs.values() for t in j.tasks.values()}
    assert placed == {"p0": "n3", "p1": "n3"}  # group3: required and preferred, the best score


@pytest.mark.parametrize("affinity,message", [
    ({"nodeGroupAffinity": {"requiredDuringScheduling": ["g"]}},
     "spec.affinity.nodeGroupAffinity.requiredDuringScheduling: unknown field; expected "
     "requiredDuringSchedulingIgnoredDuringExecution or preferredDuringSchedulingIgnoredDuringExecution"),
    ({"nodeGroupAntiAffinity": {"preferred": ["g"]}}, "spec.affinity.nodeGroupAntiAffinity.preferred: unknown field"),
    ({"nodeAffinity": {}}, "spec.affinity.nodeAffinity: unknown field; expected nodeGroupAffinity or "
                           "nodeGroupAntiAffinity"),
    ({"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": "g1"}},
     "spec.affinity.nodeGroupAffinity.requiredDuringSchedulingIgnoredDuringExecution: expected a list"),
    ({"nodeGroupAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": ["g1", 3]}},
     r"spec.affinity.nodeGroupAffinity.preferredDuringSchedulingIgnoredDuringExecution\[1\]: expected a node group"),
    ({"nodeGroupAffinity": ["g1"]}, "spec.affinity.nodeGroupAffinity: expected a mapping"),
    ("g1", "spec.affinity: expected a mapping"),
])
def test_queue_affinity_errors_are_located(affinity, message: str) -> None:
    with pytest.raises(ManifestError, match=f"Queue q: {message}"):
        parse_object(ng_queue("q", affinity), "queues.yaml")


def test_queue_affinity_is_read() -> None:
    q = parse_object(ng_queue("q", FULL), "queues.yaml")
    assert q.affinity is not None
    assert (q.affinity.required, q.affinity.preferred) == (("group1", "group3"), ("group3",))
    assert (q.affinity.anti_required, q.affinity.anti_preferred) == (("group2", "group4"), ("group4",))
    assert parse_object(ng_queue("q"), "queues.yaml").affinity is None
    empty = parse_object(ng_queue("q", {}), "queues.yaml").affinity
    assert empty is not None and not empty.required  # set but empty: not inherited from an ancestor


def test_nodegroup_arguments_are_typed() -> None:
    with pytest.raises(ConfigError, match="argument 'strict'"):
        config("nodegroup", {"strict": "maybe"})
    with pytest.raises(ConfigError, match="unknown argument 'enablePreferedOrder'"):
        config("nodegroup", {"enablePreferedOrder": True})


# == resource-strategy-fit ===========================================================================
def rsf(arguments: dict | None) -> object:
    return config("resource-strategy-fit", arguments)


def _strategy(cpu: tuple[str, int] | None, memory: tuple[str, int] | None, weight: int = 10) -> dict:
    resources = {}
    for name, entry in (("cpu", cpu), ("memory", memory)):
        if entry is not None:
            resources[name] = {"type": entry[0], "weight": entry[1]}
    return {"resourceStrategyFitWeight": weight, "resources": resources}


LEAST11 = _strategy((LEAST, 1), (LEAST, 1))
# resource_strategy_fit_test.go TestScore: (case, task cpu m / memory bytes, node used cpu/memory,
# node allocatable cpu/memory, arguments, pod annotations, score)
SCORE_CASES = [
    ("test1", (100, 100), (200, 200), (500, 500), LEAST11, {}, 400),
    ("test2", (100, 100), (200, 200), (400, 400), LEAST11, {}, 250),
    ("test3", (100, 100), (200, 200), (500, 500), _strategy((MOST, 1), (MOST, 1)), {}, 600),
    ("test4", (100, 100), (200, 200), (400, 400), _strategy((MOST, 1), (MOST, 1)), {}, 750),
    ("test5", (100, 100), (200, 200), (500, 500), _strategy((LEAST, 2), (MOST, 1)), {}, 466.66666667),
    ("test6", (100, 100), (200, 200), (500, 500), _strategy((LEAST, 1), (MOST, 2)), {}, 533.33333333),
    ("test7", (0, 100), (200, 200), (500, 500), _strategy((LEAST, 1), (MOST, 2)), {}, 600),
    ("test8", (100, 100), (200, 200), (0, 400), _strategy((LEAST, 1), (MOST, 2)), {}, 500),
    ("test9", (100, 100), (200, 200), (500, 500), _strategy(None, (MOST, 2)), {}, 600),
    ("pod-level-scoring-least-allocated", (100, 100), (200, 200), (500, 500), LEAST11,
     {"volcano.sh/resource-strategy-scoring-type": LEAST, "volcano.sh/resource-strategy-weight":
      '{"cpu": 2, "memory": 1}'}, 400),
    ("pod-level-scoring-most-allocated", (100, 100), (200, 200), (500, 500), LEAST11,
     {"volcano.sh/resource-strategy-scoring-type": MOST, "volcano.sh/resource-strategy-weight":
      '{"cpu": 1, "memory": 2}'}, 600),
    ("pod-level-scoring-invalid-json", (100, 100), (200, 200), (500, 500), LEAST11,
     {"volcano.sh/resource-strategy-scoring-type": LEAST, "volcano.sh/resource-strategy-weight": "invalid-json"}, 0),
    ("pod-level-scoring-missing-resource-weight", (100, 100), (200, 200), (500, 500), LEAST11,
     {"volcano.sh/resource-strategy-scoring-type": LEAST, "volcano.sh/resource-strategy-weight": '{"cpu": 2}'}, 400),
    ("zero-resources-requested", (0, 0), (200, 200), (500, 500), LEAST11, {}, 0),
    ("node-fully-allocated", (100, 100), (500, 500), (500, 500), LEAST11, {}, 0),
    ("mixed-scoring-strategies", (100, 100), (200, 200), (500, 500), _strategy((LEAST, 3), (MOST, 1)), {}, 450),
    ("high-weight-scenario", (100, 100), (200, 200), (500, 500), _strategy((LEAST, 5), (LEAST, 5), 20), {}, 800),
    # Scoria's own: the type annotation without the weight one scores 0 (Volcano logs it and returns 0)
    ("type annotation without weights", (100, 100), (200, 200), (500, 500), LEAST11,
     {"volcano.sh/resource-strategy-scoring-type": LEAST}, 0),
]


@pytest.mark.parametrize("req,used,alloc,arguments,annotations,want",
                         [c[1:] for c in SCORE_CASES], ids=[c[0] for c in SCORE_CASES])
def test_resource_strategy_fit_score(req, used, alloc, arguments, annotations, want) -> None:
    objs = [node("n1", cpu=f"{alloc[0]}m", memory=str(alloc[1])),
            pod("used", cpu=f"{used[0]}m", memory=str(used[1]), nodeName="n1"),
            pod("p", cpu=f"{req[0]}m" if req[0] else None, memory=str(req[1]), annotations=annotations)]
    ssn = open_session(objs, rsf(arguments))
    assert scores(ssn, "resource-strategy-fit", "default/p")["n1"] == pytest.approx(want, abs=1e-6)


GPU, FOO = "nvidia.com/gpu", "example.com/foo"


def _n(name: str, **extra: int) -> dict:
    return node(name, cpu=4, memory="4Gi", pods=10, extra=extra)


def test_resource_strategy_fit_plugin_cases() -> None:
    # resource_strategy_fit_test.go TestResourceStrategyFitPlugin, both "single job" cases
    pods = [pod("p1", cpu="1", memory="1Gi", extra={FOO: 2}), pod("p2", cpu="1", memory="1Gi", extra={FOO: 3}),
            pod("p3", cpu="1", memory="10Gi", extra={GPU: 2}), pod("p4", cpu="1", memory="1Gi", extra={GPU: 3}),
            pod("p5", cpu="1", memory="1Gi", extra={GPU: 4, FOO: 4})]
    nodes = [_n("n1", **{GPU: 10}), _n("n2", **{GPU: 5}), _n("n3", **{FOO: 10}), _n("n4", **{FOO: 5}),
             _n("n5", **{GPU: 10, FOO: 5}), _n("n6", **{FOO: 10})]
    first = rsf({"resourceStrategyFitWeight": 10, "resources": {GPU: {"type": MOST, "weight": 1},
                                                               FOO: {"type": LEAST, "weight": 1}}})
    ssn = open_session(nodes + pods, first)
    want = {"p1": [0, 0, 800, 600], "p2": [0, 0, 700, 400], "p3": [200, 400, 0, 0], "p4": [300, 600, 0, 0]}
    for name, expected in want.items():
        got = scores(ssn, "resource-strategy-fit", f"default/{name}")
        assert [got[n] for n in ("n1", "n2", "n3", "n4")] == pytest.approx(expected), name
    second = rsf({"resourceStrategyFitWeight": 10, "resources": {GPU: {"type": MOST, "weight": 1},
                                                                FOO: {"type": LEAST, "weight": 2}}})
    got = scores(open_session(nodes + pods, second), "resource-strategy-fit", "default/p5")
    assert (got["n5"], got["n6"]) == pytest.approx((266.66666666, 399.99999999))


SRA_PODS = [pod("p1", cpu="1", memory="1Gi"), pod("p2", cpu="1.5", memory="0", extra={"nvidia.com/t4": 2}),
            pod("p3", cpu="2", memory="4Gi", extra={"nvidia.com/a10": 2}),
            pod("p4", cpu="3", memory="4Gi", extra={"nvidia.com/t4": 1, "nvidia.com/a10": 3})]
SRA_NODES = [node("n1", cpu=32, memory="64Gi", pods=10), node("n2", cpu=8, memory="16Gi", pods=10,
                                                              extra={"nvidia.com/t4": 16}),
             node("n3", cpu=8, memory="16Gi", pods=10, extra={"nvidia.com/a10": 16}),
             node("n4", cpu=8, memory="16Gi", pods=10, extra={"nvidia.com/t4": 8, "nvidia.com/a10": 16})]
T4_FIT = {"resourceStrategyFitWeight": 8, "resources": {"nvidia.com/t4": {"type": MOST, "weight": 3},
                                                        "cpu": {"type": LEAST, "weight": 1}}}
# sra_test.go TestNode: (case, arguments, scores of p1..p4 on n1..n4)
SRA_CASES = [
    ("case1: single job score result in multi-GPU resource",
     {"resourceStrategyFitWeight": 0, "sra": {"enable": True, "resources": "nvidia.com/t4, nvidia.com/a10", "weight": 5,
                                              "resourceWeight": {"nvidia.com/t4": 2, "nvidia.com/a10": 3}}},
     [[500, 300, 200, 0], [0, 300, 0, 0], [0, 0, 200, 0], [0, 0, 0, 0]]),
    ("case2: single job score result in single GPU resource",
     {"resourceStrategyFitWeight": 0, "sra": {"enable": True, "resources": "nvidia.com/t4", "weight": 5,
                                              "resourceWeight": {"nvidia.com/t4": 2}}},
     [[500, 0, 500, 0], [0, 0, 0, 0], [0, 0, 500, 0], [0, 0, 0, 0]]),
    ("case3: single job score result with sra policy and resourceStrategyFit",
     {**T4_FIT, "sra": {"enable": True, "resources": "nvidia.com/t4", "weight": 0,
                        "resourceWeight": {"nvidia.com/t4": 2}}},
     [[775, 700, 700, 700], [190.625, 237.5, 162.5, 312.5], [750, 600, 600, 600], [181.25, 162.5, 125, 200]]),
    ("case4: single job score result with sra policy and resourceStrategyFit",
     {**T4_FIT, "sra": {"enable": True, "resources": "nvidia.com/t4", "weight": 5,
                        "resourceWeight": {"nvidia.com/t4": 2}}},
     [[1275, 700, 1200, 700], [190.625, 237.5, 162.5, 312.5], [750, 600, 1100, 600], [181.25, 162.5, 125, 200]]),
]


@pytest.mark.parametrize("arguments,want", [c[1:] for c in SRA_CASES], ids=[c[0] for c in SRA_CASES])
def test_resource_strategy_fit_sra(arguments: dict, want: list[list[float]]) -> None:
    ssn = open_session(SRA_NODES + SRA_PODS, rsf(arguments))
    for i, expected in enumerate(want, start=1):
        got = scores(ssn, "resource-strategy-fit", f"default/p{i}")
        assert [got[n] for n in ("n1", "n2", "n3", "n4")] == pytest.approx(expected), f"p{i}"


@pytest.mark.parametrize("name,cpu,memory,gpu,node_name,admits", [
    # proportional_test.go Test_checkNodeResourceIsProportional, nvidia.com/gpu at 4 cpu and 4 memory per GPU
    ("cpu_task_less_than_reserved_resource", "4", "4G", 0, "n1", True),
    ("cpu_task_greater_than_reserved_resource", "10", "10G", 0, "n1", False),
    ("gpu_task_no_proportional_check", "10", "10G", 1, "n1", True),
    ("cpu_task_less_than_idle_resource", "10", "10G", 0, "n2", True),
])
def test_resource_strategy_fit_proportional(name, cpu, memory, gpu, node_name, admits) -> None:
    nodes = [node("n1", cpu=30, memory="30G", extra={GPU: 6}), node("n2", cpu=26, memory="26G", extra={GPU: 2})]
    p = pod("t", cpu=cpu, memory=memory, extra={GPU: gpu} if gpu else None)
    ssn = open_session(nodes + [p], rsf({"proportional": {"enable": True, "resources": GPU, "resourceProportion": {
        f"{GPU}.cpu": 4, f"{GPU}.memory": 4}}}))
    assert admitted(ssn, "resource-strategy-fit", "default/t", ssn.nodes.idle)[node_name] is admits
    among = np.array([n == node_name for n in ssn.nodes.names])
    reasons = ssn.plugins["resource-strategy-fit"].predicate_reasons(task(ssn, "default/t"), ssn.nodes.idle, among)
    assert reasons == ({} if admits else {f"proportional of resource {GPU} check failed": 1})


def test_resource_strategy_fit_arguments() -> None:
    # resource_strategy_fit_test.go Test_calculateWeight, test2/test3: the defaults
    args = rsf({"resources": {"cpu": {"type": MOST, "weight": 1}, "memory": {"type": LEAST, "weight": 2}}}) \
        .plugin("resource-strategy-fit").args
    assert args.weight == 10
    assert dict(args.resources) == {"cpu": Strategy(MOST, 1), "memory": Strategy(LEAST, 2)}
    args = rsf({"resourceStrategyFitWeight": 10}).plugin("resource-strategy-fit").args
    assert dict(args.resources) == {"cpu": Strategy(LEAST, 1), "memory": Strategy(LEAST, 1)}
    # test4/test5/test6/test7: a wildcard that is not one trailing '*' after a prefix is dropped (with a warning)
    args = rsf({"resources": {"nvidia.com/gpu/*": {"type": MOST, "weight": 3}, "cloudml.gpu**": {"type": LEAST},
                              "*.com/gpu": {"type": MOST}, "*": {"type": LEAST}, "cloudml.*.gpu": {}}}) \
        .plugin("resource-strategy-fit").args
    assert dict(args.resources) == {"nvidia.com/gpu/*": Strategy(MOST, 3)}
    assert len(args.warnings) == 4
    # a weight below 1 counts as 1, said in a warning; no type means LeastAllocated
    args = rsf({"resources": {"cpu": {"weight": 0}}}).plugin("resource-strategy-fit").args
    assert dict(args.resources) == {"cpu": Strategy(LEAST, 1)} and args.warnings
    # sra_test.go TestArguments
    args = rsf({"sra": {"enable": True, "resources": "nvidia.com/t4, nvidia.com/a10", "weight": 3,
                        "resourceWeight": {"nvidia.com/t4": 1, "nvidia.com/a10": 2}},
                "proportional": {"enable": True, "resources": "nvidia.com/t4, nvidia.com/a10", "resourceProportion": {
                    "nvidia.com/t4.cpu": 3, "nvidia.com/t4.memory": 6, "nvidia.com/a10.cpu": 4,
                    "nvidia.com/a10.memory": 8}}}).plugin("resource-strategy-fit").args
    assert args.sra == (3, {"nvidia.com/t4": 1, "nvidia.com/a10": 2})
    assert args.proportional == {"nvidia.com/t4": (3.0, 6.0), "nvidia.com/a10": (4.0, 8.0)}
    assert rsf({"sra": {"enable": False, "weight": 3}}).plugin("resource-strategy-fit").args.sra is None
    assert rsf({"logLevel": 4}).plugin("resource-strategy-fit").args.warnings  # the user guide's debug example


@pytest.mark.parametrize("arguments,message", [
    ({"resourceStrategyFitWeigth": 10}, "unknown argument 'resourceStrategyFitWeigth'; known: logLevel, proportional"),
    ({"resourceStrategyFitWeight": "ten"}, "argument 'resourceStrategyFitWeight': expected an integer"),
    ({"resourceStrategyFitWeight": -1}, "argument 'resourceStrategyFitWeight': must be at least 0"),
    ({"resources": ["cpu"]}, "argument 'resources': expected a mapping"),
    ({"resources": {"cpu": "MostAllocated"}}, "argument 'resources.cpu': expected a mapping"),
    ({"resources": {"cpu": {"type": "MostAlocated"}}},
     "argument 'resources.cpu.type': must be one of LeastAllocated, MostAllocated, got 'MostAlocated'"),
    ({"resources": {"cpu": {"type": MOST, "wieght": 2}}}, "argument 'resources.cpu.wieght': unknown key"),
    ({"resources": {"cpu": {"type": MOST, "weight": "heavy"}}}, "argument 'resources.cpu.weight': expected an integer"),
    ({"sra": {"enabled": True}}, "argument 'sra.enabled': unknown key"),
    ({"sra": {"enable": "yes please"}}, "argument 'sra.enable': expected true or false"),
    ({"sra": {"enable": True, "resources": "a", "resourceWeight": {"b": 1}}},
     "argument 'sra.resourceWeight.b': resource is not listed in sra.resources"),
    ({"proportional": {"enable": True, "resources": GPU, "resourceProportion": {f"{GPU}.cpus": 4}}},
     f"argument 'proportional.resourceProportion.{GPU}.cpus': expected <resource>.cpu or <resource>.memory"),
    ({"proportional": {"enable": True, "resources": GPU, "resourceProportion": {f"{GPU}.cpu": "x"}}},
     f"argument 'proportional.resourceProportion.{GPU}.cpu': expected a number"),
])
def test_resource_strategy_fit_bad_arguments_are_located(arguments: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=r"\(resource-strategy-fit\): " + message.replace("(", r"\(").replace(
            ")", r"\)").replace(".", r"\.").replace("*", r"\*")):
        rsf(arguments)


@pytest.mark.parametrize("name,resources,want", [
    # resource_strategy_fit_test.go Test_findResourceConfigWithPrefix
    ("nvidia.com/gpu", {"nvidia.com/gpu": Strategy(MOST, 3), "nvidia.com/*": Strategy(LEAST, 1)}, Strategy(MOST, 3)),
    ("nvidia.com/gpu/v100", {"nvidia.com/gpu/*": Strategy(MOST, 2), "nvidia.com/*": Strategy(LEAST, 1)},
     Strategy(MOST, 2)),
    ("example.com/foo", {"nvidia.com/gpu/*": Strategy(MOST, 2)}, None),
    ("any.resource", {}, None),
    ("cloudml.gpu/tensorflow/v2", {"cloudml.gpu/tensorflow/*": Strategy(MOST, 3), "cloudml.gpu/*": Strategy(LEAST, 2),
                                   "cloudml/*": Strategy(MOST, 1)}, Strategy(MOST, 3)),
], ids=["exact_match_priority", "longest_prefix_match", "no_match_found", "empty_resources_map",
        "multiple_valid_wildcards_longest_match"])
def test_resource_strategy_fit_match(name: str, resources: dict, want: Strategy | None) -> None:
    assert match(name, resources) == want


def test_resource_strategy_fit_wildcard_scores_a_resource() -> None:
    objs = [node("n1", cpu=4, extra={"nvidia.com/gpu-a100": 8}), node("n2", cpu=4, extra={"nvidia.com/gpu-a100": 8}),
            pod("used", cpu="1", extra={"nvidia.com/gpu-a100": 6}, nodeName="n2"),
            pod("p", cpu="1", extra={"nvidia.com/gpu-a100": 1})]
    ssn = open_session(objs, rsf({"resourceStrategyFitWeight": 1, "resources": {"nvidia.com/*": {"type": MOST}}}))
    assert scores(ssn, "resource-strategy-fit", "default/p") == pytest.approx({"n1": 100 / 8, "n2": 100 * 7 / 8})


def test_resource_strategy_fit_scores_refresh_after_a_placement() -> None:
    """Scores are cached per task shape; a placement must change the node it landed on."""
    objs = [node("n1", cpu=4), node("n2", cpu=4), *[pod(f"p{i}", cpu="1", group="pg") for i in range(2)],
            podgroup("pg", minMember=1)]
    ssn = open_session(objs, rsf({"resources": {"cpu": {"type": MOST}}}))
    p0, p1 = task(ssn, "default/p0"), task(ssn, "default/p1")
    before = ssn.node_scores(p1).copy()
    assert before[0] == before[1]
    stmt = Statement(ssn)
    stmt.allocate(p0, 0)
    after = ssn.node_scores(p1)
    assert after[0] > after[1] and after[1] == before[1]


# == task-topology ===================================================================================
ANN = {"affinity": "volcano.sh/task-topology-affinity", "anti": "volcano.sh/task-topology-anti-affinity",
       "order": "volcano.sh/task-topology-task-order"}


def tt_objects(roles: dict[str, int], annotations: dict[str, str], *, cpu: str = "1", nodes: list | None = None,
               placed: dict[str, str] | None = None) -> list[dict]:
    """A job ``job1`` with ``roles`` (role -> replicas) named ``job1-<role>-<i>``; ``placed``: pod -> node."""
    objs = nodes if nodes is not None else [node(f"n{i}", cpu=8) for i in range(1, 5)]
    objs = list(objs) + [podgroup("job1", minMember=1, annotations={ANN[k]: v for k, v in annotations.items()})]
    for name, count in roles.items():
        for i in range(count):
            pname = f"job1-{name}-{i}"
            objs.append(pod(pname, cpu=cpu, group="job1", annotations={"volcano.sh/task-spec": name},
                            nodeName=(placed or {}).get(pname)))
    return objs


TOPOLOGY_ROLES = {"ps": 2, "worker": 2, "chief": 1, "evaluator": 1}
# topology_test.go Test_readTopologyFromPgAnnotations: (case, roles, annotations, affinity, anti-affinity,
# task order, error)
READ_CASES = [
    ("correct annotation", TOPOLOGY_ROLES,
     {"affinity": "ps,worker;ps,chief", "anti": "ps;worker,chief", "order": "ps,worker,chief,evaluator"},
     [["ps", "worker"], ["ps", "chief"]], [["ps"], ["worker", "chief"]], ["ps", "worker", "chief", "evaluator"], None),
    ("correct annotation with tasks whose names contain `-`",
     {"ps-some": 2, "worker-another-some": 2, "chief-kk": 1, "evaluator-tt": 1},
     {"affinity": "ps-some,worker-another-some;ps-some,chief-kk", "anti": "ps-some;worker-another-some,chief-kk",
      "order": "ps-some,worker-another-some,chief-kk,evaluator-tt"},
     [["ps-some", "worker-another-some"], ["ps-some", "chief-kk"]], [["ps-some"], ["worker-another-some", "chief-kk"]],
     ["ps-some", "worker-another-some", "chief-kk", "evaluator-tt"], None),
    ("nil annotation", TOPOLOGY_ROLES, {}, None, None, None, None),
    ("invalid annotation", TOPOLOGY_ROLES,
     {"affinity": "$%GF$^trtqwrg^", "anti": "ps;worker,chief;#@FGEW^vfa897bgs;;", "order": "ps,worker,chief,evaluator,,,"},
     None, None, None, "task $%GF$^trtqwrg^ do not exist in job <default/job1>"),
    ("invalid task name", {"ps": 2, "worker": 2}, {"affinity": "ps,worker", "anti": "ps", "order": "ps,worker,chief"},
     None, None, None, "task chief do not exist in job <default/job1>"),
    ("duplicate task name", {"ps": 2, "worker": 2}, {"affinity": "ps,worker", "anti": "ps,ps", "order": "ps,worker"},
     None, None, None, "task ps is duplicate in job <default/job1>"),
    ("redundant punctuations", TOPOLOGY_ROLES,
     {"affinity": "ps,worker;ps,,chief,;", "anti": "ps;worker,chief;;;", "order": "ps,worker,chief,evaluator,,,"},
     [["ps", "worker"], ["ps", "", "chief", ""], [""]], [["ps"], ["worker", "chief"], [""], [""], [""]],
     ["ps", "worker", "chief", "evaluator", "", "", ""], None),
]


@pytest.mark.parametrize("roles,annotations,affinity,anti,order,error", [c[1:] for c in READ_CASES],
                         ids=[c[0] for c in READ_CASES])
def test_task_topology_reads_annotations(roles, annotations, affinity, anti, order, error) -> None:
    ssn = open_session(tt_objects(roles, annotations), config("task-topology"))
    job = ssn.jobs["default/job1"]
    if error:
        with pytest.raises(TopologyError) as exc:
            Topology.read(job)
        assert str(exc.value) == error
        assert "default/job1" not in ssn.plugins["task-topology"].jobs  # scheduled as if without the plugin
        return
    topology = Topology.read(job)
    if affinity is None:
        assert topology is None
        return
    assert topology is not None
    assert (topology.affinity, topology.anti_affinity, topology.task_order) == (affinity, anti, order)


def _buckets(ssn) -> list[list[str]]:
    manager = ssn.plugins["task-topology"].jobs["default/job1"]
    out = [[] for _ in manager.buckets]
    for uid, index in manager.bucket_of.items():
        out[index].append(uid.split("/")[1].removeprefix("job1-"))
    return [sorted(b) for b in out]


def test_task_topology_buckets_keep_anti_affine_roles_apart_and_affine_ones_together() -> None:
    ssn = open_session(tt_objects({"ps": 2, "worker": 4}, {"affinity": "ps,worker", "anti": "ps"}),
                       config("task-topology"))
    # ps (self-anti-affinity) first, one bucket each; each worker joins the bucket with most affinity,
    # the least loaded on a tie
    assert _buckets(ssn) == [["ps-0", "worker-0", "worker-2"], ["ps-1", "worker-1", "worker-3"]]
    assert ssn.plugins["task-topology"].jobs["default/job1"].max_size == 3


def test_task_topology_roles_without_relations_and_pods_without_roles_stay_out() -> None:
    objs = tt_objects({"ps": 1, "worker": 1, "evaluator": 1}, {"anti": "ps,worker"})
    objs.append(pod("job1-sidecar", group="job1"))
    ssn = open_session(objs, config("task-topology"))
    assert _buckets(ssn) == [["ps-0"], ["worker-0"]]  # evaluator: no relation; sidecar: no role


def test_task_topology_task_order() -> None:
    objs = tt_objects({"ps": 1, "worker": 3, "evaluator": 1}, {"affinity": "ps,worker", "anti": "worker",
                                                                "order": "worker,ps"})
    ssn = open_session(objs, config("task-topology"))
    pending = sorted(ssn.jobs["default/job1"].pending_tasks(), key=ssn.task_key)
    # workers are anti-affine with each other: three buckets; the first (oldest) holds the ps too, and within a
    # bucket the task order puts worker before ps; evaluator (in no bucket) comes last
    assert [t.pod.name.removeprefix("job1-") for t in pending] == \
        ["worker-0", "ps-0", "worker-1", "worker-2", "evaluator-0"]


def test_task_topology_node_order_draws_bucket_mates_together_and_keeps_anti_affine_pods_apart() -> None:
    objs = tt_objects({"ps": 2, "worker": 2}, {"affinity": "ps,worker", "anti": "ps"},
                      placed={"job1-ps-0": "n1"})
    ssn = open_session(objs, config("task-topology", {"task-topology.weight": 2}))
    # ps-0 (on n1) is a bucket of its own; ps-1 is anti-affine to it: a new bucket; both workers are as affine
    # to either bucket and join the less loaded one, which is ps-0's (its placed pod holds no pending request)
    assert _buckets(ssn) == [["ps-0", "worker-0", "worker-1"], ["ps-1"]]
    # worker-0: n1 scores its placed mate (1) plus the bucket's pending pods (2); elsewhere only the pending ones.
    # × weight 2 × 100 / the largest bucket (3)
    s = scores(ssn, "task-topology", "default/job1-worker-0")
    assert s == pytest.approx({"n1": 200.0, "n2": 400 / 3, "n3": 400 / 3, "n4": 400 / 3})
    # ps-1: a ps already runs on n1 and ps is anti-affine to itself
    s = scores(ssn, "task-topology", "default/job1-ps-1")
    assert s == pytest.approx({"n1": 0.0, "n2": 200 / 3, "n3": 200 / 3, "n4": 200 / 3})


def test_task_topology_scores_follow_placements_and_undo() -> None:
    ssn = open_session(tt_objects({"ps": 2, "worker": 2}, {"affinity": "ps,worker", "anti": "ps"}),
                       config("task-topology"))
    ps0, w0 = task(ssn, "default/job1-ps-0"), task(ssn, "default/job1-worker-0")
    assert len(set(scores(ssn, "task-topology", "default/job1-worker-0").values())) == 1
    stmt = Statement(ssn)
    stmt.allocate(ps0, 2)
    s = ssn.plugins["task-topology"].node_order(w0, None)
    # its bucket [ps-0, worker-0] now has ps-0 on n3 and one pending pod: n3 scores 1 + 1, the others 1;
    # × 100 / the largest bucket (2)
    assert list(s) == [50.0, 50.0, 100.0, 50.0]
    ps1 = ssn.plugins["task-topology"].node_order(task(ssn, "default/job1-ps-1"), None)
    assert ps1[2] < ps1[0] == ps1[1]  # ps-0 is on node 2 now: ps-1 goes elsewhere
    stmt.discard()  # undone: the bucket is whole again
    assert len(set(scores(ssn, "task-topology", "default/job1-worker-0").values())) == 1


def test_task_topology_an_evicted_pod_no_longer_repels_and_an_undone_eviction_does_again() -> None:
    ssn = open_session(tt_objects({"ps": 2}, {"anti": "ps"}, placed={"job1-ps-0": "n1"}), config("task-topology"))
    before = scores(ssn, "task-topology", "default/job1-ps-1")
    assert before["n1"] < before["n2"] == before["n3"]
    stmt = Statement(ssn)
    stmt.evict(task(ssn, "default/job1-ps-0"), "test")
    during = scores(ssn, "task-topology", "default/job1-ps-1")
    assert during["n1"] == during["n2"]
    stmt.discard()
    assert scores(ssn, "task-topology", "default/job1-ps-1") == before


def test_task_topology_counts_the_bucket_that_does_not_fit() -> None:
    nodes = [node("small", cpu=2), node("big", cpu=8)]
    ssn = open_session(tt_objects({"ps": 1, "worker": 3}, {"affinity": "ps,worker"}, cpu="1", nodes=nodes),
                       config("task-topology"))
    assert _buckets(ssn) == [["ps-0", "worker-0", "worker-1", "worker-2"]]
    s = scores(ssn, "task-topology", "default/job1-ps-0")
    # all four pending mates count on big; on small (2 cores) two of the others must be left out
    assert s == {"small": pytest.approx(2 * 100 / 4), "big": pytest.approx(4 * 100 / 4)}


def test_task_topology_node_the_pod_does_not_fit_scores_zero() -> None:
    nodes = [node("tiny", cpu="500m"), node("big", cpu=8)]
    ssn = open_session(tt_objects({"ps": 1, "worker": 1}, {"affinity": "ps,worker"}, nodes=nodes),
                       config("task-topology"))
    assert scores(ssn, "task-topology", "default/job1-ps-0")["tiny"] == 0.0


def test_task_topology_allocate_places_parameter_servers_apart_with_their_workers() -> None:
    cfg = parse_config('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n- plugins:\n  - name: predicates\n'
                       '  - name: nodeorder\n  - name: task-topology\n    arguments: {task-topology.weight: 10}\n')
    objs = tt_objects({"ps": 2, "worker": 4}, {"affinity": "ps,worker", "anti": "ps"})
    ssn = open_session(objs, cfg)
    Allocate(cfg.action_args["allocate"]).execute(ssn)
    placed = {t.pod.name.removeprefix("job1-"): ssn.nodes.names[t.node]
              for t in ssn.jobs["default/job1"].tasks.values()}
    # buckets [ps-0, worker-0, worker-2] and [ps-1, worker-1, worker-3]; nodeorder alone would spread all six
    assert placed == {"ps-0": "n1", "worker-0": "n1", "worker-2": "n1", "ps-1": "n2", "worker-1": "n2", "worker-3": "n2"}


def test_task_topology_a_wrong_annotation_leaves_the_job_to_the_other_plugins(caplog) -> None:
    ssn = open_session(tt_objects({"ps": 1, "worker": 1}, {"affinity": "ps,launcher"}), config("task-topology"))
    assert ssn.plugins["task-topology"].jobs == {}
    assert ssn.plugins["task-topology"].node_order(task(ssn, "default/job1-ps-0"), None) is None
    assert "task launcher do not exist in job <default/job1>" in caplog.text


def test_task_topology_weight_is_an_integer() -> None:
    with pytest.raises(ConfigError, match="argument 'task-topology.weight': expected an integer"):
        config("task-topology", {"task-topology.weight": "heavy"})
    with pytest.raises(ConfigError, match="unknown argument 'task-topology.wieght'"):
        config("task-topology", {"task-topology.wieght": 2})


def test_all_four_are_registered_under_volcanos_names() -> None:
    cfg = parse_config('actions: "allocate"\ntiers:\n- plugins:\n  - name: task-topology\n  - name: nodegroup\n'
                       '  - name: resource-strategy-fit\n  - name: cdp\n')
    assert cfg.plugin_names() == ["task-topology", "nodegroup", "resource-strategy-fit", "cdp"]
    objs = [node("n1"), queue("q1"), podgroup("pg", queue="q1"), pod("p", group="pg")]
    ssn = open_session(objs, cfg)
    assert set(ssn.plugins) == {"task-topology", "nodegroup", "resource-strategy-fit", "cdp"}


@pytest.mark.parametrize("plugin", ["task-topology", "nodegroup", "resource-strategy-fit", "cdp"])
def test_left_out_cases_say_why(plugin: str) -> None:
    """Each plugin folder lists the Volcano cases that are not data files there, with the reason."""
    folder = Path(__file__).resolve().parents[2] / "fixtures" / "volcano" / "plugins" / plugin
    entries = yaml.safe_load((folder / "left_out.yaml").read_text())
    assert entries
    for entry in entries:
        assert set(entry) == {"file", "function", "case", "why"}, entry
        assert entry["file"].startswith(f"pkg/scheduler/plugins/{plugin}/") and entry["why"].strip(), entry
    cases = [yaml.safe_load(p.read_text())["source"] for p in folder.glob("*.yaml") if p.name != "left_out.yaml"]
    ported = {(c["function"], c["case"]) for c in cases}
    assert not ported & {(e["function"], e["case"]) for e in entries}, "a case is both ported and left out"
