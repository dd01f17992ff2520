"""Scheduling gates (``spec.schedulingGates``) and host ports (kube-scheduler's NodePorts).

* kube-scheduler's own test cases, as data: ``tests/fixtures/kube/{schedulinggates,nodeports}/*.yaml``
  (the Volcano conformance schema: source/config/cycles/objects/expect, run by tests/support/scenario.py);
* a gated pod is never bound, its reason names the gates, and a gang that needs it waits whole;
* host ports taken by running, placed, pipelined and terminating pods; preemption frees them;
* properties: no gated pod is ever bound, no gang is partly bound for want of a gated member, and no two
  pods on a node share a host port (protocol, IP) — under the default configuration and binpack.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proto.errors import InputError
from scheduler.api.manifests import parse_object
from scheduler.api.objects import HostPort, Node, Pod, PodGroup, PriorityClass
from scheduler.cluster.cache import ClusterCache
from scheduler.cycle import Scheduler
from scheduler.framework.config import DEFAULT_CONFIG, parse_config
from tests.support.builders import pod as build_pod
from tests.support.scenario import run_scenario

KUBE = Path(__file__).resolve().parents[2] / "fixtures" / "kube"
CASES = sorted([*KUBE.glob("schedulinggates/*/*.yaml"), *KUBE.glob("nodeports/*/*.yaml")])
PORTS_REASON = "node(s) didn't have free ports for the requested pod ports"


def test_the_kube_cases_are_there() -> None:
    """They run in tests/scheduler/test_kube_conformance.py with the others."""
    assert len([p for p in CASES if p.parent.parent.name == "nodeports"]) == 20
    assert len([p for p in CASES if p.parent.parent.name == "schedulinggates"]) == 2


# -- manifests ------------------------------------------------------------------------------------
def gp(name: str, *, gates: tuple[str, ...] = (), ports: tuple[dict, ...] = (), **kw) -> dict:
    doc = build_pod(name, **kw)
    if gates:
        doc["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    if ports:
        doc["spec"]["containers"][0]["ports"] = [{"containerPort": p["hostPort"], **p} for p in ports]
    return doc


def parse_pod(doc: dict) -> Pod:
    obj = parse_object(doc, "test.yaml")
    assert isinstance(obj, Pod)
    return obj


def test_manifest_reads_gates_and_host_ports() -> None:
    doc = gp("p", gates=("example.com/foo", "bar"),
             ports=({"hostPort": 80}, {"hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"}))
    doc["spec"]["containers"][0]["ports"].append({"containerPort": 8080})  # no hostPort: takes nothing
    doc["spec"]["initContainers"] = [
        {"name": "plain", "image": "x", "ports": [{"containerPort": 1, "hostPort": 1}]},  # exits first: ignored
        {"name": "sidecar", "image": "x", "restartPolicy": "Always", "ports": [{"containerPort": 2, "hostPort": 2}]}]
    pod = parse_pod(doc)
    assert pod.scheduling_gates == ("example.com/foo", "bar")
    assert set(pod.host_ports) == {HostPort(80, "TCP", "0.0.0.0"), HostPort(53, "UDP", "10.0.0.1"),
                                   HostPort(2, "TCP", "0.0.0.0")}
    assert parse_pod(gp("q")).host_ports == () and parse_pod(gp("q")).scheduling_gates == ()


@pytest.mark.parametrize(("change", "where"), [
    (lambda s: s.update(schedulingGates=[{"name": "a"}, {"name": "a"}]), "spec.schedulingGates[1].name"),
    (lambda s: s.update(schedulingGates=[{"name": ""}]), "spec.schedulingGates[0].name"),
    (lambda s: s.update(schedulingGates=["a"]), "spec.schedulingGates[0]"),
    (lambda s: s["containers"][0].update(ports=[{"hostPort": 70000}]), "spec.containers[0].ports[0].hostPort"),
    (lambda s: s["containers"][0].update(ports=[{"hostPort": 80, "protocol": "tcp"}]),
     "spec.containers[0].ports[0].protocol"),
    (lambda s: s["containers"][0].update(ports=[{"hostPort": "80"}]), "spec.containers[0].ports[0].hostPort"),
])
def test_bad_gates_and_ports_are_refused_naming_the_field(change, where: str) -> None:
    doc = gp("p")
    change(doc["spec"])
    with pytest.raises(InputError, match=where.replace("[", r"\[").replace("]", r"\]")):
        parse_pod(doc)


# -- scenarios ------------------------------------------------------------------------------------
def run(tmp: Path, objects: list, config: str | None = None) -> dict:
    case: dict = {"objects": objects}
    if config:
        case["config"] = config
    result = run_scenario(case, tmp)
    return {f"{p['namespace']}/{p['name']}": p for p in result["pods"]} | {
        "groups": {f"{g['namespace']}/{g['name']}": g for g in result["podGroups"]}}


def test_gated_pod_is_never_bound_and_says_why(tmp_path: Path) -> None:
    out = run(tmp_path, [{"node": {"name": "n1", "cpu": 8}}, gp("a", gates=("example.com/foo",)), gp("b")])
    assert out["default/a"]["node"] is None
    assert out["default/a"]["reason"] == "waiting for scheduling gates: [example.com/foo]"
    assert out["default/b"]["node"] == "n1"


def test_a_gated_member_holds_the_whole_gang(tmp_path: Path) -> None:
    out = run(tmp_path, [{"node": {"name": "n1", "cpu": 8}}, {"podgroup": {"name": "g", "minMember": 3}},
                         gp("a", group="g"), gp("b", group="g"), gp("c", group="g", gates=("example.com/foo",))])
    assert [out[f"default/{n}"]["node"] for n in "abc"] == [None, None, None]
    for n in "ab":
        reason = out[f"default/{n}"]["reason"]
        assert "gated" in reason and "default/c" in reason and "[example.com/foo]" in reason, reason
    assert out["default/c"]["reason"] == "waiting for scheduling gates: [example.com/foo]"
    group = out["groups"]["default/g"]
    assert group["phase"] != "Running"
    assert any("[example.com/foo]" in c["message"] for c in group["conditions"]), group


def test_gated_members_beyond_min_member_do_not_hold_the_gang(tmp_path: Path) -> None:
    out = run(tmp_path, [{"node": {"name": "n1", "cpu": 8}}, {"podgroup": {"name": "g", "minMember": 2}},
                         gp("a", group="g"), gp("b", group="g"), gp("c", group="g", gates=("x",))])
    assert (out["default/a"]["node"], out["default/b"]["node"], out["default/c"]["node"]) == ("n1", "n1", None)
    assert out["groups"]["default/g"]["phase"] == "Running"


def test_a_gated_member_holds_the_gang_through_its_role_minimum(tmp_path: Path) -> None:
    role = {"volcano.sh/task-spec": "ps"}
    out = run(tmp_path, [{"node": {"name": "n1", "cpu": 8}},
                         {"podgroup": {"name": "g", "minMember": 2, "minTaskMember": {"ps": 1, "worker": 1}}},
                         gp("w0", group="g", annotations={"volcano.sh/task-spec": "worker"}),
                         gp("w1", group="g", annotations={"volcano.sh/task-spec": "worker"}),
                         gp("ps", group="g", annotations=role, gates=("x",))])
    assert [out[f"default/{n}"]["node"] for n in ("w0", "w1", "ps")] == [None, None, None]
    assert "minTaskMember" in out["default/w0"]["reason"]


def test_preempt_does_not_evict_for_a_gated_pod(tmp_path: Path) -> None:
    out = run(tmp_path, [{"priorityclass": {"name": "high", "value": 1000}}, {"node": {"name": "n1", "cpu": 2}},
                         gp("low", cpu=2, nodeName="n1"), gp("high", cpu=2, priorityClassName="high", gates=("x",))])
    assert out["default/low"]["evicted"] is False and out["default/high"]["node"] is None


def test_host_ports_spread_pods_and_refuse_the_last(tmp_path: Path) -> None:
    port = ({"hostPort": 80},)
    out = run(tmp_path, [{"node": {"name": "n1", "cpu": 8}}, {"node": {"name": "n2", "cpu": 8}},
                         gp("a", ports=port), gp("b", ports=port), gp("c", ports=port),
                         gp("udp", ports=({"hostPort": 80, "protocol": "UDP"},))])
    assert {out[f"default/{n}"]["node"] for n in "ab"} == {"n1", "n2"}
    assert out["default/c"]["node"] is None
    assert out["default/c"]["reason"] == f"0/2 nodes are available: 2 {PORTS_REASON}"
    assert out["default/udp"]["node"] in ("n1", "n2")  # another protocol: no conflict


def test_ports_of_a_running_pod_keep_others_off_its_node(tmp_path: Path) -> None:
    out = run(tmp_path, [{"node": {"name": "n1", "cpu": 8}}, {"node": {"name": "n2", "cpu": 1}},
                         gp("old", ports=({"hostPort": 9100, "hostIP": "10.0.0.1"},), cpu="100m", nodeName="n1"),
                         gp("new", ports=({"hostPort": 9100},), cpu="100m")])
    assert out["default/new"]["node"] == "n2"  # 0.0.0.0 conflicts with every IP, even on the emptier n1


def test_node_ports_enable_false_turns_the_filter_off(tmp_path: Path) -> None:
    config = DEFAULT_CONFIG.replace("  - name: predicates\n",
                                    "  - name: predicates\n    arguments: {predicate.NodePortsEnable: false}\n")
    assert config != DEFAULT_CONFIG
    port = ({"hostPort": 80},)
    out = run(tmp_path, [{"node": {"name": "n1", "cpu": 8}}, gp("a", ports=port), gp("b", ports=port)], config)
    assert out["default/a"]["node"] == out["default/b"]["node"] == "n1"


def test_preemption_frees_a_port(tmp_path: Path) -> None:
    """Resources fit; only the port is taken: evicting its holder makes room (kube-scheduler's preemption
    counts NodePorts).  Victims go in victim order until the preemptor fits, so a pod without the port
    may go too (kube-scheduler would reprieve it)."""
    port = ({"hostPort": 80},)
    out = run(tmp_path, [{"priorityclass": {"name": "high", "value": 1000}}, {"node": {"name": "n1", "cpu": 8}},
                         gp("low", ports=port, nodeName="n1"), gp("high", ports=port, priorityClassName="high")])
    assert out["default/low"]["evicted"] is True
    assert out["default/high"]["node"] == "n1" or out["default/high"]["nominated"] == "n1"


def test_a_terminating_holder_keeps_its_port_until_gone(tmp_path: Path) -> None:
    """Pipelined onto the port being released, not bound beside the pod still holding it."""
    holder = gp("old", ports=({"hostPort": 80},), nodeName="n1")
    holder["metadata"]["deletionTimestamp"] = "2026-01-01T11:59:00Z"
    out = run(tmp_path, [{"node": {"name": "n1", "cpu": 8}}, holder, gp("new", ports=({"hostPort": 80},))],
              'actions: "allocate"\ntiers:\n- plugins: [{name: gang}, {name: predicates}]\n')
    assert out["default/new"]["node"] is None
    assert out["default/new"]["reason"].startswith("reserved on n1"), out["default/new"]


# -- properties -----------------------------------------------------------------------------------
AT = datetime(2026, 1, 1, tzinfo=UTC)
CONFIGS = {
    "default": DEFAULT_CONFIG,
    "binpack": DEFAULT_CONFIG.replace("  - name: nodeorder\n", ""),
    "preempt without gang": 'actions: "allocate, preempt, backfill"\ntiers:\n'
                            "- plugins: [{name: priority}, {name: conformance}]\n"
                            "- plugins: [{name: predicates}, {name: binpack}]\n",
}
PORTS = st.builds(HostPort, st.sampled_from([80, 443]), st.sampled_from(["TCP", "UDP"]),
                  st.sampled_from(["0.0.0.0", "10.0.0.1", "10.0.0.2"]))


@st.composite
def worlds(draw):
    nodes = [Node(name=f"n{i}", allocatable={"cpu": 8000, "memory": 8 * 2**30, "pods": draw(st.integers(2, 8))})
             for i in range(draw(st.integers(1, 4)))]
    groups, pods = [], []
    running: dict[str, list[HostPort]] = defaultdict(list)
    for j in range(draw(st.integers(1, 6))):
        size = draw(st.integers(1, 4))
        groups.append(PodGroup(namespace="ns", name=f"j{j}", min_member=draw(st.integers(1, size)), created=AT,
                               priority_class_name=draw(st.sampled_from(["", "high"]))))
        for k in range(size):
            ports = tuple(dict.fromkeys(draw(st.lists(PORTS, max_size=2))))
            node = ""
            if draw(st.integers(0, 3)) == 0:  # already running, only where its ports are free
                node = draw(st.sampled_from(nodes)).name
                if any(_conflict(hp, other) for hp in ports for other in running[node]):
                    node = ""
                else:
                    running[node].extend(ports)
            gates = () if node or draw(st.integers(0, 3)) else ("example.com/gate",)
            pods.append(Pod(namespace="ns", name=f"j{j}-{k}", uid=f"j{j}-{k}", requests={"cpu": 500},
                            annotations={"scheduling.k8s.io/group-name": f"j{j}"}, created=AT, node_name=node,
                            phase="Running" if node else "Pending", scheduling_gates=gates, host_ports=ports))
    return nodes, groups, pods


def _conflict(a: HostPort, b: HostPort) -> bool:
    """kube's HostPortInfo.CheckConflict for one pair."""
    return (a.protocol, a.port) == (b.protocol, b.port) and "0.0.0.0" in (a.ip, b.ip) or a == b


