"""predicates: which nodes pass, and how refusals are explained (table-driven)."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.framework.config import parse_config
from tests.support.builders import node, pod
from tests.support.sessions import config_with, open_session, task

NODES = [
    node("plain", cpu=4, memory="8Gi", labels={"zone": "a", "rank": "3"}),
    node("big", cpu=16, memory="64Gi", labels={"zone": "b", "rank": "10", "ssd": "yes"}),
    node("gpu", cpu=16, memory="64Gi", labels={"zone": "b"}, taints=["nvidia.com/gpu=true:NoSchedule"],
         extra={"nvidia.com/gpu": 8}),
    node("soft", cpu=4, memory="8Gi", labels={"zone": "c"}, taints=["spot=yes:PreferNoSchedule"]),
    node("cordoned", cpu=16, memory="64Gi", labels={"zone": "a"}, unschedulable=True),
    node("draining", cpu=16, memory="64Gi", labels={"zone": "c"}, taints=["maint=now:NoExecute"]),
    node("tiny", cpu=1, memory="1Gi", pods=1, labels={"zone": "a"}),
]


def term(*exprs, fields=None):
    t = {"matchExpressions": [{"key": k, "operator": op, **({"values": v} if v else {})} for k, op, v in exprs]}
    if fields:
        t["matchFields"] = [{"key": "metadata.name", "operator": op, "values": v} for op, v in fields]
        if not exprs:
            del t["matchExpressions"]
    return t


def required(*terms):
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


CASES = [
    ("no constraints", {}, {"plain", "big", "soft", "tiny"}),
    ("nodeSelector", {"nodeSelector": {"zone": "b"}}, {"big"}),
    ("nodeSelector two labels", {"nodeSelector": {"zone": "b", "ssd": "yes"}}, {"big"}),
    ("nodeSelector no match", {"nodeSelector": {"zone": "z"}}, set()),
    ("affinity In", {"affinity": required(term(("zone", "In", ["a", "c"])))}, {"plain", "soft", "tiny"}),
    ("affinity NotIn", {"affinity": required(term(("zone", "NotIn", ["a"])))}, {"big", "soft"}),
    ("affinity Exists", {"affinity": required(term(("ssd", "Exists", None)))}, {"big"}),
    ("affinity DoesNotExist", {"affinity": required(term(("rank", "DoesNotExist", None)))}, {"soft", "tiny"}),
    ("affinity Gt", {"affinity": required(term(("rank", "Gt", ["5"])))}, {"big"}),
    ("affinity Lt", {"affinity": required(term(("rank", "Lt", ["5"])))}, {"plain"}),
    ("affinity terms are ORed", {"affinity": required(term(("zone", "In", ["b"])), term(("rank", "Lt", ["5"])))},
     {"plain", "big"}),
    ("affinity expressions are ANDed", {"affinity": required(term(("zone", "In", ["a"]), ("rank", "Exists", None)))},
     {"plain"}),
    ("matchFields metadata.name", {"affinity": required(term(fields=[("In", ["big", "gpu"])]))}, {"big"}),
    ("toleration Equal", {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "true",
                                           "effect": "NoSchedule"}]}, {"plain", "big", "gpu", "soft", "tiny"}),
    ("toleration wrong value", {"tolerations": [{"key": "nvidia.com/gpu", "value": "false"}]},
     {"plain", "big", "soft", "tiny"}),
    ("toleration wrong effect", {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                                  "effect": "NoExecute"}]}, {"plain", "big", "soft", "tiny"}),
    ("toleration Exists any effect", {"tolerations": [{"key": "maint", "operator": "Exists"}]},
     {"plain", "big", "soft", "tiny", "draining"}),
    ("tolerate everything", {"tolerations": [{"operator": "Exists"}]},
     {"plain", "big", "gpu", "soft", "tiny", "draining", "cordoned"}),
    ("tolerate cordon only", {"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]},
     {"plain", "big", "soft", "tiny", "cordoned"}),
    ("resources: cpu", {"cpu": "8"}, {"big"}),
    ("resources: memory", {"memory": "32Gi"}, {"big"}),
    ("resources: extended", {"extra": {"nvidia.com/gpu": 1},
                             "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}, {"gpu"}),
]


@pytest.mark.parametrize("spec,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_feasible_nodes(spec: dict, expected: set[str]) -> None:
    spec = {"cpu": "500m", "memory": "256Mi", **spec}
    ssn = open_session(NODES + [pod("p", **spec)], config_with("predicates"))
    t = task(ssn, "default/p")
    mask = ssn.feasible(t, ssn.nodes.idle)
    assert {ssn.nodes.names[i] for i in np.flatnonzero(mask)} == expected


def test_pod_count_limit() -> None:
    ssn = open_session([node("tiny", cpu=8, pods=1), pod("running", cpu="1", nodeName="tiny"), pod("p", cpu="1")],
                       config_with("predicates"))
    t = task(ssn, "default/p")
    assert not ssn.feasible(t, ssn.nodes.idle).any()
    assert ssn.explain(t, ssn.nodes.idle) == "0/1 nodes are available: 1 Too many pods"


def test_explain_orders_by_count_then_reason() -> None:
    ssn = open_session(NODES + [pod("p", cpu="12", memory="48Gi")], config_with("predicates"))
    message = ssn.explain(task(ssn, "default/p"), ssn.nodes.idle)
    assert message == ("0/7 nodes are available: 3 Insufficient cpu, 3 Insufficient memory, "
                       "1 node(s) had untolerated taint {maint: now}, "
                       "1 node(s) had untolerated taint {nvidia.com/gpu: true}, 1 node(s) were unschedulable")


def test_explain_counts_a_node_under_its_first_failing_filter() -> None:
    # "cordoned" is in zone a, so it fails the cordon check first and is not counted as a selector mismatch.
    ssn = open_session(NODES + [pod("p", cpu="20", nodeSelector={"zone": "a"})], config_with("predicates"))
    message = ssn.explain(task(ssn, "default/p"), ssn.nodes.idle)
    assert message == ("0/7 nodes are available: 2 Insufficient cpu, "
                       "2 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated taint {maint: now}, "
                       "1 node(s) had untolerated taint {nvidia.com/gpu: true}, 1 node(s) were unschedulable")


def test_explain_without_nodes() -> None:
    ssn = open_session([pod("p")], config_with("predicates"))
    assert ssn.explain(task(ssn, "default/p"), ssn.nodes.idle) == "0/0 nodes are available: the cluster has no nodes"


@pytest.mark.parametrize("flag,expected", [
    ("predicate.NodeAffinityEnable: false", {"plain", "big", "soft", "tiny"}),
    ("predicate.TaintTolerationEnable: false", {"big", "gpu"}),
], ids=["affinity off", "taints off"])
def test_switches(flag: str, expected: set[str]) -> None:
    config = parse_config(f"""
actions: "allocate"
tiers:
- plugins:
  - name: predicates
    arguments: {{{flag}}}
""")
    ssn = open_session(NODES + [pod("p", cpu="500m", nodeSelector={"zone": "b"})], config)
    t = task(ssn, "default/p")
    assert {ssn.nodes.names[i] for i in np.flatnonzero(ssn.feasible(t, ssn.nodes.idle))} == expected


def test_static_mask_is_shared_by_pods_with_the_same_constraints() -> None:
    ssn = open_session(NODES + [pod("a", nodeSelector={"zone": "a"}), pod("b", nodeSelector={"zone": "a"})],
                       config_with("predicates"))
    plugin = ssn.plugins["predicates"]
    assert plugin.static_mask(task(ssn, "default/a")) is plugin.static_mask(task(ssn, "default/b"))
