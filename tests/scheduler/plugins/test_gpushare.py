"""Volcano's older GPU sharing beside vGPUs: ``volcano.sh/gpu-memory`` (MiB of one shared GPU) and
``volcano.sh/gpu-number`` (whole GPUs, alone), on the same per-device ledger as whole GPUs and vGPUs."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proto.vocab.placement import (
    DEVICES_ANNOTATION,
    GPU_INDEX_ANNOTATION,
    PREDICATE_TIME_ANNOTATION,
    decode_devices,
    decode_gpu_index,
)
from scheduler.api.loader import _node_report
from scheduler.api.manifests import ManifestError, parse_object
from scheduler.cluster.cache import ClusterCache
from scheduler.cluster.effects import CacheEffects
from scheduler.cycle import Scheduler
from scheduler.framework.config import ConfigError, parse_config
from scheduler.framework.keeper import take_snapshot
from scheduler.framework.session import Session
from scheduler.framework.snapshot import TaskStatus
from scheduler.framework.statement import Statement
from tests.support.builders import node, pod, podgroup, report

AT = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
TIERS = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{{name: priority}}, {{name: gang}}]
- plugins: [{{name: predicates}}, {{name: numa-aware}}, {{name: deviceshare{args}}}, {{name: nodeorder}}]
"""
MODES = {"vgpu": "", "sharing": ", arguments: {deviceshare.GPUSharingEnable: true}",
         "number": ", arguments: {deviceshare.GPUNumberEnable: true}"}
CONFIGS = {mode: parse_config(TIERS.format(args=args), "test") for mode, args in MODES.items()}


def add(cache: ClusterCache, doc: dict) -> None:
    if doc.get("kind") == "NodeReport":
        _, r = _node_report(doc, "test")
        r.identity.sample_time_ns = int(AT.timestamp() * 1e9)
        cache.accept_report(r, AT.timestamp(), register=True, capacity_key=repr(r.capacity))
    else:
        cache.upsert(parse_object(doc, "test"))


def scheduler_with(docs: list[dict], mode: str = "sharing") -> tuple[Scheduler, ClusterCache]:
    cache = ClusterCache()
    for doc in docs:
        add(cache, doc)
    return Scheduler(cache, config=CONFIGS[mode], clock=lambda: AT), cache


def run(docs: list[dict], mode: str = "sharing") -> ClusterCache:
    sched, cache = scheduler_with(docs, mode)
    sched.run_once()
    return cache


def advertised(name: str, number: int, memory: int, unhealthy: str | None = None) -> dict:
    """A Node as Volcano's GPU-share device plugin leaves it: cards and their memory in all, no agent report."""
    doc = node(name, extra={"volcano.sh/gpu-number": number, "volcano.sh/gpu-memory": memory})
    if unhealthy is not None:
        doc["metadata"]["annotations"] = {"volcano.sh/gpu-unhealthy-ids": unhealthy}
    return doc


def grants(cache: ClusterCache, key: str) -> list[tuple[int, int, int]]:
    """(index, memoryMiB, cores) of each device the pod was given."""
    raw = cache.pods[key].annotations.get(DEVICES_ANNOTATION)
    return [(g.index, g.memory_mib, g.cores) for g in decode_devices(raw)] if raw else []


# -- sharing by memory -----------------------------------------------------------------------------------------
def test_pods_share_a_gpu_by_memory_lowest_gpu_first_and_never_beyond_it() -> None:
    cache = run([report("n1", zones=[16], gpus=[{"memory": "16Gi"}, {"memory": "16Gi"}]),
                 pod("a", extra={"volcano.sh/gpu-memory": 8000}, creationTimestamp="2026-01-01T10:00:00Z"),
                 pod("b", extra={"volcano.sh/gpu-memory": 9000}, creationTimestamp="2026-01-01T10:01:00Z"),
                 pod("c", extra={"volcano.sh/gpu-memory": 8000}, creationTimestamp="2026-01-01T10:02:00Z"),
                 pod("d", extra={"volcano.sh/gpu-memory": 7000}, creationTimestamp="2026-01-01T10:03:00Z")])
    # a on GPU 0; b does not fit the 8384 MiB GPU 0 has left, so GPU 1; c fills GPU 0 to 16000 of 16384 MiB;
    # d does not fit GPU 0's 384 MiB left and fits GPU 1's 7384
    assert grants(cache, "default/a") == [(0, 8000, 0)]
    assert grants(cache, "default/b") == [(1, 9000, 0)]
    assert grants(cache, "default/c") == [(0, 8000, 0)]
    assert grants(cache, "default/d") == [(1, 7000, 0)]
    assert cache.pods["default/d"].annotations[GPU_INDEX_ANNOTATION] == "1"