def check_cluster(cache: ClusterCache, gangs_held: set[str]) -> None:
    on_node: dict[str, list[tuple[str, HostPort]]] = defaultdict(list)
    for pod in cache.pods.values():
        if not pod.node_name or not pod.active:
            continue
        assert not pod.scheduling_gates, f"{pod.key} is gated ({pod.scheduling_gates}) and was bound"
        assert pod.group_name not in gangs_held, f"{pod.key} bound though its gang needs a gated member"
        for hp in pod.host_ports:
            for other, taken in on_node[pod.node_name]:
                assert not _conflict(hp, taken), f"{pod.key} and {other} share {hp} / {taken} on {pod.node_name}"
        on_node[pod.node_name].extend((pod.key, hp) for hp in pod.host_ports)


@pytest.mark.parametrize("config", list(CONFIGS.values()), ids=list(CONFIGS))
def test_gates_and_ports_hold_in_every_cycle(config: str) -> None:
    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(worlds())
    def check(world) -> None:
        nodes, groups, pods = world
        held = set()  # gangs with nothing running whose ungated members cannot make minMember
        for g in groups:
            members = [p for p in pods if p.group_name == g.name]
            if (not any(p.node_name for p in members) and "gang" in config
                    and sum(1 for p in members if not p.scheduling_gates) < g.min_member):
                held.add(g.name)
        cache = ClusterCache()
        cache.upsert(PriorityClass("high", 1000))
        for obj in (*nodes, *groups, *pods):
            cache.upsert(obj)
        sched = Scheduler(cache, config=parse_config(config), clock=lambda: AT)
        for _ in range(10):
            changed = sched.run_once().changed
            check_cluster(cache, held)
            if not changed:
                break

    check()
