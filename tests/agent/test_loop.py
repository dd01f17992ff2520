"""The agent end to end on fixture host trees: observe, decide, write cgroups, evict, report."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cgroups.backend import detect_backend
from agent.cgroups.layout import detect_layout
from agent.collectors.load import parse_pressure, read_cpu_ticks
from agent.evictor import RecordingEvictor
from agent.hostpaths import HostPaths, format_cpulist, parse_cpulist
from agent.loop import Agent, AgentConfig
from agent.pods import PodInfo, StaticPodSource, pod_info
from agent.profile import ProfileWatcher
from hack.lib.cgroup_fixtures import FakePod, container_dir, make_proc, make_tree, set_cpu_ticks, set_usage
from proto.model import Capacity, QosLevel

GI = 2**30
WEB, BATCH = "0000aaaa-0000-4000-8000-000000000001", "0000bbbb-0000-4000-8000-000000000002"
CID = FakePod(WEB).containers[0]


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def build(tmp_path: Path, version: int, profile: str | None = None, pods=None, **config):
    fake = [FakePod(WEB, "Burstable"), FakePod(BATCH, "BestEffort")]
    paths = make_tree(tmp_path / "cg", version=version, driver="systemd" if version == 2 else "cgroupfs", pods=fake)
    make_proc(tmp_path / "proc", busy_ticks=0, idle_ticks=0)
    paths = HostPaths(sys=tmp_path / "sys", proc=tmp_path / "proc", cgroup=paths.cgroup)
    backend = detect_backend(paths)
    layout = detect_layout(backend)
    if profile:
        (tmp_path / "profile.yaml").write_text(profile)
    infos = pods or [PodInfo(WEB, "web", "web-0", "Burstable", QosLevel.LS, cpu_request=1000, cpu_limit=2000,
                             memory_request=GI),
                     PodInfo(BATCH, "ml", "train-0", "BestEffort", QosLevel.BE, priority=-1, batch_cpu=2000,
                             batch_memory=2 * GI)]
    evictor = RecordingEvictor()
    clock = Clock()
    published = []
    agent = Agent(AgentConfig("node-a", **config), paths=paths, backend=backend, layout=layout, pods=StaticPodSource(infos),
                  profiles=ProfileWatcher(tmp_path / "profile.yaml" if profile else None), evictor=evictor,
                  read_capacity=lambda p: Capacity(4000, 16 * GI), publish=published.append,
                  clock=lambda: 1_800_000_000 + clock.t, monotonic=clock)
    return agent, clock, layout, evictor, published


def advance(tmp_path: Path, clock: Clock, layout, version: int, *, seconds: float, node_busy_cores: float,
            web_cores: float, batch_cores: float, usage: dict) -> None:
    """Move time on: node ticks (100/s per busy core) and the pods' CPU counters."""
    clock.t += seconds
    usage["node"] += node_busy_cores * seconds * 100
    usage["web"] += web_cores * seconds * 1e9
    usage["batch"] += batch_cores * seconds * 1e9
    set_cpu_ticks(tmp_path / "proc", int(usage["node"]), 1_000_000)
    set_usage(tmp_path / "cg", version, layout.pod_path(WEB, "Burstable"), int(usage["web"]), 3 * GI)
    set_usage(tmp_path / "cg", version, layout.pod_path(BATCH, "BestEffort"), int(usage["batch"]), GI)
    root = tmp_path / "cg"
    for rel, ns in ((layout.root, usage["web"] + usage["batch"]), (layout.offline_parent, usage["batch"])):
        set_usage(root, version, rel, int(ns), 4 * GI)


ALWAYS = "spec: {cpu: {clampOnSignals: false}}\n"  # the quota always clamps (as without SCHED_IDLE)


