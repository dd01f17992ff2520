"""Topology placement through the real scheduler: NUMA zones freed at once, GPUs never oversubscribed."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proto.vocab.placement import DEVICES_ANNOTATION, decode_devices
from scheduler.api.manifests import parse_object
from scheduler.cluster.cache import ClusterCache
from scheduler.cycle import Scheduler
from scheduler.framework.config import parse_config
from tests.support.builders import pod, report
from tests.support.sessions import add_doc

AT = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
CONFIG = parse_config("""
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: predicates}, {name: numa-aware}, {name: deviceshare}, {name: nodeorder}]
""", "test")


def scheduler_with(docs: list[dict]) -> tuple[Scheduler, ClusterCache]:
    cache = ClusterCache()
    for doc in docs:
        add_doc(cache, doc, AT)
    return Scheduler(cache, config=CONFIG, clock=lambda: AT), cache


def test_a_zone_freed_by_a_finished_pod_is_used_in_the_next_cycle() -> None:
    sched, cache = scheduler_with([
        report("n1", zones=[4, 4]),
        pod("a", cpu=2, memory="1Gi", nodeName="n1", annotations={"scoria.io/numa-nodes": "0"}),
        pod("b", cpu=2, memory="1Gi", nodeName="n1", annotations={"scoria.io/numa-nodes": "1"}),
        pod("c", cpu=3, memory="1Gi", annotations={"volcano.sh/numa-topology-policy": "single-numa-node"})])
    sched.run_once()
    c = cache.pods["default/c"]
    assert not c.node_name and "single-numa-node" in c.reason
    a = cache.pods["default/a"]
    a.phase = "Succeeded"
    cache.upsert(a)
    assert sched.run_once().binds == 1
    assert c.node_name == "n1" and c.annotations["scoria.io/numa-nodes"] == "0"
    # and the zone it took is counted from its annotation in later cycles: another 3-CPU pod has no room
    cache.upsert(parse_object(pod("d", cpu=3, memory="1Gi", annotations={
        "volcano.sh/numa-topology-policy": "single-numa-node"}), "test"))
    sched.run_once()
    assert not cache.pods["default/d"].node_name


GPU_SPEC = st.fixed_dictionaries({"memory": st.sampled_from(["8Gi", "16Gi", "40Gi"]),
                                  "healthy": st.booleans() | st.just(True)})
REQUEST = st.one_of(
    st.fixed_dictionaries({"nvidia.com/gpu": st.integers(1, 2)}),
    st.fixed_dictionaries({"volcano.sh/vgpu-number": st.integers(1, 2),
                           "volcano.sh/vgpu-memory": st.sampled_from([0, 1000, 4000, 9000, 20000]),
                           "volcano.sh/vgpu-cores": st.sampled_from([0, 10, 30, 50, 70, 100])}))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gpus=st.lists(st.lists(GPU_SPEC, min_size=1, max_size=4), min_size=1, max_size=3),
       waves=st.lists(st.lists(REQUEST, min_size=1, max_size=5), min_size=1, max_size=4))
def test_a_gpu_is_never_oversubscribed(gpus, waves) -> None:
    docs = [report(f"n{i}", zones=[16], gpus=g) for i, g in enumerate(gpus)]
    sched, cache = scheduler_with(docs)
    total = {f"GPU-n{i}-{k}": (g, i) for i, node in enumerate(gpus) for k, g in enumerate(node)}
    made = 0
    for wave in waves:
        for req in wave:
            extra = {k: v for k, v in req.items() if v}
            add_doc(cache, pod(f"p{made}", cpu="100m", memory="64Mi", extra=extra), AT)
            made += 1
        sched.run_once()  # later waves see earlier grants only through the pods' annotations
    memory: dict[str, int] = {}
    cores: dict[str, int] = {}
    holders: dict[str, list] = {}
    for p in cache.pods.values():
        if not p.node_name:
            continue
        assert DEVICES_ANNOTATION in p.annotations, f"{p.key} bound without devices"
        for g in decode_devices(p.annotations[DEVICES_ANNOTATION]):
            spec, node = total[g.uuid]
            assert p.node_name == f"n{node}", "a device of another node"
            assert spec["healthy"], f"{p.key} got unhealthy {g.uuid}"
            memory[g.uuid] = memory.get(g.uuid, 0) + g.memory_mib
            cores[g.uuid] = cores.get(g.uuid, 0) + g.cores
            holders.setdefault(g.uuid, []).append((p.key, g.cores, p.requests))
    for uuid, used in memory.items():
        size = {"8Gi": 8192, "16Gi": 16384, "40Gi": 40960}[total[uuid][0]["memory"]]
        assert used <= size, f"{uuid}: {used} MiB given of {size}: {holders[uuid]}"
        assert cores[uuid] <= 100, f"{uuid}: {cores[uuid]}% cores given: {holders[uuid]}"
        if len(holders[uuid]) > 1:
            assert all(c < 100 for _, c, _ in holders[uuid]), f"{uuid}: an exclusive holder shares: {holders[uuid]}"
    for p in cache.pods.values():  # a pod grants exactly what it asked
        if p.node_name:
            grants = decode_devices(p.annotations[DEVICES_ANNOTATION])
            want = p.requests.get("nvidia.com/gpu") or p.requests.get("volcano.sh/vgpu-number")
            assert len(grants) == want and len({g.uuid for g in grants}) == want


def test_a_pod_on_a_node_without_a_report_is_not_given_devices() -> None:
    docs = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "plain"},
             "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"}}},
            pod("whole", cpu=1, extra={"nvidia.com/gpu": 1}),
            pod("shared", cpu=1, extra={"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory": 1000})]
    sched, cache = scheduler_with(docs)
    sched.run_once()
    whole, shared = cache.pods["default/whole"], cache.pods["default/shared"]
    assert whole.node_name == "plain" and DEVICES_ANNOTATION not in whole.annotations  # its device plugin picks
    assert not shared.node_name and "reported no GPUs for shared GPU requests" in shared.reason


def test_devices_recorded_json_round_trips() -> None:
    sched, cache = scheduler_with([report("n1", zones=[8], gpus=[{}, {}]),
                                   pod("t", cpu=1, extra={"nvidia.com/gpu": 2})])
    sched.run_once()
    raw = json.loads(cache.pods["default/t"].annotations[DEVICES_ANNOTATION])
    assert [d["uuid"] for d in raw] == ["GPU-n1-0", "GPU-n1-1"] and all(d["cores"] == 100 for d in raw)


# -- found in review: each of these failed before its fix ---------------------------------------------------
def run_one(docs: list[dict], config: str | None = None) -> ClusterCache:
    sched, cache = scheduler_with(docs)
    if config:
        sched._config = parse_config(config, "test")
    sched.run_once()
    return cache


def granted(cache: ClusterCache, key: str) -> list[int]:
    raw = cache.pods[key].annotations.get(DEVICES_ANNOTATION)
    return sorted(g.index for g in decode_devices(raw)) if raw else []


def test_a_gpu_without_numa_affinity_counts_once_when_zones_are_combined() -> None:
    cache = run_one([report("n1", zones=[4, 4, 4], gpus=[{"zone": 0}, {"zone": -1}, {"zone": 2}]),
                     pod("p", cpu=1, extra={"nvidia.com/gpu": 3},
                         annotations={"volcano.sh/numa-topology-policy": "restricted"})])
    assert granted(cache, "default/p") == [0, 1, 2]  # was: bound with zones 0,1 and no devices at all


def test_restricted_counts_only_gpus_big_enough_for_the_share() -> None:
    cache = run_one([report("n1", zones=[4, 4], gpus=[{"zone": 0, "memory": "16Gi"}, {"zone": 0, "memory": "40Gi"},
                                                        {"zone": 1, "memory": "40Gi"}]),
                     pod("p", cpu=1, extra={"volcano.sh/vgpu-number": 2, "volcano.sh/vgpu-memory": 20000},
                         annotations={"volcano.sh/numa-topology-policy": "restricted"})])
    assert cache.pods["default/p"].node_name == "n1" and granted(cache, "default/p") == [1, 2]


def test_pods_without_recorded_devices_are_counted_after_those_with() -> None:
    alone = {"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-cores": 100}
    recorded = json.dumps([{"resource": "nvidia.com/gpu", "uuid": "GPU-n1-0", "index": 0, "memoryMiB": 81920,
                            "cores": 100}])
    cache = run_one([report("n1", zones=[8], gpus=[{}, {}]),
                     pod("unrecorded", cpu=1, extra=alone, nodeName="n1"),
                     pod("recorded", cpu=1, extra=alone, nodeName="n1", annotations={DEVICES_ANNOTATION: recorded}),
                     pod("new", cpu=1, extra=alone)])
    assert not cache.pods["default/new"].node_name  # both GPUs are taken: one recorded, one guessed


def test_offline_batch_requests_count_in_numa_zones() -> None:
    config = """
