"""hack/bench/kube_workloads.py scaled down to 50 nodes: one JSON line per workload with every figure, the
upstream threshold and goal, and checks that pass; and the checks themselves catch a broken end state."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "hack" / "bench" / "kube_workloads.py"
KEYS = {"workload", "source", "nodes", "init_pods", "measured_pods", "measured_pods_bound", "churned_pods",
        "evictions", "pods_per_second", "seconds_in_cycles", "cycles", "batch", "checks", "checks_pass",
        "threshold", "goal", "met", "upstream_size", "seed", "wall_seconds"}


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kube_workloads", BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["kube_workloads"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    module.register_builtins()
    return module


def test_two_workloads_at_50_nodes_report_every_figure_and_pass_their_checks() -> None:
    out = subprocess.run([sys.executable, str(BENCH), "--nodes", "50", "--workload", "SchedulingPodAntiAffinity",
                          "--workload", "PreemptionBasic"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [json.loads(line) for line in out.stdout.strip().splitlines()]
    assert [d["workload"] for d in lines] == ["SchedulingPodAntiAffinity", "PreemptionBasic"]
    anti, preempt = lines
    for d in lines:
        assert set(d) == KEYS
        assert d["checks_pass"] is True and all(d["checks"].values()), d["checks"]
        assert d["measured_pods_bound"] == d["measured_pods"] and d["pods_per_second"] > 0
        assert d["upstream_size"] is False and d["met"] is None  # no goal is judged at a scaled-down size
    # upstream's 5000Nodes_2000Pods case (init 1000, measure 2000) scaled by 50/5000, threshold 60, goal 5x
    assert (anti["nodes"], anti["init_pods"], anti["measured_pods"]) == (50, 10, 20)
    assert (anti["threshold"], anti["goal"]) == (60, 300)
    assert "pod_anti_affinity" in anti["checks"] and anti["evictions"] == 0
    # four 900m pods fill each 4-CPU node; each 3-CPU priority-10 pod needs three of them evicted
    assert (preempt["init_pods"], preempt["measured_pods"], preempt["evictions"]) == (200, 50, 150)
    assert preempt["threshold"] is None and preempt["goal"] == 500
    assert preempt["checks"]["only_lower_priority_evicted"] is True


def test_the_checks_catch_broken_end_states(bench: ModuleType) -> None:
    factory = bench.PodFactory()
    rng = __import__("random").Random(1)
    anti = bench.WORKLOADS["SchedulingPodAntiAffinity"]
    nodes = bench.make_nodes(anti, 3, rng)
    green = factory.make("pod-with-pod-anti-affinity.yaml", "sched-1", 2)
    # green too, but in a namespace the terms do not name (sched-0 and sched-1)
    other_ns = [dataclasses.replace(p, labels={"color": "green"}) for p in factory.make("pod-default.yaml", "other", 1)]

    def bound(pods, *where):
        return [dataclasses.replace(p, node_name=n) for p, n in zip(pods, where, strict=True)]

    ok = bound(green, nodes[0].name, nodes[1].name) + bound(other_ns, nodes[0].name)
    assert all(bench.check_placements(anti, nodes, ok, ok[:2], [], []).values())
    stacked = bound(green, nodes[0].name, nodes[0].name)
    assert bench.check_placements(anti, nodes, stacked, stacked, [], [])["pod_anti_affinity"] is False

    spread = bench.WORKLOADS["TopologySpreading"]
    zoned = [dataclasses.replace(n, labels={**n.labels, bench.ZONE: z})
             for n, z in zip(bench.make_nodes(spread, 2, rng), ("moon-1", "moon-2"), strict=True)]
    blue = factory.make("pod-with-topology-spreading.yaml", "default", 7)  # maxSkew 5
    skewed = bound(blue, *[zoned[0].name] * 6, zoned[1].name)
    assert bench.check_placements(spread, zoned, skewed, skewed, [], [])["spread_skew"] is True
    skewed = bound(blue, *[zoned[0].name] * 7)
    assert bench.check_placements(spread, zoned, skewed, skewed, [], [])["spread_skew"] is False

    node_aff = bench.WORKLOADS["SchedulingNodeAffinity"]
    wrong_zone = [dataclasses.replace(zoned[0], labels={**zoned[0].labels, bench.ZONE: "zone3"})]
    pod = bound(factory.make("pod-with-node-affinity.yaml", "default", 1), wrong_zone[0].name)
    assert bench.check_placements(node_aff, wrong_zone, pod, pod, [], [])["node_affinity"] is False

    preempt = bench.WORKLOADS["PreemptionBasic"]
    high = bound(factory.make("pod-high-priority.yaml", "default", 2), nodes[0].name, nodes[1].name)
    low = factory.make("pod-low-priority.yaml", "default", 1)
    assert bench.check_placements(preempt, nodes, high, high, [], low)["only_lower_priority_evicted"] is True
    gone = [dataclasses.replace(high[1], node_name="", evicted=True)]  # a preemptor evicted
    checks = bench.check_placements(preempt, nodes, high[:1], high[:1] + gone, [], gone)
    assert checks["only_lower_priority_evicted"] is False and checks["all_measured_bound"] is False
    crowded = bound(factory.make("pod-high-priority.yaml", "default", 2), nodes[0].name, nodes[0].name)
    assert bench.check_placements(preempt, nodes, crowded, crowded, [], [])["capacity"] is False
