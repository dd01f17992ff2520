"""The QoS level decides online and offline, not the Kubernetes QoS class — in every layout.

An online pod (``volcano.sh/qos-level`` LC, HLS or LS) without requests is BestEffort by Kubernetes' class.
Whatever the layout — the kubelet's (cgroupfs, systemd; v1, v2) with pods from the API server or from the
cgroups alone, a ``--cgroup-parent`` of our own, embedded mode's placement — it is never placed under the
offline parent where the agent chooses the place, never given ``cpu.idle``, the minimal share or any part
of the offline quota (on itself or on a cgroup above it), and never evicted as offline work.  Offline
pods, where the agent can know them, still are suppressed.  A property over generated pods, on fixture trees.
"""

from __future__ import annotations

import itertools
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.cgroups.backend import Backend, detect_backend
from agent.cgroups.layout import FixedLayout, Layout, detect_layout
from agent.embedded.podcgroups import pod_cgroup
from agent.embedded.spec import parse_pod
from agent.evictor import RecordingEvictor
from agent.hostpaths import HostPaths
from agent.loop import Agent, AgentConfig
from agent.pods import CgroupPodSource, PodInfo, StaticPodSource, pod_info
from agent.policies.nodestate import inside
from agent.profile import ProfileWatcher
from hack.lib.cgroup_fixtures import FakePod, _v1_files, _v2_files, make_proc, make_tree, pod_dir, set_cpu_ticks, set_usage
from proto.model import Capacity
from proto.vocab.qos import QOS_LEVEL_ANNOTATION

GI = 2**30
V1_CONTROLLERS = ("cpu", "cpuacct", "memory", "cpuset")


@dataclass(frozen=True)
class Setup:
    """A layout and where the agent's pods come from."""

    name: str
    version: int
    driver: str      # cgroupfs, systemd (kubelet) or fixed (--cgroup-parent) or embedded
    source: str      # kubernetes (the API: annotations seen) or cgroups (the cgroups alone)


SETUPS = [Setup(f"kubelet-{d}-v{v}-{src}", v, d, src) for v, d, src in itertools.product(
    (1, 2), ("cgroupfs", "systemd"), ("kubernetes", "cgroups"))] + \
    [Setup(f"fixed-v{v}-{src}", v, "fixed", src) for v in (1, 2) for src in ("kubernetes", "cgroups")] + \
    [Setup(f"embedded-v{v}", v, "embedded", "embedded") for v in (1, 2)]