actions: "enqueue, allocate"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: predicates}, {name: colocation}, {name: numa-aware}, {name: nodeorder}]
"""
    cache = run_one([report("n1", zones=[4, 4], batchCpu=8000, batchMemory="8Gi"),
                     pod("be", cpu=None, memory=None, extra={"kubernetes.io/batch-cpu": 6000},
                         annotations={"volcano.sh/numa-topology-policy": "single-numa-node"})], config)
    assert not cache.pods["default/be"].node_name  # 6 cores of batch-cpu do not fit a 4-CPU zone


def test_a_bind_drops_decisions_left_over_on_the_pod() -> None:
    stale = json.dumps([{"resource": "nvidia.com/gpu", "uuid": "GPU-gone", "index": 7, "memoryMiB": 1, "cores": 1}])
    cache = run_one([report("n1", zones=[8]), pod("p", cpu=1, annotations={DEVICES_ANNOTATION: stale,
                                                                           "scoria.io/numa-nodes": "3"})])
    p = cache.pods["default/p"]
    assert p.node_name == "n1" and DEVICES_ANNOTATION not in p.annotations and "scoria.io/numa-nodes" not in p.annotations


def test_an_inventory_is_rebuilt_when_a_gpu_changes_but_keeps_its_uuid() -> None:
    sched, cache = scheduler_with([report("n1", zones=[8], gpus=[{"uuid": "GPU-A", "memory": "16Gi"}])])
    add_doc(cache, report("n1", zones=[8], gpus=[{"uuid": "GPU-A", "memory": "40Gi", "zone": 0}]), AT)
    cache.pods  # noqa: B018
    sched.run_once()
    (device,) = cache.inventories._by_node["n1"][1].devices
    assert device.memory_mib == 40960 and device.zone == 0


def test_preemption_frees_gpus_and_zones_for_a_higher_priority_pod() -> None:
    config = """
