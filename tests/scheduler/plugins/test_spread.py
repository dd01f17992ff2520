"""Pod topology spread: kube-scheduler's PodTopologySpread filter (predicates) and score (nodeorder).

kube-scheduler's own cases are ported as data under tests/fixtures/kube/podtopologyspread/ (the
Volcano conformance schema: source/config/cycles/objects/expect, optional ``differs``) and run here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.api.manifests import ManifestError, parse_object
from scheduler.framework.args import ArgError
from scheduler.framework.config import parse_config
from tests.support.scenario import run_scenario

KUBE = Path(__file__).resolve().parents[2] / "fixtures" / "kube" / "podtopologyspread"
CASES = sorted(KUBE.glob("*/*.yaml"))
HARD = "node(s) didn't match pod topology spread constraints"


def test_kube_cases_exist() -> None:
    """kube-scheduler's own cases run in tests/scheduler/test_kube_conformance.py with the others."""
    assert len(CASES) >= 8


# -- helpers ---------------------------------------------------------------------------------------
def _node(name: str, cpu: int = 8, **labels: str) -> dict:
    return {"node": {"name": name, "cpu": cpu, "labels": labels}}


def _pod(name: str, *, labels: dict | None = None, node: str | None = None, spread: list | None = None,
         group: str | None = None, cpu: str = "1", ns: str = "default", extra: dict | None = None) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": labels or {}}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    spec: dict[str, Any] = {"containers": [{"name": "main", "resources": {"requests": {"cpu": cpu}}}]}
    if node:
        spec["nodeName"] = node
    if spread:
        spec["topologySpreadConstraints"] = spread
    spec.update(extra or {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
            "status": {"phase": "Running" if node else "Pending"}}


def _c(skew: int, key: str, when: str = "DoNotSchedule", **kw: Any) -> dict:
    return {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": {"app": "web"}}, **kw}


PREDICATES = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: predicates\n'
BINPACK = ('actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n- plugins:\n  - name: predicates\n'
           '  - name: binpack\n')


def _run(tmp: Path, objects: list, config: str = PREDICATES, cycles: int | None = 1) -> dict:
    result = run_scenario({"config": config, "cycles": cycles, "objects": objects}, tmp)
    return {f"{p['namespace']}/{p['name']}": p for p in result["pods"]}


# -- the filter ------------------------------------------------------------------------------------
def test_reason_is_kube_schedulers(tmp_path: Path) -> None:
    pods = _run(tmp_path, [_node("a", zone="z1"), _node("b", zone="z2"),
                           _pod("w0", labels={"app": "web"}, node="a"), _pod("w1", labels={"app": "web"}, node="a"),
                           _pod("p", labels={"app": "web"}, spread=[_c(1, "zone", nodeAffinityPolicy="Ignore")],
                                extra={"nodeSelector": {"zone": "z1"}})])
    # b is refused by the node selector first; a by the spread (2 + 1 - 0 > 1: z2 counts, policy Ignore)
    assert pods["default/p"]["node"] is None
    assert f"1 {HARD}" in pods["default/p"]["reason"]
    assert "1 node(s) didn't match Pod's node affinity/selector" in pods["default/p"]["reason"]


def test_min_domains_treats_global_minimum_as_zero(tmp_path: Path) -> None:
    """kube-scheduler's minDomains: with 2 domains and minDomains 3, the minimum counts as 0."""
    objects = [_node("a", zone="z1"), _node("b", zone="z2"),
               _pod("w0", labels={"app": "web"}, node="a"), _pod("w1", labels={"app": "web"}, node="b")]
    pods = _run(tmp_path, objects + [_pod("p", labels={"app": "web"}, spread=[_c(1, "zone", minDomains=3)])])
    assert pods["default/p"]["node"] is None  # 1 + 1 - 0 > 1 everywhere
    pods = _run(tmp_path, objects + [_pod("p", labels={"app": "web"}, spread=[_c(1, "zone")])])
    assert pods["default/p"]["node"] in ("a", "b")


def test_node_taints_policy_honor_leaves_tainted_domains_out(tmp_path: Path) -> None:
    objects = [_node("a", zone="z1"), {"node": {"name": "t", "labels": {"zone": "z2"}, "taints": ["k=v:NoSchedule"]}},
               _pod("w0", labels={"app": "web"}, node="a")]
    tolerate = {"tolerations": [{"key": "k", "operator": "Exists"}]}
    # Ignore (the default): z2's empty domain is the minimum, so a (1 + 1 - 0 = 2) is refused; p tolerates t
    pods = _run(tmp_path, objects + [_pod("p", labels={"app": "web"}, spread=[_c(1, "zone")], extra=tolerate)])
    assert pods["default/p"]["node"] == "t"
    # Honor, for a pod not tolerating the taint: z2 is not a domain, so a (1 + 1 - 1) is fine
    pods = _run(tmp_path, objects + [_pod("p", labels={"app": "web"}, spread=[_c(1, "zone", nodeTaintsPolicy="Honor")])])
    assert pods["default/p"]["node"] == "a"
    pods = _run(tmp_path, objects + [_pod("p", labels={"app": "web"}, spread=[_c(1, "zone")])])
    assert pods["default/p"]["node"] is None


def test_node_affinity_policy_ignore_counts_every_domain(tmp_path: Path) -> None:
    objects = [_node("a", zone="z1"), _node("b", zone="z2"), _pod("w0", labels={"app": "web"}, node="a")]
    only_a = {"nodeSelector": {"zone": "z1"}}
    pods = _run(tmp_path, objects + [_pod("p", labels={"app": "web"}, spread=[_c(1, "zone")], extra=only_a)])
    assert pods["default/p"]["node"] == "a"  # Honor: z2 does not count, 1 + 1 - 1 = 1
    pods = _run(tmp_path, objects + [_pod("p", labels={"app": "web"}, extra=only_a,
                                          spread=[_c(1, "zone", nodeAffinityPolicy="Ignore")])])
    assert pods["default/p"]["node"] is None  # Ignore: z2 counts with 0, 1 + 1 - 0 = 2


def test_match_label_keys_narrow_the_selector_to_the_pods_own_values(tmp_path: Path) -> None:
    objects = [_node("a", zone="z1"), _node("b", zone="z2"),
               _pod("old0", labels={"app": "web", "rev": "1"}, node="a"),
               _pod("old1", labels={"app": "web", "rev": "1"}, node="a")]
    pods = _run(tmp_path, objects + [_pod("p", labels={"app": "web", "rev": "2"}, extra={"nodeSelector": {"zone": "z1"}},
                                          spread=[_c(1, "zone", nodeAffinityPolicy="Ignore", matchLabelKeys=["rev"])])])
    assert pods["default/p"]["node"] == "a"  # rev 1 pods do not count
    pods = _run(tmp_path, objects + [_pod("p", labels={"app": "web", "rev": "2"}, extra={"nodeSelector": {"zone": "z1"}},
                                          spread=[_c(1, "zone", nodeAffinityPolicy="Ignore")])])
    assert pods["default/p"]["node"] is None


def test_gang_members_spread_within_one_statement(tmp_path: Path) -> None:
    """Four members with hostname spread maxSkew 1 over two nodes: binpack would stack them; spread gives 2/2."""
    objects = [_node("a", zone="z1"), _node("b", zone="z1"),
               {"podgroup": {"name": "g", "minMember": 4}}]
    objects += [_pod(f"m{i}", labels={"app": "web"}, group="g", spread=[_c(1, "kubernetes.io/hostname")])
                for i in range(4)]
    pods = _run(tmp_path, objects, BINPACK, cycles=None)
    nodes = sorted(p["node"] for k, p in pods.items() if k.startswith("default/m"))
    assert nodes == ["a", "a", "b", "b"]


def test_gang_that_cannot_spread_is_not_placed_at_all(tmp_path: Path) -> None:
    """z1 (node a) holds 2 web pods; a gang of 4 with zone maxSkew 1 goes b, b, a, b: with room for only
    two on b the fourth member fits nowhere, and the gang places none."""
    def objects(b_cpu: int) -> list:
        out = [_node("a", cpu=8, zone="z1"), _node("b", cpu=b_cpu, zone="z2"),
               _pod("w0", labels={"app": "web"}, node="a"), _pod("w1", labels={"app": "web"}, node="a"),
               {"podgroup": {"name": "g", "minMember": 4}}]
        return out + [_pod(f"m{i}", labels={"app": "web"}, group="g", spread=[_c(1, "zone")]) for i in range(4)]

    pods = _run(tmp_path, objects(3), BINPACK, cycles=None)
    assert sorted(pods[f"default/m{i}"]["node"] for i in range(4)) == ["a", "b", "b", "b"]
    pods = _run(tmp_path, objects(2), BINPACK, cycles=None)
    assert [pods[f"default/m{i}"]["node"] for i in range(4)] == [None] * 4


def test_default_constraints_spread_a_podgroup(tmp_path: Path) -> None:
    config = ('actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n- plugins:\n  - name: predicates\n'
              '    arguments:\n      predicate.PodTopologySpreadDefaultConstraints:\n'
              '      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule}\n'
              '  - name: binpack\n')
    objects = [_node("a"), _node("b"), {"podgroup": {"name": "g", "minMember": 4}}]
    objects += [_pod(f"m{i}", group="g") for i in range(4)]
    pods = _run(tmp_path, objects, config, cycles=None)
    assert sorted(p["node"] for p in pods.values()) == ["a", "a", "b", "b"]
    pods = _run(tmp_path, objects, BINPACK, cycles=None)  # without: binpack stacks them
    assert len({p["node"] for p in pods.values()}) == 1


def test_switch_off(tmp_path: Path) -> None:
    config = PREDICATES + "    arguments: {predicate.PodTopologySpreadEnable: false}\n"
    objects = [_node("a", zone="z1"), _node("b", zone="z2"), _pod("w0", labels={"app": "web"}, node="a"),
               _pod("p", labels={"app": "web"}, spread=[_c(1, "zone", nodeAffinityPolicy="Ignore")],
                    extra={"nodeSelector": {"zone": "z1"}})]
    assert _run(tmp_path, objects, config)["default/p"]["node"] == "a"
    assert _run(tmp_path, objects)["default/p"]["node"] is None


# -- the score ---------------------------------------------------------------------------------------
def test_schedule_anyway_prefers_the_emptier_zone(tmp_path: Path) -> None:
    config = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: predicates\n  - name: nodeorder\n'
    objects = [_node("a", zone="z1"), _node("b", zone="z2"), _pod("w0", labels={"app": "web"}, node="b"),
               _pod("w1", labels={"app": "web"}, node="b"),
               _pod("p", labels={"app": "web"}, spread=[_c(1, "zone", "ScheduleAnyway")])]
    assert _run(tmp_path, objects, config)["default/p"]["node"] == "a"
    # the score moves with the counts: three spread pods in one cycle go a, b? no: a, a, then either
    objects = objects[:4] + [_pod(f"p{i}", labels={"app": "web"}, spread=[_c(1, "zone", "ScheduleAnyway")])
                             for i in range(3)]
    pods = _run(tmp_path, objects, config)
    assert sorted(pods[f"default/p{i}"]["node"] for i in range(2)) == ["a", "a"]


# -- configuration and manifests ------------------------------------------------------------------
@pytest.mark.parametrize("constraint, message", [
    ({"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}, "maxSkew"),
    ({"maxSkew": 1, "topologyKey": "", "whenUnsatisfiable": "DoNotSchedule"}, "topologyKey"),
    ({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Never"}, "whenUnsatisfiable"),
    ({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2}, "minDomains"),
    ({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "nodeTaintsPolicy": "Yes"},
     "nodeTaintsPolicy"),
    ({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "matchLabelKeys": ["app"],
      "labelSelector": {"matchLabels": {"app": "x"}}}, "both matchLabelKeys and labelSelector"),
    ({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
      "labelSelector": {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}}, "operator"),
])
def test_bad_constraints_are_refused_naming_the_field(constraint: dict, message: str) -> None:
    doc = _pod("p", spread=[constraint])
    with pytest.raises(ManifestError, match=message) as info:
        parse_object(doc, "test.yaml")
    assert "spec.topologySpreadConstraints[0]" in str(info.value)


def test_duplicate_constraints_are_refused() -> None:
    with pytest.raises(ManifestError, match="duplicate"):
        parse_object(_pod("p", spread=[_c(1, "zone"), _c(2, "zone")]), "test.yaml")


@pytest.mark.parametrize("value, message", [
    ("x", "expected a list"),
    ([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}], "ScheduleAnyway"),
    ([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {}}],
     "labelSelector must not be set"),
])
def test_bad_default_constraints_are_refused(value: Any, message: str) -> None:
    raw = {"actions": "allocate", "tiers": [{"plugins": [{"name": "predicates", "arguments": {
        "predicate.PodTopologySpreadDefaultConstraints": value}}]}]}
    with pytest.raises((ArgError, Exception), match=message):
        parse_config(yaml.safe_dump(raw), "test")


def test_volcano_switches_are_implemented() -> None:
    """Issue 15: Volcano's predicate.PodAffinityEnable and predicate.PodTopologySpreadEnable set to true were
    refused; they are implemented, so neither is even warned about."""
    raw = {"actions": "allocate", "tiers": [{"plugins": [
        {"name": "predicates", "arguments": {"predicate.PodTopologySpreadEnable": True,
                                             "predicate.PodAffinityEnable": True}},
        {"name": "nodeorder", "arguments": {"podtopologyspread.weight": 3}}]}]}
    config = parse_config(yaml.safe_dump(raw), "test")
    assert not config.unimplemented
    raw["tiers"][0]["plugins"][1]["arguments"] = {"imagelocality.weight": 3}
    assert [u.key for u in parse_config(yaml.safe_dump(raw), "test").unimplemented] == ["imagelocality.weight"]


# -- property: no bind ever violates a DoNotSchedule constraint --------------------------------------
@st.composite
def _clusters(draw: st.DrawFn) -> tuple[list, dict, str]:
    zones = draw(st.integers(1, 3))
    nodes = []
    for i in range(draw(st.integers(2, 6))):
        labels = {} if i and draw(st.booleans()) else {"zone": f"z{draw(st.integers(0, zones - 1))}"}
        nodes.append(_node(f"n{i}", cpu=draw(st.integers(1, 4)), **labels))
    objects: list = list(nodes)
    for j in range(draw(st.integers(0, 4))):  # pods already running, matching the selector or not
        objects.append(_pod(f"r{j}", labels={"app": draw(st.sampled_from(["web", "db"]))},
                            node=f"n{draw(st.integers(0, len(nodes) - 1))}", cpu="0"))
    c = _c(draw(st.integers(1, 2)), draw(st.sampled_from(["zone", "kubernetes.io/hostname"])))
    if draw(st.booleans()):
        c["minDomains"] = draw(st.integers(1, 4))
    for j in range(draw(st.integers(1, 3))):  # gangs, all under the same constraint
        size = draw(st.integers(1, 4))
        objects.append({"podgroup": {"name": f"g{j}", "minMember": draw(st.integers(1, size))}})
        objects += [_pod(f"j{j}-{k}", labels={"app": "web"}, group=f"g{j}", spread=[c]) for k in range(size)]
    return objects, c, draw(st.sampled_from([BINPACK, BINPACK.replace("binpack", "nodeorder")]))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_clusters())
def test_no_bind_violates_a_do_not_schedule_constraint(tmp_path: Path, cluster: tuple) -> None:
    """Every domain that received a new pod ends at most maxSkew above the final minimum: each placement
    kept count + 1 - minimum <= maxSkew, counts only grow (no evictions here), and so does the minimum."""
    objects, c, config = cluster
    pods = _run(tmp_path, objects, config, cycles=None)
    labels = {o["node"]["name"]: o["node"]["labels"] | {"kubernetes.io/hostname": o["node"]["name"]}
              for o in objects if "node" in o}
    app = {o["metadata"]["name"]: o["metadata"]["labels"].get("app") for o in objects if o.get("kind") == "Pod"}
    key = c["topologyKey"]
    counts = dict.fromkeys({v[key] for v in labels.values() if key in v}, 0)
    for p in pods.values():
        if p["node"] and app[p["name"]] == "web" and key in labels[p["node"]]:
            counts[labels[p["node"]][key]] += 1
    low = min(counts.values()) if len(counts) >= c.get("minDomains", 1) else 0
    placed = [p for p in pods.values() if p["node"] and not p["placedBefore"]]
    for p in placed:
        assert key in labels[p["node"]], p
        assert counts[labels[p["node"]][key]] - low <= c["maxSkew"], (p["name"], counts, c)
