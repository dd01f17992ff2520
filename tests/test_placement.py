"""Topology placement through the real scheduler: NUMA zones freed at once, GPUs never oversubscribed."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from hypothesis import HealthCheck, given, settings, strategies as st

from scheduler.api.loader import _node_report
from scheduler.api.manifests import parse_object
from scheduler.api.placement import DEVICES_ANNOTATION, decode_devices
from scheduler.cache import ClusterCache
from scheduler.framework.config import parse_config
from scheduler.scheduler import Scheduler

from .builders import pod, report

AT = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
CONFIG = parse_config("""
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: predicates}, {name: numa-aware}, {name: deviceshare}, {name: nodeorder}]
""", "test")


def scheduler_with(docs: list[dict]) -> tuple[Scheduler, ClusterCache]:
    cache = ClusterCache()
    for doc in docs:
        add(cache, doc)
    return Scheduler(cache, config=CONFIG, clock=lambda: AT), cache


def add(cache: ClusterCache, doc: dict) -> None:
    if doc.get("kind") == "NodeReport":
        _, r = _node_report(doc, "test")
        r.identity.sample_time_ns = int(AT.timestamp() * 1e9)
        cache.accept_report(r, AT.timestamp(), register=True, capacity_key=repr(r.capacity))
    else:
        cache.upsert(parse_object(doc, "test"))


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
            add(cache, pod(f"p{made}", cpu="100m", memory="64Mi", extra=extra))
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