actions: "enqueue, allocate, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: numa-aware}, {name: deviceshare}, {name: nodeorder}]
"""
    whole = json.dumps([{"resource": "nvidia.com/gpu", "uuid": "GPU-n1-0", "index": 0, "memoryMiB": 81920,
                         "cores": 100}])
    cache = run_one([report("n1", zones=[4, 4], gpus=[{"zone": 0}]), report("n2", zones=[4, 4]),
                     {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
                      "value": 1000},
                     pod("holder", cpu=1, nodeName="n1", extra={"nvidia.com/gpu": 1},
                         annotations={DEVICES_ANNOTATION: whole, "scoria.io/numa-nodes": "0"}),
                     pod("filler", cpu=4, nodeName="n1", annotations={"scoria.io/numa-nodes": "1"}),
                     pod("zone", cpu=4, nodeName="n2", annotations={"scoria.io/numa-nodes": "1"}),
                     pod("other", cpu=2, nodeName="n2", annotations={"scoria.io/numa-nodes": "0"}),
                     pod("gpu", cpu=1, extra={"nvidia.com/gpu": 1}, priorityClassName="high"),
                     pod("pinned", cpu=3, priorityClassName="high", nodeSelector={"kubernetes.io/hostname": "n2"},
                         annotations={"volcano.sh/numa-topology-policy": "single-numa-node"})], config)
    # each frees what the preemptor needs: the GPU's holder, the zone's occupant (n2 has 2 CPUs free in
    # zone 0 and 2 on the node: without the zone's view of it, a 3-CPU single-numa-node pod has nowhere to go)
    assert cache.pods["default/holder"].evicted and cache.pods["default/zone"].evicted
    assert not cache.pods["default/other"].evicted
    assert cache.pods["default/gpu"].nominated_node == "n1" and cache.pods["default/pinned"].nominated_node == "n2"


def test_usage_estimates_of_a_discarded_gang_leave_every_node(monkeypatch) -> None:
    from scheduler.plugins.usage import Usage
    from tests.support.builders import podgroup
    seen = []
    monkeypatch.setattr(Usage, "close", lambda self, ssn: seen.append(self.pending_cpu.copy()), raising=False)
    config = """