@pytest.mark.parametrize("version", [1, 2])
def test_slow_tick_suppresses_offline_and_reports(tmp_path: Path, version: int) -> None:
    agent, clock, layout, evictor, published = build(tmp_path, version, profile=ALWAYS, detail_interval=1.0)
    usage = {"node": 0.0, "web": 0.0, "batch": 0.0}
    advance(tmp_path, clock, layout, version, seconds=0, node_busy_cores=0, web_cores=0, batch_cores=0, usage=usage)
    web_container = f"{layout.pod_path(WEB, 'Burstable')}/{container_dir(layout.driver, 'containerd', CID)}"
    set_usage(tmp_path / "cg", version, web_container, 0, 0)
    agent.slow_tick()
    advance(tmp_path, clock, layout, version, seconds=1, node_busy_cores=3.2, web_cores=1.0, batch_cores=2.0, usage=usage)
    set_usage(tmp_path / "cg", version, web_container, int(0.75e9), 512 * 2**20)
    if version == 2:  # the pod's own PSI, where the kernel keeps it
        (tmp_path / "cg" / layout.pod_path(WEB, "Burstable") / "cpu.pressure").write_text(
            "some avg10=12.50 avg60=3.00 avg300=1.00 total=999\nfull avg10=2.00 avg60=1.00 avg300=0.00 total=99\n")
    report = agent.slow_tick()
    web = next(p for p in report.load.pods if p.uid == WEB)
    assert [(c.name, c.memory_used_bytes) for c in web.containers] == [(CID, 512 * 2**20)]
    assert web.containers[0].cpu_used_cores == pytest.approx(0.75)
    if version == 2:
        assert web.cpu_pressure.some_avg10 == 12.5 and web.cpu_pressure.full_total_us == 99
    else:
        assert web.cpu_pressure is None  # v1 without psi files: unknown, not zero
    b = agent.backend
    batch_path = layout.pod_path(BATCH, "BestEffort")
    assert b.read(batch_path, "cpu.idle") == 1  # SCHED_IDLE for the offline pod
    assert b.read(batch_path, "memory.limit") == 2 * GI  # its batch-memory request
    # quota = 4000 × 80% − online 1000 − system (3200 − 1000 − 2000 = 200)
    assert b.read(layout.offline_parent, "cpu.quota") == 2000 and agent.quota == 2000
    assert report.colocation.offline_cpu_quota_millis == 2000
    assert report.identity.node_name == "node-a" and report.identity.boot_id.startswith("b00710d0")
    pods = {p.uid: p for p in report.load.pods}
    assert pods[WEB].cpu_used_cores == pytest.approx(1.0) and pods[BATCH].qos == QosLevel.BE
    assert report.load.cpu_used_cores == pytest.approx(3.2) and report.load.cpu_pressure.some_avg10 == 1.5
    # batch allocatable = 4000 × 80% − 1000 − 200, smoothed with the first (idle) sample
    assert report.colocation.batch_cpu_millis > 2000 and report.colocation.qos_profile.startswith("default@")
    if version == 2:
        assert b.read(layout.pod_path(WEB, "Burstable"), "memory.low") == GI  # online LS: protected request
        assert b.read(batch_path, "memory.high") == int(2 * GI * 0.9)
    assert published[-1] is report and not evictor.evicted


def test_container_detail_is_sampled_on_its_own_interval(tmp_path: Path) -> None:
    agent, clock, layout, _, _ = build(tmp_path, 1)  # default: every 10 s
    usage = {"node": 0.0, "web": 0.0, "batch": 0.0}
    container = f"{layout.pod_path(WEB, 'Burstable')}/{container_dir(layout.driver, 'containerd', CID)}"
    counters = {"cpu": 0}

    def step(seconds: float, cores: float) -> list:
        counters["cpu"] += int(cores * seconds * 1e9)
        advance(tmp_path, clock, layout, 1, seconds=seconds, node_busy_cores=1, web_cores=1, batch_cores=0,
                usage=usage)
        set_usage(tmp_path / "cg", 1, container, counters["cpu"], 2**20)
        report = agent.slow_tick()
        return next(p for p in report.load.pods if p.uid == WEB).containers

    step(0, 0)  # first detail sample: a baseline
    for _ in range(9):
        assert step(1, 0.5)[0].cpu_used_cores == 0.0  # the detail in force is the baseline's
    assert step(1, 0.5)[0].cpu_used_cores == pytest.approx(0.5)  # ten seconds on: averaged over them


