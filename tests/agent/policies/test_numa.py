"""NUMA pinning: the pure policy on fixture topologies, then through the executor and the agent on v1/v2 trees."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agent.cgroups.backend import detect_backend
from agent.cgroups.executor import Executor
from agent.cgroups.layout import detect_layout
from agent.collectors.topology import read_capacity
from agent.evictor import RecordingEvictor
from agent.hostpaths import HostPaths
from agent.intents import CgroupWrite
from agent.loop import Agent, AgentConfig
from agent.pods import PodInfo, StaticPodSource
from agent.policies.nodestate import NodeState, PodSample
from agent.policies.numa import BAD_ANNOTATION, NO_CPUS, UNKNOWN_ZONE, numa_intents
from agent.profile import ProfileWatcher
from hack.lib.cgroup_fixtures import FakePod, container_dir, make_proc, make_tree, pod_dir
from proto.model import Capacity, NumaZone, QosLevel
from proto.vocab.placement import NUMA_NODES_ANNOTATION
from tests.support.sysfs_fixtures import make_host

GI = 2**30
A, B = "0000aaaa-0000-4000-8000-000000000001", "0000bbbb-0000-4000-8000-000000000002"
C1, C2 = "1" * 64, "2" * 64


def pod(uid: str = A, zones: str | None = "0", name: str = "p") -> PodInfo:
    annotations = {} if zones is None else {NUMA_NODES_ANNOTATION: zones}
    return PodInfo(uid, "ml", name, "Guaranteed", QosLevel.LC, annotations=annotations)


def sample(info: PodInfo, containers=("pod/c1", "pod/c2"), path: str | None = "pod") -> PodSample:
    return PodSample(info, path, container_paths=tuple(containers))


def state(zones, *samples: PodSample) -> NodeState:
    return NodeState(cpu_capacity=8000, memory_capacity=16 * GI, cpu_used=0, memory_used=0, pods=samples,
                     numa_zones=tuple(zones))


def two_zone_host(tmp_path: Path, **kw) -> tuple[NumaZone, ...]:
    """Two sockets of four cores with hyperthreads, one zone each (Intel numbering: zone 0 = 0-3,8-11)."""
    return tuple(read_capacity(make_host(tmp_path, sockets=2, cores_per_socket=4, threads_per_core=2,
                                         numa_nodes=2, **kw)).numa_zones)


def cpusets(writes: list[CgroupWrite]) -> dict[str, tuple]:
    out: dict[str, dict] = {}
    for w in writes:
        out.setdefault(w.path, {})[w.knob] = w.value
    return {path: (knobs["cpuset.cpus"], knobs["cpuset.mems"]) for path, knobs in out.items()}


# -- the policy ---------------------------------------------------------------------------------

PLACED = {
    "zone-0": ("0", ("0-3,8-11", "0")),
    "zone-1": ("1", ("4-7,12-15", "1")),
    "both-zones": ("1,0", ("0-15", "0,1")),
}


@pytest.mark.parametrize("zones,want", PLACED.values(), ids=list(PLACED))
def test_each_container_gets_its_zones_cpus_and_memory(tmp_path, zones, want):
    plan = numa_intents(state(two_zone_host(tmp_path), sample(pod(zones=zones))))
    assert plan.problems == []
    assert cpusets(plan.writes) == {"pod/c1": want, "pod/c2": want}, "containers only, never the pod cgroup"
    assert all("ml/p" in w.why and "NUMA zones" in w.why for w in plan.writes)


def test_offline_cpus_are_left_out(tmp_path):
    zones = two_zone_host(tmp_path, offline=(9, 10))
    plan = numa_intents(state(zones, sample(pod(zones="0"))))
    assert cpusets(plan.writes)["pod/c1"] == ("0-3,8,11", "0")


PROBLEMS = {
    "zone-not-on-this-node": ("2", UNKNOWN_ZONE, "zone 2 is not on this node (zones 0,1)"),
    "one-of-two-zones-missing": ("1,3", UNKNOWN_ZONE, "zone 3 is not on this node"),
    "not-a-number": ("zero", BAD_ANNOTATION, "expected zone ids like '0' or '0,1', got 'zero'"),
    "empty": ("", BAD_ANNOTATION, "expected zone ids"),
    "negative": ("-1", BAD_ANNOTATION, "expected zone ids"),
    "listed-twice": ("0,0", BAD_ANNOTATION, "zone listed twice"),
}


@pytest.mark.parametrize("zones,reason,detail", PROBLEMS.values(), ids=list(PROBLEMS))
def test_a_pod_that_cannot_be_pinned_is_skipped_and_named(tmp_path, zones, reason, detail):
    bad, good = pod(A, zones=zones, name="bad"), pod(B, zones="1", name="good")
    plan = numa_intents(state(two_zone_host(tmp_path), sample(bad, ["bad/c"]), sample(good, ["good/c"])))
    assert cpusets(plan.writes) == {"good/c": ("4-7,12-15", "1")}, "the other pod is still pinned"
    (problem,) = plan.problems
    assert (problem.uid, problem.pod, problem.reason) == (A, "ml/bad", reason)
    assert detail in problem.detail and NUMA_NODES_ANNOTATION in problem.detail


def test_a_zone_without_online_cpus_is_a_problem(tmp_path):
    zones = two_zone_host(tmp_path, offline=(4, 5, 6, 7, 12, 13, 14, 15))
    plan = numa_intents(state(zones, sample(pod(zones="1"))))
    assert plan.writes == [] and [p.reason for p in plan.problems] == [NO_CPUS]


def test_pods_without_the_annotation_or_a_cgroup_are_untouched(tmp_path):
    zones = two_zone_host(tmp_path)
    plan = numa_intents(state(zones, sample(pod(A, zones=None)), sample(pod(B, zones="0"), path=None)))
    assert plan.writes == [] and plan.problems == []


def test_a_pod_without_containers_yet_has_nothing_to_write(tmp_path):
    plan = numa_intents(state(two_zone_host(tmp_path), sample(pod(zones="0"), containers=())))
    assert plan.writes == [] and plan.problems == []


def test_a_node_without_numa_sysfs_is_one_zone(tmp_path):
    zones = tuple(read_capacity(make_host(tmp_path, cores_per_socket=4, numa_sysfs=False)).numa_zones)
    assert cpusets(numa_intents(state(zones, sample(pod(zones="0")))).writes)["pod/c1"] == ("0-3", "0")
    assert [p.reason for p in numa_intents(state(zones, sample(pod(zones="1")))).problems] == [UNKNOWN_ZONE]


# -- through the executor, on kubelet trees ------------------------------------------------------

TREES = [(1, "cgroupfs"), (1, "systemd"), (2, "cgroupfs"), (2, "systemd")]


@pytest.mark.parametrize("version,driver", TREES, ids=[f"v{v}-{d}" for v, d in TREES])
def test_the_executor_pins_container_cgroups_and_leaves_the_pod_cgroup(tmp_path, version, driver):
    fake = FakePod(A, "Guaranteed", containers=(C1, C2))
    root = tmp_path / "cg"
    backend = detect_backend(make_tree(root, version=version, driver=driver, pods=[fake]))
    layout = detect_layout(backend)
    pod_path = layout.pod_path(A, "Guaranteed")
    assert pod_path == pod_dir(version, driver, fake)
    containers = layout.containers(pod_path)
    plan = numa_intents(state(two_zone_host(tmp_path / "host"), sample(pod(zones="1"), containers, pod_path)))
    executor = Executor(backend)
    assert len(executor.apply(plan.writes)) == 4
    files = (lambda rel: root / "cpuset" / rel) if version == 1 else (lambda rel: root / rel)
    for cid in (C1, C2):
        folder = files(f"{pod_path}/{container_dir(driver, 'containerd', cid)}")
        assert (folder / "cpuset.cpus").read_text() == "4-7,12-15" and (folder / "cpuset.mems").read_text() == "1"
    before = "0-3" if version == 1 else ""
    assert (files(pod_path) / "cpuset.cpus").read_text().strip() == before
    assert executor.apply(plan.writes) == [], "already so: nothing written again"


# -- in the agent's slow loop ----------------------------------------------------------------------

def build_agent(tmp_path: Path, version: int, pods: list[PodInfo], fakes: list[FakePod]) -> tuple[Agent, Path]:
    root = tmp_path / "cg"
    paths = make_tree(root, version=version, driver="systemd", pods=fakes)
    make_proc(tmp_path / "proc")
    paths = HostPaths(sys=tmp_path / "sys", proc=tmp_path / "proc", cgroup=paths.cgroup)
    backend = detect_backend(paths)
    zones = list(two_zone_host(tmp_path / "host"))
    agent = Agent(AgentConfig("node-a"), paths=paths, backend=backend, layout=detect_layout(backend),
                  pods=StaticPodSource(pods), profiles=ProfileWatcher(None), evictor=RecordingEvictor(),
                  read_capacity=lambda p: Capacity(16000, 32 * GI, numa_zones=zones))
    return agent, root


@pytest.mark.parametrize("version", [1, 2])
def test_the_slow_loop_pins_annotated_pods(tmp_path, version):
    fakes = [FakePod(A, "Guaranteed", containers=(C1,)), FakePod(B, "Guaranteed", containers=(C2,))]
    agent, root = build_agent(tmp_path, version, [pod(A, zones="0"), pod(B, zones=None)], fakes)
    agent.slow_tick()
    layout = agent.layout
    base = root / "cpuset" if version == 1 else root
    pinned = base / layout.pod_path(A, "Guaranteed") / container_dir("systemd", "containerd", C1)
    untouched = base / layout.pod_path(B, "Guaranteed") / container_dir("systemd", "containerd", C2)
    assert (pinned / "cpuset.cpus").read_text() == "0-3,8-11" and (pinned / "cpuset.mems").read_text().strip() == "0"
    assert (untouched / "cpuset.cpus").read_text().strip() == ("0-3" if version == 1 else "")


def test_a_new_container_is_pinned_on_the_next_tick(tmp_path):
    agent, root = build_agent(tmp_path, 2, [pod(A, zones="1")], [FakePod(A, "Guaranteed", containers=(C1,))])
    agent.slow_tick()
    restarted = root / agent.layout.pod_path(A, "Guaranteed") / container_dir("systemd", "containerd", C2)
    make_tree(root, version=2, driver="systemd", pods=[FakePod(A, "Guaranteed", containers=(C2,))])
    agent.slow_tick()
    assert (restarted / "cpuset.cpus").read_text() == "4-7,12-15"


def test_dry_run_pins_nothing(tmp_path):
    agent, root = build_agent(tmp_path, 2, [pod(A, zones="1")], [FakePod(A, "Guaranteed", containers=(C1,))])
    agent.config.enforce = False
    agent.slow_tick()
    container = root / agent.layout.pod_path(A, "Guaranteed") / container_dir("systemd", "containerd", C1)
    assert (container / "cpuset.cpus").read_text().strip() == ""


def test_unpinnable_pods_are_warned_about_once_and_counted(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="agent.loop")
    fakes = [FakePod(A, "Guaranteed", containers=(C1,)), FakePod(B, "Guaranteed", containers=(C2,))]
    pods = [pod(A, zones="7", name="far"), pod(B, zones="x", name="typo")]
    agent, _ = build_agent(tmp_path, 1, pods, fakes)
    for _ in range(3):
        agent.slow_tick()
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2
    assert "not pinning pod ml/far to its NUMA zones" in warnings[0] and "zone 7 is not on this node" in warnings[0]
    assert "ml/typo" in warnings[1] and "'x'" in warnings[1]
    value = agent.metrics.registry.get_sample_value
    assert value("scoria_agent_numa_unpinned_pods", {"reason": UNKNOWN_ZONE}) == 1
    assert value("scoria_agent_numa_unpinned_pods", {"reason": BAD_ANNOTATION}) == 1
    agent.pods.set([pod(A, zones="0", name="far")])  # the scheduler's next placement fits this node
    agent.slow_tick()
    assert value("scoria_agent_numa_unpinned_pods", {"reason": UNKNOWN_ZONE}) == 0
    assert value("scoria_agent_numa_unpinned_pods", {"reason": NO_CPUS}) == 0