actions: "enqueue, allocate"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: predicates}, {name: usage}, {name: nodeorder}]
"""
    # a gang of 4 pods of 3 CPUs on three 4-CPU nodes: three fit, the fourth does not, all are undone
    run_one([report(f"n{i}", zones=[4]) for i in range(3)] + [podgroup("g", minMember=4)]
            + [pod(f"g{i}", cpu=3, group="g") for i in range(4)], config)
    assert seen and not seen[-1].any(), seen  # was: the undone estimates taken off the last node instead


def test_usage_counts_at_an_estimate_the_pods_bound_since_their_nodes_report(monkeypatch) -> None:
    from scheduler.plugins.usage import Usage
    from tests.support.builders import node
    seen = []
    monkeypatch.setattr(Usage, "open", lambda self, ssn, orig=Usage.open: (orig(self, ssn), seen.append(self))[0])
    sched, cache = scheduler_with(
        [report("n0"), report("n1"), node("n2")]
        + [pod(f"p{i}", cpu=c, memory="1Gi", nodeName=n) for i, (c, n) in enumerate(
            [(1, "n0"), (2, "n0"), (4, "n0"), (1, "n1"), (2, "n1"), (1, "n2")])])
    sched._config = parse_config("""
actions: "allocate"
tiers:
- plugins: [{name: predicates}, {name: usage}]
""", "test")
    reported = AT.timestamp()  # every report's sample and receipt
    for key, bound in (("p0", reported + 5), ("p1", reported), ("p2", reported - 5),  # since, at, before it
                       ("p3", None), ("p4", reported + 60),  # not bound by this scheduler; since
                       ("p5", reported + 5)):  # on a node without a report: its usage is not read at all
        cache.pods[f"default/{key}"].bound_at = bound
    sched.run_once()
    usage = seen[-1]
    names = usage.nodes.names
    cpu = dict(zip(names, usage.pending_cpu.tolist(), strict=True))
    memory = dict(zip(names, usage.pending_memory.tolist(), strict=True))
    assert cpu == {"n0": 0.85 * 3000, "n1": 0.85 * 2000, "n2": 0.0}  # estimatedScalingFactors cpu 85%
    assert memory == {"n0": 0.7 * 2 * 2**30, "n1": 0.7 * 2**30, "n2": 0.0}  # memory 70%


def test_a_pod_that_found_no_room_under_a_numa_policy_does_not_stop_one_without() -> None:
    config = """
actions: "enqueue, allocate, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: numa-aware}, {name: nodeorder}]
"""
    high = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 9}
    # n1's zones are each held by one protected pod (critical), and a victim floats on the node: a
    # single-numa-node pod finds no room by evicting it; the same shape without a policy does
    cache = run_one([report("n1", zones=[4, 4]), high,
                     pod("a", cpu=2, nodeName="n1", namespace="kube-system", annotations={"scoria.io/numa-nodes": "0"}),
                     pod("b", cpu=2, nodeName="n1", namespace="kube-system", annotations={"scoria.io/numa-nodes": "1"}),
                     pod("victim", cpu=4, nodeName="n1"),
                     pod("x", cpu=3, priorityClassName="high", creationTimestamp="2026-01-01T00:00:00Z",
                         annotations={"volcano.sh/numa-topology-policy": "single-numa-node"}),
                     pod("y", cpu=3, priorityClassName="high", creationTimestamp="2026-01-01T00:01:00Z")], config)
    assert cache.pods["default/victim"].evicted and cache.pods["default/y"].nominated_node == "n1"
    assert not cache.pods["default/x"].nominated_node