def test_fast_tick_cuts_the_quota_when_online_work_surges(tmp_path: Path) -> None:
    agent, clock, layout, _, _ = build(tmp_path, 1, profile=ALWAYS)
    usage = {"node": 0.0, "web": 0.0, "batch": 0.0}
    advance(tmp_path, clock, layout, 1, seconds=0, node_busy_cores=0, web_cores=0, batch_cores=0, usage=usage)
    agent.slow_tick()
    advance(tmp_path, clock, layout, 1, seconds=1, node_busy_cores=2.1, web_cores=0.1, batch_cores=2.0, usage=usage)
    agent.slow_tick()
    assert agent.quota == 3200 - 100 - 0  # quiet online: offline may have most of the node
    advance(tmp_path, clock, layout, 1, seconds=0.025, node_busy_cores=2.1, web_cores=0.1, batch_cores=2.0, usage=usage)
    agent.fast_tick()  # the fast loop's first reading (rates need two)
    advance(tmp_path, clock, layout, 1, seconds=0.025, node_busy_cores=2.1, web_cores=0.1, batch_cores=2.0, usage=usage)
    assert agent.fast_tick() is False  # nothing changed: no write
    for _ in range(2):
        advance(tmp_path, clock, layout, 1, seconds=0.025, node_busy_cores=4.0, web_cores=3.0, batch_cores=1.0,
                usage=usage)
        agent.fast_tick()
    assert agent.backend.read(layout.offline_parent, "cpu.quota") == 200  # 3200 − 3000 online
    assert agent.metrics.registry.get_sample_value("scoria_agent_reaction_seconds_count") >= 1
    # one calm window is not room yet (see the reopen test); the slow loop lets offline work back in
    advance(tmp_path, clock, layout, 1, seconds=0.025, node_busy_cores=1.0, web_cores=0.1, batch_cores=0.9, usage=usage)
    assert agent.fast_tick() is False and agent.quota == 200
    advance(tmp_path, clock, layout, 1, seconds=1, node_busy_cores=1.0, web_cores=0.1, batch_cores=0.9, usage=usage)
    agent.slow_tick()
    assert agent.quota > 2000


def test_fast_loop_relaxes_only_while_offline_work_is_idle_on_both_clocks(tmp_path: Path) -> None:
    agent, clock, layout, _, _ = build(tmp_path, 1)
    usage = {"node": 0.0, "web": 0.0, "batch": 0.0}
    assert agent.fast_pace == 0.025  # nothing measured yet: full pace
    advance(tmp_path, clock, layout, 1, seconds=0, node_busy_cores=0, web_cores=0, batch_cores=0, usage=usage)
    agent.slow_tick()
    advance(tmp_path, clock, layout, 1, seconds=1, node_busy_cores=0.2, web_cores=0.2, batch_cores=0, usage=usage)
    agent.slow_tick()
    for _ in range(2):
        advance(tmp_path, clock, layout, 1, seconds=0.025, node_busy_cores=0.2, web_cores=0.2, batch_cores=0,
                usage=usage)
        agent.fast_tick()
    assert agent.fast_pace == 0.2  # no offline CPU on either clock: nothing to squeeze
    advance(tmp_path, clock, layout, 1, seconds=0.2, node_busy_cores=1.2, web_cores=0.2, batch_cores=1.0, usage=usage)
    agent.fast_tick()
    assert agent.fast_pace == 0.025  # offline work started: full pace at once
    advance(tmp_path, clock, layout, 1, seconds=0.8, node_busy_cores=1.2, web_cores=0.2, batch_cores=1.0, usage=usage)
    agent.slow_tick()
    advance(tmp_path, clock, layout, 1, seconds=0.025, node_busy_cores=0.2, web_cores=0.2, batch_cores=0, usage=usage)
    agent.fast_tick()
    assert agent.fast_pace == 0.025  # a throttled 25 ms window with no offline CPU does not relax it