RESOURCES = {
    "none": {},
    "cpu-request": {"requests": {"cpu": "500m"}},
    "guaranteed": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
    "batch": {"requests": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": str(GI)}},
}
pods_strategy = st.lists(st.tuples(st.sampled_from([None, "LC", "HLS", "LS", "ls", "BE"]),
                                   st.sampled_from(sorted(RESOURCES)), st.integers(0, 3)),
                         min_size=1, max_size=5)


def manifest(i: int, level: str | None, resources: str) -> dict:
    annotations = {QOS_LEVEL_ANNOTATION: level} if level else {}
    return {"metadata": {"uid": f"0000{i:04d}-0000-4000-8000-00000000000{i}", "name": f"p{i}", "namespace": "ns",
                         "annotations": annotations},
            "spec": {"containers": [{"name": "c", "command": ["true"], "resources": RESOURCES[resources]}]}}


def _group(root: Path, version: int, rel: str) -> None:
    """A cgroup with the kernel's files, in every hierarchy (v1) or the unified one (v2)."""
    if version == 1:
        for controller in V1_CONTROLLERS:
            _v1_files(root / controller / rel, controller)
    else:
        _v2_files(root / rel)


def build_host(tmp: Path, setup: Setup, infos: list[PodInfo]) -> tuple[HostPaths, Backend, Layout, dict[str, str]]:
    """The fixture tree with the pods where their layout puts them; also each pod's cgroup."""
    cg = tmp / "cg"
    if setup.driver in ("cgroupfs", "systemd"):
        fakes = [FakePod(p.uid, p.qos_class) for p in infos]
        paths = make_tree(cg, version=setup.version, driver=setup.driver, pods=fakes)
        where = {p.uid: pod_dir(setup.version, setup.driver, FakePod(p.uid, p.qos_class)) for p in infos}
    else:
        if setup.version == 2:
            cg.mkdir(parents=True)
            (cg / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
        for rel in ("scoria", "scoria/online", "scoria/offline"):
            _group(cg, setup.version, rel)
        paths = HostPaths(cgroup=cg)
        layout = FixedLayout(detect_backend(paths), "scoria")
        where = {}
        for p in infos:
            # placed as the embedded runtime places them (or, with --cgroup-parent, whoever ran them did)
            where[p.uid] = layout.pod_path(p.uid, p.qos_class, offline=p.offline)
            _group(cg, setup.version, where[p.uid])
    make_proc(tmp / "proc", mem_total_kib=16 * 2**20, mem_available_kib=2**19)  # 97% of memory in use
    paths = HostPaths(sys=tmp / "sys", proc=tmp / "proc", cgroup=paths.cgroup)
    backend = detect_backend(paths)
    layout = detect_layout(backend) if setup.driver in ("cgroupfs", "systemd") else FixedLayout(backend, "scoria")
    return paths, backend, layout, where


def infos_for(setup: Setup, docs: list[dict]) -> list[PodInfo]:
    if setup.source == "embedded":  # as the local runtime parses what a START carries
        return [parse_pod(doc).info for doc in docs]
    return [pod_info(doc) for doc in docs]


def always_clamped(tmp: Path) -> ProfileWatcher:
    """A profile whose offline quota always clamps (not only on online signals), so that every tick puts
    the quota somewhere — and the checks below can see it never lands on an online pod."""
    (tmp / "profile.yaml").write_text("spec: {cpu: {clampOnSignals: false}}\n")
    return ProfileWatcher(tmp / "profile.yaml")


def run_agent(tmp: Path, setup: Setup, docs: list[dict], busy: list[int]) -> tuple[Agent, RecordingEvictor, dict]:
    infos = infos_for(setup, docs)
    paths, backend, layout, where = build_host(tmp, setup, infos)
    if setup.source == "embedded":
        specs = {s.uid: s for s in (parse_pod(doc) for doc in docs)}
        assert where == {uid: pod_cgroup(layout, spec) for uid, spec in specs.items()}  # the runtime's own choice
    pods = CgroupPodSource(layout) if setup.source == "cgroups" else StaticPodSource(infos)
    evictor = RecordingEvictor()
    clock = {"t": 0.0}
    agent = Agent(AgentConfig("node-a"), paths=paths, backend=backend, layout=layout, pods=pods,
                  profiles=always_clamped(tmp), evictor=evictor, read_capacity=lambda p: Capacity(4000, 16 * GI),
                  clock=lambda: 1_800_000_000 + clock["t"], monotonic=lambda: clock["t"])
    counters = dict.fromkeys(where, 0)
    for tick in range(1, 6):  # memory stays above the high watermark: evictions are due from the third
        clock["t"] = float(tick)
        set_cpu_ticks(tmp / "proc", 390 * tick, 10 * tick)
        for (uid, path), cores in zip(where.items(), busy, strict=True):
            counters[uid] += cores * 10**9
            set_usage(paths.cgroup, setup.version, path, counters[uid], 2 * GI)
        set_usage(paths.cgroup, setup.version, layout.root, sum(counters.values()), 14 * GI)
        offline = sum(n for uid, n in counters.items() if inside(where[uid], layout.offline_parent))
        set_usage(paths.cgroup, setup.version, layout.offline_parent, offline, 4 * GI)
        agent.slow_tick()
        for step in range(3):
            clock["t"] = tick + 0.025 * (step + 1)
            agent.fast_tick()
    return agent, evictor, where


def check(agent: Agent, evictor: RecordingEvictor, where: dict, docs: list[dict], setup: Setup) -> None:
    backend, layout = agent.backend, agent.layout
    evicted = {e.uid for e in evictor.evicted}
    truth = {doc["metadata"]["uid"]: pod_info(doc) for doc in docs}  # what each pod is (its annotation seen)
    known = setup.source != "cgroups" or setup.driver == "fixed"  # can the agent know a pod's level?
    for uid, info in truth.items():
        path = where[uid]
        if info.offline:
            if known:  # still suppressed: SCHED_IDLE, and bounded by the offline quota (its parent's or its own)
                assert backend.read(path, "cpu.idle") == 1, (uid, path)
                assert not inside(path, layout.offline_parent) or \
                    backend.read(layout.offline_parent, "cpu.quota") is not None or \
                    backend.read(path, "cpu.quota") is not None, (uid, path)
            continue
        # online: never treated as offline work, by the agent's writes or its evictions
        assert uid not in evicted, (uid, info)
        assert backend.read(path, "cpu.idle") == 0 and backend.read(path, "cpu.quota") is None, (uid, path)
        if setup.driver in ("fixed", "embedded"):
            assert not inside(path, layout.offline_parent), (uid, path)  # placed by its level
        above = [path]
        while "/" in above[-1]:
            above.append(above[-1].rsplit("/", 1)[0])
        for group in above:  # no quota on it or on any cgroup above it; no offline idle or share on it
            assert backend.read(group, "cpu.quota") is None, (uid, group)
        for change in agent.executor.audit:
            if change.path in above:
                assert change.knob not in ("cpu.quota", "cpu.idle") or change.new in (None, 0), (uid, change)
            if change.path == path:
                assert not (change.knob == "cpu.shares" and change.new == 2), (uid, change)
    assert evicted <= {uid for uid, info in truth.items() if info.offline}


@pytest.mark.parametrize("setup", SETUPS, ids=[s.name for s in SETUPS])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(pods=pods_strategy)
def test_an_online_pod_is_never_treated_as_offline(tmp_path_factory: pytest.TempPathFactory, setup: Setup,
                                                   pods: list) -> None:
    tmp = tmp_path_factory.mktemp(setup.name)
    try:
        docs = [manifest(i, level, resources) for i, (level, resources, _) in enumerate(pods)]
        agent, evictor, where = run_agent(tmp, setup, docs, [cores for _, _, cores in pods])
        check(agent, evictor, where, docs, setup)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_the_offline_quota_leaves_a_shared_besteffort_tier_and_comes_back(tmp_path: Path) -> None:
    """The kubelet's BestEffort tier with an online pod in it: no quota on the tier, each offline pod in it
    its share; the fast loop leaves the tier alone.  The online pod gone, the shares are lifted, then the
    tier gets the quota again."""
    docs = [manifest(0, "LS", "none"), manifest(1, "BE", "batch"), manifest(2, None, "none")]
    infos = [pod_info(doc) for doc in docs]
    setup = Setup("kubelet", 1, "cgroupfs", "kubernetes")
    paths, backend, layout, where = build_host(tmp_path, setup, infos)
    source = StaticPodSource(infos)
    clock = {"t": 0.0}
    agent = Agent(AgentConfig("node-a"), paths=paths, backend=backend, layout=layout, pods=source,
                  profiles=always_clamped(tmp_path), evictor=RecordingEvictor(), read_capacity=lambda p: Capacity(4000, 16 * GI),
                  clock=lambda: 1_800_000_000 + clock["t"], monotonic=lambda: clock["t"])
    web, batch, plain = (where[p.uid] for p in infos)
    assert {web, batch, plain} <= {f"kubepods/besteffort/pod{p.uid}" for p in infos}  # all BestEffort by class
    report = agent.slow_tick()
    quota = report.colocation.offline_cpu_quota_millis
    assert quota and backend.read(layout.offline_parent, "cpu.quota") is None
    assert backend.read(batch, "cpu.quota") == quota // 2 and backend.read(plain, "cpu.quota") == quota // 2
    assert backend.read(web, "cpu.quota") is None and backend.read(web, "cpu.idle") == 0
    for step in range(1, 4):  # online use surges: the fast loop may not put a quota on the shared tier
        clock["t"] = 0.025 * step
        set_usage(paths.cgroup, 1, layout.root, step * 3 * 10**9, GI)
        agent.fast_tick()
        assert backend.read(layout.offline_parent, "cpu.quota") is None
    source.set(infos[1:])  # the online pod is gone
    clock["t"] = 1.0
    agent.slow_tick()
    assert backend.read(batch, "cpu.quota") is None and backend.read(layout.offline_parent, "cpu.quota") is None
    clock["t"] = 2.0
    report = agent.slow_tick()
    assert backend.read(layout.offline_parent, "cpu.quota") == report.colocation.offline_cpu_quota_millis
    assert backend.read(batch, "cpu.quota") is None and backend.read(batch, "cpu.idle") == 1