def test_a_pod_bigger_than_every_gpu_waits_with_the_reason() -> None:
    cache = run([node("n1", extra={"volcano.sh/gpu-memory": 40000}),  # declares more memory than one GPU has
                 report("n1", zones=[16], gpus=[{"memory": "16Gi"}, {"memory": "16Gi"}]),
                 pod("big", extra={"volcano.sh/gpu-memory": 20000})])
    big = cache.pods["default/big"]
    assert not big.node_name and "a GPU with 20000 MiB memory (volcano.sh/gpu-memory)" in big.reason


def test_bind_writes_gpu_index_and_distinct_predicate_times_read_back_by_the_simulator(tmp_path) -> None:
    from tests.support.scenario import run_scenario
    result = run_scenario({"config": TIERS.format(args=MODES["number"]), "objects": [
        {"report": {"name": "n1", "zones": [16], "gpus": [{}, {}, {}, {}]}},
        {"pod": {"name": "a", "extra": {"volcano.sh/gpu-number": 2}, "creationTimestamp": "2026-01-01T10:00:00Z"}},
        {"pod": {"name": "b", "extra": {"volcano.sh/gpu-number": 1}, "creationTimestamp": "2026-01-01T10:01:00Z"}},
    ]}, tmp_path)
    devices = {p["name"]: [(d["index"], d["cores"]) for d in p["devices"]] for p in result["pods"]}
    assert devices == {"a": [(0, 100), (1, 100)], "b": [(2, 100)]}
    sched, cache = scheduler_with([report("n1", zones=[16], gpus=[{}, {}, {}, {}]),
                                   pod("a", extra={"volcano.sh/gpu-number": 2}),
                                   pod("b", extra={"volcano.sh/gpu-number": 1})], "number")
    sched.run_once()
    a, b = cache.pods["default/a"].annotations, cache.pods["default/b"].annotations
    assert {a[GPU_INDEX_ANNOTATION], b[GPU_INDEX_ANNOTATION]} == {"0,1", "2"}
    times = {int(a[PREDICATE_TIME_ANNOTATION]), int(b[PREDICATE_TIME_ANNOTATION])}
    assert len(times) == 2 and all(t > int(AT.timestamp() * 1e9) for t in times)


def test_vgpu_and_whole_gpu_pods_get_no_volcano_annotations() -> None:
    cache = run([report("n1", zones=[16], gpus=[{}, {}]), pod("w", extra={"nvidia.com/gpu": 1}),
                 pod("v", extra={"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory": 1000})], "vgpu")
    for key in ("default/w", "default/v"):
        assert cache.pods[key].node_name and GPU_INDEX_ANNOTATION not in cache.pods[key].annotations


# -- sharing by number -------------------------------------------------------------------------------------------
def test_gpu_number_takes_only_gpus_nobody_holds() -> None:
    recorded = json.dumps([{"resource": "nvidia.com/gpu", "uuid": "GPU-n1-1", "index": 1, "memoryMiB": 100,
                            "cores": 0}])  # a small vGPU share left from an earlier configuration
    cache = run([report("n1", zones=[16], gpus=[{}, {}, {}, {}]),
                 pod("v", nodeName="n1", extra={"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory": 100},
                     annotations={DEVICES_ANNOTATION: recorded}),
                 pod("x", extra={"volcano.sh/gpu-number": 3}, creationTimestamp="2026-01-01T10:00:00Z"),
                 pod("y", extra={"volcano.sh/gpu-number": 1}, creationTimestamp="2026-01-01T10:01:00Z")], "number")
    assert sorted(i for i, _, _ in grants(cache, "default/x")) == [0, 2, 3]
    assert not cache.pods["default/y"].node_name and "1 unused GPU(s)" in cache.pods["default/y"].reason