def test_sustained_pressure_evicts_offline_pods_and_marks_the_node(tmp_path: Path) -> None:
    profile = "spec: {eviction: {cpuHighPercent: 90, cpuLowPercent: 70, samples: 2, maxPerInterval: 3}}\n"
    agent, clock, layout, evictor, _ = build(tmp_path, 1, profile=profile)
    taints, api_up = [], [True]

    def taint(wanted: bool) -> bool:
        taints.append((wanted, api_up[0]))
        return api_up[0]

    agent.taint = taint
    usage = {"node": 0.0, "web": 0.0, "batch": 0.0}
    advance(tmp_path, clock, layout, 1, seconds=0, node_busy_cores=0, web_cores=0, batch_cores=0, usage=usage)
    agent.slow_tick()
    assert taints == [(False, True)]  # at start: a taint a previous run left behind goes
    for _ in range(3):  # a node full of offline work is co-location working: no pressure
        advance(tmp_path, clock, layout, 1, seconds=1, node_busy_cores=4.0, web_cores=0.5, batch_cores=3.5, usage=usage)
        assert not agent.slow_tick().colocation.evicting
    assert not evictor.evicted and taints == [(False, True)]
    reports = []
    for _ in range(3):  # online and system demand alone over the watermark (3.7 of 4 cores): pressure
        advance(tmp_path, clock, layout, 1, seconds=1, node_busy_cores=3.9, web_cores=3.6, batch_cores=0.2, usage=usage)
        reports.append(agent.slow_tick())
    assert [(e.uid, e.name) for e in evictor.evicted] == [(BATCH, "train-0")]  # the online pod never
    assert reports[1].colocation.evicting and reports[1].colocation.evictions[0].pod_uid == BATCH
    assert not reports[2].colocation.evictions  # reported once
    assert agent.metrics.registry.get_sample_value("scoria_agent_evictions_total", {"resource": "cpu"}) == 1
    assert taints == [(False, True), (True, True)]  # tainted once, when eviction began
    api_up[0] = False  # the API server is away when the pressure ends: the agent keeps trying
    for _ in range(2):
        advance(tmp_path, clock, layout, 1, seconds=1, node_busy_cores=1.0, web_cores=0.5, batch_cores=0.5, usage=usage)
        assert not agent.slow_tick().colocation.evicting
    api_up[0] = True
    advance(tmp_path, clock, layout, 1, seconds=1, node_busy_cores=1.0, web_cores=0.5, batch_cores=0.5, usage=usage)
    agent.slow_tick()
    assert taints[2:] == [(False, False), (False, False), (False, True)]


def test_a_pod_without_a_cgroup_is_skipped(tmp_path: Path) -> None:
    ghost = PodInfo("0000cccc-0000-4000-8000-000000000003", "ml", "ghost", "BestEffort", QosLevel.BE)
    agent, clock, layout, _, _ = build(tmp_path, 2, pods=[ghost])
    report = agent.slow_tick()
    assert [p.uid for p in report.load.pods] == [ghost.uid] and report.load.pods[0].cpu_used_cores == 0


def test_profile_reload_is_visible_in_metrics_and_report(tmp_path: Path) -> None:
    agent, clock, layout, _, _ = build(tmp_path, 1, profile="name: first\n")
    assert agent.slow_tick().colocation.qos_profile.startswith("first@")
    (tmp_path / "profile.yaml").write_text("name: second\n")
    assert agent.slow_tick().colocation.qos_profile.startswith("second@")
    digest = agent.profiles.current.digest
    assert agent.metrics.registry.get_sample_value("scoria_agent_qos_profile_info",
                                                   {"name": "second", "digest": digest}) == 1
    (tmp_path / "profile.yaml").write_text("spec: {cpu: {offlineThresholdPercent: 300}}\n")
    assert agent.slow_tick().colocation.qos_profile.startswith("second@")  # refused: the last good stays


POD = {"metadata": {"uid": "u1", "namespace": "ml", "name": "p", "annotations": {}},
       "spec": {"priority": 7, "containers": [
           {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                                       "limits": {"cpu": "1", "memory": "2Gi"}}},
           {"name": "b", "resources": {"limits": {"cpu": "250m", "memory": "256Mi"}}}]}}