def test_gpu_index_written_by_volcano_is_read_back_for_pods_bound_without_scorias_record() -> None:
    cache = run([advertised("v1", 4, 0),
                 pod("old", nodeName="v1", extra={"volcano.sh/gpu-number": 2},
                     annotations={GPU_INDEX_ANNOTATION: "0,2"}),
                 pod("new", extra={"volcano.sh/gpu-number": 2})], "number")
    assert sorted(i for i, _, _ in grants(cache, "default/new")) == [1, 3]
    assert cache.pods["default/new"].annotations[GPU_INDEX_ANNOTATION] == "1,3"


def test_an_unreadable_gpu_index_is_warned_about_and_the_pod_counted_anyway(caplog) -> None:
    with caplog.at_level(logging.WARNING):
        cache = run([advertised("v1", 2, 0),
                     pod("old", nodeName="v1", extra={"volcano.sh/gpu-number": 1},
                         annotations={GPU_INDEX_ANNOTATION: "zero"}),
                     pod("new", extra={"volcano.sh/gpu-number": 2})], "number")
    assert not cache.pods["default/new"].node_name  # one of the two cards is counted as old's
    assert "volcano.sh/gpu-index" in caplog.text and "'zero'" in caplog.text


# -- modes on one GPU --------------------------------------------------------------------------------------------
def test_a_memory_share_never_lands_on_a_gpu_held_whole() -> None:
    # Volcano counts a gpu-number pod's card as 0 MiB used and would put the share on it; here the card is taken
    whole = json.dumps([{"resource": "nvidia.com/gpu", "uuid": "GPU-n1-0", "index": 0, "memoryMiB": 16384,
                         "cores": 100}])
    cache = run([report("n1", zones=[16], gpus=[{"memory": "16Gi"}, {"memory": "16Gi"}]),
                 pod("num", nodeName="n1", extra={"volcano.sh/gpu-number": 1}, annotations={DEVICES_ANNOTATION: whole}),
                 pod("w", nodeName="n1", extra={"nvidia.com/gpu": 1}),  # unrecorded: counted on the GPU left, 1
                 pod("share", extra={"volcano.sh/gpu-memory": 10})])
    assert not cache.pods["default/share"].node_name


def test_memory_shares_and_vgpus_left_running_share_one_count_of_memory() -> None:
    vgpu = json.dumps([{"resource": "nvidia.com/gpu", "uuid": "GPU-n1-0", "index": 0, "memoryMiB": 10000,
                        "cores": 30}])
    cache = run([report("n1", zones=[16], gpus=[{"memory": "16Gi"}]),
                 pod("v", nodeName="n1", extra={"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory": 10000,
                                                "volcano.sh/vgpu-cores": 30}, annotations={DEVICES_ANNOTATION: vgpu}),
                 pod("fits", extra={"volcano.sh/gpu-memory": 6000}, creationTimestamp="2026-01-01T10:00:00Z"),
                 pod("over", extra={"volcano.sh/gpu-memory": 1000}, creationTimestamp="2026-01-01T10:01:00Z")])
    assert grants(cache, "default/fits") == [(0, 6000, 0)]
    assert not cache.pods["default/over"].node_name  # 10000 + 6000 of 16384: 384 MiB left


def test_a_mode_the_configuration_does_not_enable_waits_and_says_which_flag() -> None:
    cache = run([report("n1", zones=[16], gpus=[{}, {}]), pod("n", extra={"volcano.sh/gpu-number": 1})], "sharing")
    assert not cache.pods["default/n"].node_name
    assert "gpu-number requests need deviceshare.GPUNumberEnable: true" in cache.pods["default/n"].reason
    cache = run([report("n1", zones=[16], gpus=[{}, {}]), pod("m", extra={"volcano.sh/gpu-memory": 100})], "vgpu")
    assert "gpu-memory requests need deviceshare.GPUSharingEnable: true" in cache.pods["default/m"].reason


# -- nodes ------------------------------------------------------------------------------------------------------
def test_gpus_a_node_advertises_without_a_report_are_counted_unhealthy_ones_skipped() -> None:
    cache = run([advertised("v1", 3, 30000, unhealthy="0,x"),
                 pod("a", extra={"volcano.sh/gpu-memory": 6000}, creationTimestamp="2026-01-01T10:00:00Z"),
                 pod("b", extra={"volcano.sh/gpu-memory": 6000}, creationTimestamp="2026-01-01T10:01:00Z"),
                 pod("c", extra={"volcano.sh/gpu-memory": 6000}, creationTimestamp="2026-01-01T10:02:00Z")])
    # three cards of 10000 MiB, card 0 broken: a on card 1, b on card 2 (card 1 has 4000 left), c finds no room
    assert grants(cache, "default/a") == [(1, 6000, 0)] and grants(cache, "default/b") == [(2, 6000, 0)]
    assert not cache.pods["default/c"].node_name


def test_advertised_gpus_are_only_for_volcanos_gpu_share_requests() -> None:
    docs = [node("v1", extra={"volcano.sh/gpu-number": 2, "volcano.sh/gpu-memory": 2000, "nvidia.com/gpu": 2}),
            pod("whole", extra={"nvidia.com/gpu": 1}),
            pod("shared", extra={"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory": 100})]
    cache = run(docs, "vgpu")
    whole, shared = cache.pods["default/whole"], cache.pods["default/shared"]
    assert whole.node_name == "v1" and DEVICES_ANNOTATION not in whole.annotations  # its device plugin picks
    assert not shared.node_name and "reported no GPUs for shared GPU requests" in shared.reason


def test_a_node_without_gpus_counted_says_so() -> None:
    cache = run([node("plain", extra={"volcano.sh/gpu-memory": 1000}), pod("m", extra={"volcano.sh/gpu-memory": 10})])
    assert "no GPUs counted for volcano.sh/gpu-memory/volcano.sh/gpu-number" in cache.pods["default/m"].reason


def test_reported_gpus_are_offered_as_gpu_share_totals_unless_the_node_says_otherwise() -> None:
    sched, cache = scheduler_with([report("n1", zones=[16], gpus=[{"memory": "16Gi"}, {"memory": "16Gi",
                                                                                     "healthy": False}]),
                                   node("n2", extra={"volcano.sh/gpu-memory": 100}),
                                   report("n2", zones=[16], gpus=[{"memory": "16Gi"}]),
                                   pod("m", extra={"volcano.sh/gpu-memory": 10})])
    ssn = Session(take_snapshot(cache), CONFIGS["sharing"], now=AT, effects=CacheEffects(cache))
    ssn.open()
    col = ssn.index.column["volcano.sh/gpu-memory"]
    assert list(ssn.nodes.alloc[col]) == [16384.0, 100.0]  # healthy GPUs only; n2's Node has its word


# -- configuration -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("args", "words"), [
    ("{deviceshare.GPUSharingEnable: true, deviceshare.GPUNumberEnable: true}",
     ["GPUSharingEnable", "GPUNumberEnable", "cannot both be true"]),
    ("{deviceshare.GPUSharingEnable: true, deviceshare.VGPUEnable: true}", ["GPUSharingEnable", "VGPUEnable"]),
    ("{deviceshare.GPUNumberEnable: true, deviceshare.VGPUEnable: true}", ["GPUNumberEnable", "VGPUEnable"]),
    ("{deviceshare.GPUSharingEnable: maybe}", ["deviceshare.GPUSharingEnable", "true or false"]),
])
def test_configurations_volcano_refuses_are_located_errors(args: str, words: list[str]) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(TIERS.format(args=f", arguments: {args}"), "scheduler.conf")
    text = str(err.value)
    assert "scheduler.conf" in text and "deviceshare" in text and all(w in text for w in words), text


def test_with_sharing_on_vgpus_default_off_and_the_exclusive_rules_key_is_warned_about(caplog) -> None:
    cache = run([report("n1", zones=[16], gpus=[{}]),
                 pod("v", extra={"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory": 100})], "sharing")
    assert not cache.pods["default/v"].node_name
    with caplog.at_level(logging.WARNING):
        parse_config(TIERS.format(args=", arguments: {deviceshare.GPUExclusiveRules: [{app: train}]}"), "test")
    assert "deviceshare.GPUExclusiveRules" in caplog.text