def test_pod_info_from_a_manifest() -> None:
    info = pod_info(POD)
    assert (info.qos_class, info.qos_level, info.priority) == ("Burstable", QosLevel.LS, 7)
    assert info.cpu_request == 750 and info.cpu_limit == 1250 and info.memory_limit == 2 * GI + 256 * 2**20
    batch = pod_info({"metadata": {"uid": "u2"}, "spec": {"containers": [
        {"name": "x", "resources": {"requests": {"kubernetes.io/batch-cpu": "2000", "kubernetes.io/batch-memory": "4Gi"},
                                    "limits": {"kubernetes.io/batch-cpu": "2000"}}}]}})
    assert batch.qos_class == "BestEffort" and batch.offline and batch.batch_cpu == 2000  # already millicores
    guaranteed = pod_info({"metadata": {"uid": "u3"}, "spec": {"containers": [
        {"name": "x", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}})
    assert guaranteed.qos_class == "Guaranteed" and guaranteed.qos_level == QosLevel.LC
    with pytest.raises(ValueError, match="ml/bad"):
        pod_info({"metadata": {"name": "bad", "namespace": "ml"},
                  "spec": {"containers": [{"resources": {"requests": {"cpu": "lots"}}}]}})


def test_proc_parsers(tmp_path: Path) -> None:
    proc = make_proc(tmp_path)
    set_cpu_ticks(proc, 250, 750)
    assert read_cpu_ticks(HostPaths(proc=proc)) == (250, 1000)
    p = parse_pressure("some avg10=2.00 avg60=1.00 avg300=0.50 total=99\nfull avg10=0.50 avg60=0.25 avg300=0.0 total=7\n")
    assert (p.some_avg10, p.some_avg60, p.some_total_us, p.full_avg10, p.full_total_us) == (2.0, 1.0, 99, 0.5, 7)
    assert parse_pressure(None).some_avg10 == 0.0
    assert parse_cpulist("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11] and format_cpulist([0, 1, 2, 3, 8, 10, 11]) == "0-3,8,10-11"
    with pytest.raises(ValueError):
        parse_cpulist("5-2")


def test_run_drives_both_loops_on_one_thread_and_survives_a_failing_tick(tmp_path: Path) -> None:
    import threading
    import time as _time
    agent, clock, layout, _, published = build(tmp_path, 1)
    calls = {"fast": 0}

    def flaky_fast() -> bool:
        calls["fast"] += 1
        if calls["fast"] == 1:
            raise RuntimeError("a bad sample")
        return False

    agent.fast_tick = flaky_fast
    stop = threading.Event()
    thread = threading.Thread(target=agent.run, args=(stop,))
    thread.start()
    try:
        deadline = _time.monotonic() + 5
        while calls["fast"] < 3 and _time.monotonic() < deadline:
            _time.sleep(0.01)
        assert calls["fast"] >= 3 and len(published) == 1  # slow once at the start, then fast ticks
        clock.t += 1.0  # a second on: the next tick is a slow one
        deadline = _time.monotonic() + 5
        while len(published) < 2 and _time.monotonic() < deadline:
            _time.sleep(0.01)
        assert len(published) == 2
    finally:
        stop.set()
        thread.join(2)
    assert not thread.is_alive()
    assert agent.metrics.registry.get_sample_value("scoria_agent_loops_cpu_seconds_total") > 0


def test_tick_jitter_above_the_machine_reads_as_a_full_machine(tmp_path: Path) -> None:
    """/proc/stat moves in whole ticks: a second can count 101% of the node.  That is a full node, not more,
    so a high watermark of 100% never fires and the report never claims more cores than there are."""
    profile = "spec:\n  eviction: {cpuHighPercent: 100, cpuLowPercent: 99, samples: 1}\n"
    agent, clock, layout, evictor, _ = build(tmp_path, 1, profile=profile)
    usage = {"node": 0.0, "web": 0.0, "batch": 0.0}
    advance(tmp_path, clock, layout, 1, seconds=0, node_busy_cores=0, web_cores=0, batch_cores=0, usage=usage)
    agent.slow_tick()
    for _ in range(3):
        advance(tmp_path, clock, layout, 1, seconds=1, node_busy_cores=4.04, web_cores=1.0, batch_cores=3.0,
                usage=usage)
        report = agent.slow_tick()
        assert report.load.cpu_used_cores == pytest.approx(4.0)
    assert not evictor.evicted and not agent.eviction_state.cpu_over


def test_after_a_cut_the_fast_loop_reopens_once_online_work_has_left_room_for_a_while(tmp_path: Path) -> None:
    agent, clock, layout, _, _ = build(tmp_path, 1, profile=ALWAYS)
    usage = {"node": 0.0, "web": 0.0, "batch": 0.0}

    def fast(web: float, batch: float, seconds: float = 0.025) -> None:
        advance(tmp_path, clock, layout, 1, seconds=seconds, node_busy_cores=web + batch, web_cores=web,
                batch_cores=batch, usage=usage)
        agent.fast_tick()

    advance(tmp_path, clock, layout, 1, seconds=0, node_busy_cores=0, web_cores=0, batch_cores=0, usage=usage)
    agent.slow_tick()
    advance(tmp_path, clock, layout, 1, seconds=1, node_busy_cores=2.5, web_cores=0.5, batch_cores=2.0, usage=usage)
    agent.slow_tick()
    assert agent.quota == 3200 - 500  # the slow loop: a second's average online use
    fast(0.5, 2.0)
    fast(3.0, 1.0)  # a 25 ms burst of online work
    assert agent.quota == 200
    for _ in range(7):  # calm again, but not yet for 200 ms since the cut: the cut holds
        fast(0.1, 2.0)
        assert agent.quota == 200
    fast(1.0, 2.0, seconds=0.03)  # 205 ms after the cut: room for the highest online use since (1 core), no more
    assert agent.backend.read(layout.offline_parent, "cpu.quota") == agent.quota == pytest.approx(3200 - 1000, abs=2)
    for _ in range(9):  # that peak has aged out: back up, to the slow loop's figure and never above it
        fast(0.1, 2.0)
    assert agent.quota == 3200 - 500
    fast(2.5, 1.0)  # and the next burst is cut at once, as ever
    assert agent.quota == pytest.approx(3200 - 2500, abs=2)


def test_with_sched_idle_the_quota_stays_open_until_online_signals_call_for_a_clamp(tmp_path: Path) -> None:
    """Offline pods are SCHED_IDLE here (the kernel has cpu.idle): the quota is open (no limit) while online
    work is steady, clamps at once when it rises by onlineRisePercent of the node within a fast window,
    holds clampHold after the last signal, then opens again."""
    profile = "spec: {cpu: {onlineRisePercent: 20, clampHold: 100ms}}\n"
    agent, clock, layout, _, published = build(tmp_path, 1, profile=profile)
    usage = {"node": 0.0, "web": 0.0, "batch": 0.0}

    def fast(web: float, batch: float, seconds: float = 0.025) -> None:
        advance(tmp_path, clock, layout, 1, seconds=seconds, node_busy_cores=web + batch, web_cores=web,
                batch_cores=batch, usage=usage)
        agent.fast_tick()

    def written():
        return agent.backend.read(layout.offline_parent, "cpu.quota")

    advance(tmp_path, clock, layout, 1, seconds=0, node_busy_cores=0, web_cores=0, batch_cores=0, usage=usage)
    agent.slow_tick()
    advance(tmp_path, clock, layout, 1, seconds=1, node_busy_cores=4.0, web_cores=0.5, batch_cores=3.5, usage=usage)
    report = agent.slow_tick()
    assert written() is None and agent.quota is None and report.colocation.offline_cpu_quota_millis is None
    metric = agent.metrics.registry.get_sample_value
    assert metric("scoria_agent_offline_cpu_quota_clamped") == 0
    assert metric("scoria_agent_offline_cpu_quota_millicores") == 4000  # open reads as the node's capacity
    fast(0.5, 3.5)
    for web in (0.9, 1.2, 0.3):  # online noise under 20% of the node (800m) above its 500m: no clamp
        fast(web, 4.0 - web)
        assert written() is None
    fast(2.0, 2.0)  # +1500m within 25 ms: clamp to 3200 − 2000 online − system 0
    assert written() == agent.quota == pytest.approx(1200, abs=2)
    assert metric("scoria_agent_offline_cpu_quota_clamped") == 1
    assert metric("scoria_agent_reaction_seconds_count") == 1
    fast(2.5, 1.5)  # still rising: cut further
    assert written() == pytest.approx(700, abs=2)
    for _ in range(3):  # 2.5 cores stays 2000m above the last second's 500m: still a signal, the clamp holds
        fast(2.5, 1.5)
        assert written() == pytest.approx(700, abs=2)
    advance(tmp_path, clock, layout, 1, seconds=1, node_busy_cores=4.0, web_cores=2.5, batch_cores=1.5, usage=usage)
    agent.slow_tick()  # a second at 2.5 cores is online's level now, not a rise: open (SCHED_IDLE does the rest)
    assert written() is None and agent.quota is None
    assert metric("scoria_agent_offline_cpu_quota_clamped") == 0
    fast(2.5, 1.5)
    fast(3.5, 0.5)  # a spike of 1000m over that level: clamp ...
    assert written() == 200  # 3200 − 3500, but never below the floor (5% of the node)
    for _ in range(3):  # ... held for 100 ms after it ...
        fast(2.5, 1.5)
        assert written() is not None
    fast(2.5, 1.5, seconds=0.03)  # ... then open again
    assert written() is None


def test_a_slow_tick_during_a_clamp_keeps_the_lower_of_the_two_figures(tmp_path: Path) -> None:
    agent, clock, layout, _, _ = build(tmp_path, 1, profile="spec: {cpu: {clampHold: 5s}}\n")
    usage = {"node": 0.0, "web": 0.0, "batch": 0.0}
    advance(tmp_path, clock, layout, 1, seconds=0, node_busy_cores=0, web_cores=0, batch_cores=0, usage=usage)
    agent.slow_tick()
    advance(tmp_path, clock, layout, 1, seconds=1, node_busy_cores=4.0, web_cores=0.2, batch_cores=3.8, usage=usage)
    agent.slow_tick()
    for web in (0.2, 3.0):
        advance(tmp_path, clock, layout, 1, seconds=0.025, node_busy_cores=4.0, web_cores=web, batch_cores=4 - web,
                usage=usage)
        agent.fast_tick()
    assert agent.quota == pytest.approx(200, abs=2)  # 3200 − 3000
    advance(tmp_path, clock, layout, 1, seconds=0.95, node_busy_cores=4.0, web_cores=1.0, batch_cores=3.0, usage=usage)
    agent.slow_tick()  # the second's average (1 core) would allow 2200: the clamp's 200 holds
    assert agent.backend.read(layout.offline_parent, "cpu.quota") == agent.quota == pytest.approx(200, abs=2)
    clock.t += 5
    advance(tmp_path, clock, layout, 1, seconds=1, node_busy_cores=4.0, web_cores=1.0, batch_cores=3.0, usage=usage)
    agent.slow_tick()  # the hold is over: open
    assert agent.backend.read(layout.offline_parent, "cpu.quota") is None


def test_online_cpu_stall_clamps_where_the_kernel_keeps_it_per_group(tmp_path: Path) -> None:
    """cgroup v2 keeps PSI per group: the online parent's cpu.pressure is online work's own stall."""
    stall = tmp_path / "cg" / "kubepods.slice" / "kubepods-burstable.slice" / "cpu.pressure"
    stall.parent.mkdir(parents=True)
    stall.write_text("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    agent, clock, layout, _, _ = build(tmp_path, 2, profile="spec: {cpu: {onlineStallPercent: 10}}\n")
    assert layout.online_parent == "kubepods.slice/kubepods-burstable.slice"
    usage = {"node": 0.0, "web": 0.0, "batch": 0.0}
    advance(tmp_path, clock, layout, 2, seconds=0, node_busy_cores=0, web_cores=0, batch_cores=0, usage=usage)
    agent.slow_tick()
    advance(tmp_path, clock, layout, 2, seconds=1, node_busy_cores=4.0, web_cores=1.0, batch_cores=3.0, usage=usage)
    agent.slow_tick()
    total = 0
    for stalled_us in (0, 2000, 5000):  # 0%, 8%, 20% of a 25 ms window
        total += stalled_us
        stall.write_text(f"some avg10=0.00 avg60=0.00 avg300=0.00 total={total}\n")
        advance(tmp_path, clock, layout, 2, seconds=0.025, node_busy_cores=4.0, web_cores=1.0, batch_cores=3.0,
                usage=usage)
        agent.fast_tick()
        assert (agent.quota is not None) == (stalled_us == 5000), stalled_us
    assert agent.quota == pytest.approx(3200 - 1000, abs=2)


def test_a_psi_trigger_wakes_the_fast_loop_before_its_pace(tmp_path: Path) -> None:
    """The control thread blocks on the trigger (the kernel's side is tested on real files in
    tests/agent/collectors/test_psi.py): a fast tick runs as soon as it fires, not at the next pace."""
    import threading
    import time as _time
    agent, clock, layout, _, _ = build(tmp_path, 1, fast_interval=30.0, fast_idle_interval=30.0, slow_interval=60.0)
    ticks, fire = [], threading.Event()
    agent.fast_tick = lambda: ticks.append(_time.monotonic()) or False

    class Trigger:  # the hardware edge: the kernel marking the pressure file POLLPRI
        closed = False

        def waiter(self):
            def wait(timeout: float) -> bool:  # blocks up to ``timeout`` (the test stops it early)
                end = _time.monotonic() + timeout
                while _time.monotonic() < end and not stop.is_set():
                    if fire.wait(0.02):
                        fire.clear()
                        return True
                return False
            return wait

        def close(self) -> None:
            Trigger.closed = True

    stop = threading.Event()
    agent.trigger = Trigger()
    thread = threading.Thread(target=agent.run, args=(stop,))
    thread.start()
    try:
        _time.sleep(0.2)
        assert ticks == []  # paced at 30 s: nothing yet
        fired_at = _time.monotonic()
        fire.set()
        deadline = fired_at + 5
        while not ticks and _time.monotonic() < deadline:
            _time.sleep(0.005)
        assert ticks and ticks[0] - fired_at < 1.0
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive() and Trigger.closed
    assert agent.metrics.registry.get_sample_value("scoria_agent_psi_wakeups_total") == 1


def test_a_profile_change_takes_effect_within_one_slow_tick_and_shows_in_metrics(tmp_path: Path) -> None:
    """Rewritten on disk (as a ConfigMap update lands): the next slow tick runs with it — its quota written,
    its name and digest and its settings on /metrics, served over HTTP as Prometheus scrapes it."""
    import urllib.request

    from proto.httpd import start_http
    agent, clock, layout, _, _ = build(tmp_path, 1, profile="name: first\n" + ALWAYS)
    server = start_http(agent.metrics.registry, 0)
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    usage = {"node": 0.0, "web": 0.0, "batch": 0.0}
    try:
        advance(tmp_path, clock, layout, 1, seconds=0, node_busy_cores=0, web_cores=0, batch_cores=0, usage=usage)
        agent.slow_tick()
        advance(tmp_path, clock, layout, 1, seconds=1, node_busy_cores=3.0, web_cores=1.0, batch_cores=2.0, usage=usage)
        agent.slow_tick()
        assert agent.backend.read(layout.offline_parent, "cpu.quota") == 3200 - 1000
        (tmp_path / "profile.yaml").write_text("name: second\nspec: {cpu: {clampOnSignals: false, "
                                               "offlineThresholdPercent: 50}, eviction: {starvationSamples: 7}}\n")
        advance(tmp_path, clock, layout, 1, seconds=1, node_busy_cores=3.0, web_cores=1.0, batch_cores=2.0, usage=usage)
        agent.slow_tick()  # one tick later
        assert agent.backend.read(layout.offline_parent, "cpu.quota") == 2000 - 1000
        text = urllib.request.urlopen(url, timeout=5).read().decode()
    finally:
        server.shutdown()
    digest = agent.profiles.current.digest
    assert f'scoria_agent_qos_profile_info{{digest="{digest}",name="second"}} 1.0' in text
    assert 'name="first"' not in text
    assert 'scoria_agent_qos_setting{setting="cpu.offlineThresholdPercent"} 50.0' in text
    assert 'scoria_agent_qos_setting{setting="eviction.starvationSamples"} 7.0' in text
    assert 'scoria_agent_qos_setting{setting="cpu.clampOnSignals"} 0.0' in text
    assert "scoria_agent_offline_cpu_quota_millicores 1000.0" in text


def test_a_window_opening_changes_the_settings_in_force_within_one_slow_tick(tmp_path: Path) -> None:
    profile = ('spec:\n  timezone: UTC\n  cpu: {offlineThresholdPercent: 60}\n'
               '  windows:\n  - time: "02:00-03:00"\n    cpu: {offlineThresholdPercent: 90}\n')
    agent, clock, layout, _, _ = build(tmp_path, 1, profile=profile)
    base = 1_800_000_000 + clock.t  # the agent's wall clock
    shift = (26 * 3600 - base % 86400) % 86400  # from there to the next 02:00 UTC
    agent.slow_tick()
    setting = agent.metrics.registry.get_sample_value
    assert setting("scoria_agent_qos_setting", {"setting": "cpu.offlineThresholdPercent"}) == 60
    clock.t += shift + 60
    agent.slow_tick()
    assert agent.spec.cpu.offline_threshold_percent == 90
    assert setting("scoria_agent_qos_setting", {"setting": "cpu.offlineThresholdPercent"}) == 90