# Volcano <=1.8 turned GPU sharing on in predicates (docs/user-guide/how_to_use_gpu_sharing.md and
# how_to_use_gpu_number.md, the configuration without deviceshare): the flags keep their meaning.
LEGACY = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{{name: priority}}, {{name: gang}}]
- plugins: [{{name: predicates, arguments: {{{flags}}}}}, {{name: nodeorder}}{deviceshare}]
"""


@pytest.mark.parametrize(("flag", "request_", "mode"), [("GPUSharingEnable", 8000, "sharing"),
                                                       ("GPUNumberEnable", 1, "number")])
def test_volcano_18s_predicate_gpu_flags_turn_the_same_mode_on(flag: str, request_: int, mode: str) -> None:
    config = parse_config(LEGACY.format(flags=f"predicate.{flag}: true", deviceshare=""), "legacy.conf")
    ds = config.plugin("deviceshare")
    assert ds is not None and ds.args.as_dict() == CONFIGS[mode].plugin("deviceshare").args.as_dict()
    assert config.plugin_names() == ["priority", "gang", "predicates", "deviceshare", "nodeorder"]
    assert not config.unimplemented  # nothing is only warned about: the flag is acted on
    resource = "volcano.sh/gpu-memory" if mode == "sharing" else "volcano.sh/gpu-number"
    cache = ClusterCache()
    for doc in (report("n1", zones=[16], gpus=[{"memory": "16Gi"}]), pod("a", extra={resource: request_})):
        add(cache, doc)
    Scheduler(cache, config=config, clock=lambda: AT).run_once()
    assert cache.pods["default/a"].node_name == "n1" and grants(cache, "default/a")


def test_a_predicate_gpu_flag_joins_a_configured_deviceshare_and_its_conflicts_are_refused_there() -> None:
    config = parse_config(LEGACY.format(flags="predicate.GPUSharingEnable: true",
                                        deviceshare=", {name: deviceshare, arguments: {deviceshare.ScheduleWeight: 3}}"),
                          "legacy.conf")
    assert config.plugin_names().count("deviceshare") == 1
    args = config.plugin("deviceshare").args
    assert args.gpu_sharing and args.weight == 3 and not args.vgpu
    with pytest.raises(ConfigError) as err:
        parse_config(LEGACY.format(flags="predicate.GPUSharingEnable: true",
                                   deviceshare=", {name: deviceshare, arguments: {deviceshare.VGPUEnable: true}}"),
                     "legacy.conf")
    text = str(err.value)
    assert text.startswith("legacy.conf: tiers[1].plugins[0] (predicates): predicate.GPUSharingEnable read as "
                           "deviceshare.GPUSharingEnable:") and "VGPUEnable" in text, text
    with pytest.raises(ConfigError, match="cannot both be true"):
        parse_config(LEGACY.format(flags="predicate.GPUSharingEnable: true, predicate.GPUNumberEnable: true",
                                   deviceshare=""), "legacy.conf")


def test_predicate_gpu_flags_set_false_change_nothing() -> None:
    config = parse_config(LEGACY.format(flags="predicate.GPUSharingEnable: false", deviceshare=""), "legacy.conf")
    assert "deviceshare" not in config.plugin_names() and not config.unimplemented


# -- bad input ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("extra", "words"), [
    ({"volcano.sh/gpu-memory": "-1"}, ["resources.requests.volcano.sh/gpu-memory", "negative"]),
    ({"volcano.sh/gpu-memory": "1.5"}, ["resources.requests.volcano.sh/gpu-memory", "whole"]),
    ({"volcano.sh/gpu-memory": "1500m"}, ["resources.requests.volcano.sh/gpu-memory", "whole"]),
    ({"volcano.sh/gpu-number": "0.5"}, ["resources.requests.volcano.sh/gpu-number", "whole"]),
    ({"volcano.sh/gpu-memory": "10Gi"}, ["spec.containers[*].resources", "more than any GPU has", "not bytes"]),
    ({"volcano.sh/gpu-memory": "1e30"}, ["resources.requests.volcano.sh/gpu-memory", "out of range"]),
    ({"volcano.sh/gpu-number": "65"}, ["spec.containers[*].resources", "volcano.sh/gpu-number"]),
    ({"volcano.sh/gpu-memory": "100", "volcano.sh/gpu-number": "1"}, ["spec.containers[*].resources", "not both"]),
    ({"volcano.sh/gpu-memory": "100", "nvidia.com/gpu": "1"}, ["spec.containers[*].resources", "nvidia.com/gpu"]),
    ({"volcano.sh/gpu-number": "1", "volcano.sh/vgpu-number": "1"}, ["volcano.sh/vgpu-number", "same GPUs"]),
])
def test_bad_gpu_share_requests_are_located_errors(extra: dict, words: list[str]) -> None:
    with pytest.raises(ManifestError) as err:
        parse_object(pod("p", extra=extra), "pods.yaml")
    text = str(err.value)
    assert "pods.yaml" in text and all(w in text for w in words), text


def test_a_huge_gpu_memory_on_a_running_pod_does_not_stop_scheduling() -> None:
    # its requests are read as none (with a warning); its node's total is full, another node takes the pod
    cache = run([report("n1", zones=[16], gpus=[{}]), report("n2", zones=[16], gpus=[{}]),
                 pod("odd", nodeName="n2", extra={"volcano.sh/gpu-memory": 2**21}),
                 pod("m", extra={"volcano.sh/gpu-memory": 100})])
    assert cache.pods["default/m"].node_name == "n1"


def test_gpu_index_reads_only_lists_of_indices() -> None:
    assert decode_gpu_index("0,3") == (0, 3)
    for bad in ("", "0,", "-1", "0,0", "a", "1234567"):
        with pytest.raises(ValueError, match="volcano.sh/gpu-index"):
            decode_gpu_index(bad)


# -- release ---------------------------------------------------------------------------------------------------------
def test_a_discarded_gang_leaves_no_gpu_index_and_frees_its_gpus() -> None:
    # pkg/scheduler/api/devices/nvidia/gpushare/device_info_test.go, TestReleaseReturnsRemovedAnnotationKeys: a
    # released pod drops volcano.sh/gpu-index and volcano.sh/predicate-time. Here: a gang of three on two GPUs is
    # placed two pods deep and undone; nothing is written, and the next pod finds both GPUs free.
    cache = run([report("n1", zones=[16], gpus=[{}, {}]), podgroup("g", minMember=3),
                 *[pod(f"g{i}", group="g", extra={"volcano.sh/gpu-number": 1}) for i in range(3)],
                 pod("after", extra={"volcano.sh/gpu-number": 2}, creationTimestamp="2026-01-01T11:00:00Z")], "number")
    for i in range(3):
        p = cache.pods[f"default/g{i}"]
        assert not p.node_name and GPU_INDEX_ANNOTATION not in p.annotations
        assert PREDICATE_TIME_ANNOTATION not in p.annotations
    assert sorted(i for i, _, _ in grants(cache, "default/after")) == [0, 1]


# -- properties ---------------------------------------------------------------------------------------------------
GPU_SPEC = st.fixed_dictionaries({"memory": st.sampled_from(["8Gi", "16Gi"]), "healthy": st.booleans() | st.just(True)})
SHARES = st.one_of(
    st.fixed_dictionaries({"volcano.sh/gpu-memory": st.sampled_from([1, 1000, 4000, 5000, 8192, 9000, 16384, 20000])}),
    st.fixed_dictionaries({"volcano.sh/gpu-number": st.integers(1, 3)}))
REQUEST = st.one_of(
    SHARES, SHARES,
    st.fixed_dictionaries({"nvidia.com/gpu": st.integers(1, 2)}),
    st.fixed_dictionaries({"volcano.sh/vgpu-number": st.integers(1, 2),
                           "volcano.sh/vgpu-memory": st.sampled_from([0, 1000, 9000]),
                           "volcano.sh/vgpu-cores": st.sampled_from([0, 50, 100])}))
WAVE = st.tuples(st.sampled_from(["sharing", "sharing", "number", "vgpu"]), st.lists(REQUEST, min_size=1, max_size=6),
                 st.lists(st.integers(0, 30), max_size=3))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gpus=st.lists(st.lists(GPU_SPEC, min_size=1, max_size=4), min_size=1, max_size=2),
       cards=st.lists(st.tuples(st.integers(1, 4), st.sampled_from([0, 8192, 16384])), max_size=1),
       waves=st.lists(WAVE, min_size=1, max_size=4))
def test_no_gpu_memory_or_exclusivity_is_ever_oversold_whatever_the_pods_and_configurations(gpus, cards, waves):
    """Pods of every mode arrive in waves, each wave under one of the three configurations (so pods of other
    modes are left running), and some finish between waves: no GPU ever holds more memory than it has, an
    exclusive grant is alone, and each pod holds exactly what it asked for, as its annotations say."""
    docs = [report(f"n{i}", zones=[16], gpus=g) for i, g in enumerate(gpus)]
    size: dict[tuple[str, str], tuple[int, bool]] = {}
    for i, g in enumerate(gpus):
        for k, spec in enumerate(g):
            size[(f"n{i}", f"GPU-n{i}-{k}")] = ({"8Gi": 8192, "16Gi": 16384}[spec["memory"]], spec["healthy"])
    for i, (number, each) in enumerate(cards):
        docs.append(advertised(f"v{i}", number, number * each, unhealthy="0"))
        for k in range(number):
            size[(f"v{i}", f"volcano.sh/gpu-number/{k}")] = (each, k != 0)
    sched, cache = scheduler_with(docs)
    made = 0
    for mode, wave, finish in waves:
        bound = sorted(k for k, p in cache.pods.items() if p.node_name and p.phase == "Running")
        for n in finish:  # pods finish: what they held is free in the next cycle
            if bound:
                done = cache.pods[bound[n % len(bound)]]
                done.phase = "Succeeded"
                cache.upsert(done)
        for req in wave:
            add(cache, pod(f"p{made}", cpu="100m", memory="64Mi", extra={k: v for k, v in req.items() if v}))
            made += 1
        sched._config = CONFIGS[mode]
        sched.run_once()
        check_ledger(cache, size)


def check_ledger(cache: ClusterCache, size: dict) -> None:
    memory: dict[tuple, int] = {}
    holders: dict[tuple, list] = {}
    for p in cache.pods.values():
        if not p.node_name or p.phase != "Running":
            continue
        assert DEVICES_ANNOTATION in p.annotations or "nvidia.com/gpu" in p.requests, f"{p.key} bound without GPUs"
        given_ = decode_devices(p.annotations.get(DEVICES_ANNOTATION, "[]"))
        for g in given_:
            key = (p.node_name, g.uuid)
            assert key in size, f"{p.key}: a device not on its node: {key}"
            assert size[key][1], f"{p.key} got unhealthy {key}"
            memory[key] = memory.get(key, 0) + g.memory_mib
            holders.setdefault(key, []).append((p.key, g.cores))
        want_memory, want_number = p.requests.get("volcano.sh/gpu-memory"), p.requests.get("volcano.sh/gpu-number")
        if want_memory:
            assert [(g.memory_mib, g.cores) for g in given_] == [(want_memory, 0)], p.key
        if want_number:
            assert len({g.uuid for g in given_}) == want_number and all(g.cores == 100 for g in given_), p.key
        if want_memory or want_number:
            assert p.annotations[GPU_INDEX_ANNOTATION] == ",".join(str(g.index) for g in given_), p.key
            assert int(p.annotations[PREDICATE_TIME_ANNOTATION]) > 0
        else:
            assert GPU_INDEX_ANNOTATION not in p.annotations, p.key
    for key, used in memory.items():
        assert used <= size[key][0], f"{key}: {used} MiB given of {size[key][0]}: {holders[key]}"
        assert sum(c for _, c in holders[key]) <= 100, f"{key}: cores oversold: {holders[key]}"
        if len(holders[key]) > 1:
            assert all(c < 100 for _, c in holders[key]), f"{key}: an exclusive holder shares: {holders[key]}"


OPS = st.lists(st.tuples(st.sampled_from(["place", "mark", "rollback"]), st.integers(0, 1000)), max_size=25)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mode=st.sampled_from(sorted(MODES)), pending=st.lists(REQUEST, min_size=1, max_size=8), ops=OPS)
def test_a_released_pod_frees_exactly_what_it_held(mode, pending, ops) -> None:
    """Placements inside a statement, rolled back to random marks and finally discarded: after each step the
    ledger holds exactly the sum of what the placed pods hold, never more than a GPU has, and at the end
    exactly what the running pods held before."""
    held = json.dumps([{"resource": "nvidia.com/gpu", "uuid": "GPU-n0-0", "index": 0, "memoryMiB": 5000,
                        "cores": 0}])
    docs = [report("n0", zones=[8, 8], gpus=[{"memory": "16Gi", "zone": 0}, {"memory": "16Gi", "zone": 1},
                                             {"memory": "8Gi"}]),
            advertised("v0", 2, 20000),
            pod("running", nodeName="n0", extra={"volcano.sh/gpu-memory": 5000}, annotations={DEVICES_ANNOTATION: held})]
    docs += [pod(f"p{i}", cpu="100m", memory="64Mi", extra={k: v for k, v in r.items() if v})
             for i, r in enumerate(pending)]
    _, cache = scheduler_with(docs)
    ssn = Session(take_snapshot(cache), CONFIGS[mode], now=AT, effects=CacheEffects(cache))
    ssn.open()
    t = ssn.topology
    before = snapshot_usage(t)
    tasks = [task for job in ssn.jobs.values() for task in job.tasks.values() if task.status == TaskStatus.PENDING]
    stmt, marks = Statement(ssn), []
    for op, n in ops:
        if op == "place":
            waiting = [task for task in tasks if task.status == TaskStatus.PENDING]
            if not waiting:
                continue
            task = waiting[n % len(waiting)]
            fits = np.flatnonzero(ssn.feasible(task, ssn.nodes.free(task)))
            if fits.size:
                stmt.allocate(task, int(fits[n % fits.size]))
        elif op == "mark":
            marks.append(stmt.mark())
        elif marks:  # back to a random mark: later marks go with it
            k = n % len(marks)
            stmt.rollback(marks[k])
            del marks[k:]
        expected = snapshot_usage_of(t, before, tasks)
        for name, arr in snapshot_usage(t).items():
            assert np.allclose(arr, expected[name]), name
        assert (t.used.dev_memory <= t.s.dev_memory + 1e-6).all()
        assert ((t.used.dev_alone == 0) | (t.used.dev_holders == 1)).all()
    stmt.discard()
    for name, arr in snapshot_usage(t).items():
        assert np.array_equal(arr, before[name]), name
    assert all(task.placement is None for task in tasks)


def snapshot_usage(t) -> dict[str, np.ndarray]:
    u = t.used
    return {"memory": u.dev_memory.copy(), "cores": u.dev_cores.copy(), "holders": u.dev_holders.copy(),
            "alone": u.dev_alone.copy()}


def snapshot_usage_of(t, before: dict, tasks: list) -> dict[str, np.ndarray]:
    """What the ledger must hold: the running pods' part plus each placed task's own assignment."""
    out = {name: arr.astype(float).copy() for name, arr in before.items()}
    for task in tasks:
        a = t.assigned.get(task.uid)
        if task.status == TaskStatus.PENDING:
            assert a is None, f"{task.name} released but still holds {a}"
            continue
        for d, mem, cores, alone in a.devices:
            out["memory"][d] += mem
            out["cores"][d] += cores
            out["holders"][d] += 1
            out["alone"][d] += alone
    return out


def test_gpus_volcano_gave_count_even_where_this_configuration_does_not_share_them() -> None:
    # a cluster moving from Volcano's GPU sharing to vGPUs: the running gpu-memory pod's card stays counted
    cache = run([report("n1", zones=[16], gpus=[{"memory": "16Gi"}]),
                 pod("old", nodeName="n1", extra={"volcano.sh/gpu-memory": 12000},
                     annotations={GPU_INDEX_ANNOTATION: "0"}),
                 pod("v", extra={"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory": 8000})], "vgpu")
    assert not cache.pods["default/v"].node_name and "8000 MiB" in cache.pods["default/v"].reason


def test_preemption_frees_a_card_for_a_memory_share() -> None:
    config = parse_config(TIERS.replace('"enqueue, allocate, backfill"', '"enqueue, allocate, preempt"')
                          .replace("{name: gang}]", "{name: gang}, {name: conformance}]")
                          .format(args=MODES["sharing"]), "test")
    sched, cache = scheduler_with([
        advertised("v1", 2, 20000),
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
        pod("low0", nodeName="v1", extra={"volcano.sh/gpu-memory": 6000}, annotations={GPU_INDEX_ANNOTATION: "0"}),
        pod("low1", nodeName="v1", extra={"volcano.sh/gpu-memory": 9000}, annotations={GPU_INDEX_ANNOTATION: "1"}),
        pod("hi", priorityClassName="high", extra={"volcano.sh/gpu-memory": 8000})])
    sched._config = config
    sched.run_once()
    evicted = [k for k in ("default/low0", "default/low1") if cache.pods[k].evicted]
    assert len(evicted) == 1 and cache.pods["default/hi"].nominated_node == "v1"
    sched.run_once()
    assert grants(cache, "default/hi") == [(int(evicted[0][-1]), 8000, 0)]  # the card its victim held
