"""The agent on this machine's real cgroups (v1 is mounted read-write here; CI runs on the same kind).

Each test works under its own uniquely named parent and removes it, with any
process it started, whatever happens.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from agent.cgroups.backend import detect_backend
from agent.cgroups.tree import make_group, pids, pids_below, remove_group
from agent.hostpaths import HostPaths
from agent.pods import PodInfo
from hack.lib.real_cgroups import make_agent, spawn
from hack.lib.real_cgroups import sandbox as cgroup_sandbox
from proto.model import QosLevel

ROOT = HostPaths()
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not os.access("/sys/fs/cgroup/cpu", os.W_OK) or not Path("/sys/fs/cgroup/cpu/cpu.idle").exists(),
    reason="needs root and a writable cgroup v1 cpu hierarchy with cpu.idle")

@pytest.fixture
def sandbox():
    backend = detect_backend(ROOT)
    with cgroup_sandbox(backend, "cpu") as (parent, procs):
        yield backend, parent, procs


@pytest.mark.parametrize("clamp_on_signals", [True, False])
def test_offline_group_gets_cpu_idle_and_a_quota_where_it_always_clamps(sandbox, tmp_path: Path,
                                                                         clamp_on_signals: bool) -> None:
    backend, parent, procs = sandbox
    profile = tmp_path / "profile.yaml"
    profile.write_text(f"spec: {{cpu: {{clampOnSignals: {str(clamp_on_signals).lower()}}}}}\n")
    agent = make_agent(backend, parent, [PodInfo("web", qos_class="Burstable", qos_level=QosLevel.LS),
                                         PodInfo("batch", qos_class="BestEffort", qos_level=QosLevel.BE)],
                       profile=profile)
    spawn(backend, f"{parent}/offline/podbatch", procs)
    agent.slow_tick()
    time.sleep(0.3)
    agent.slow_tick()
    cpu = Path("/sys/fs/cgroup/cpu") / parent
    assert (cpu / "offline/podbatch/cpu.idle").read_text().strip() == "1"
    assert (cpu / "offline/cpu.idle").read_text().strip() == "1"
    assert (cpu / "online/podweb/cpu.idle").read_text().strip() == "0"
    quota = int((cpu / "offline/cpu.cfs_quota_us").read_text())
    if clamp_on_signals:  # SCHED_IDLE protects online work: no limit until an online signal
        assert quota == -1 and agent.quota is None
    else:
        assert quota > 0 and agent.quota == quota * 1000 // 100_000


def test_online_work_takes_a_shared_cpu_from_offline_work(sandbox, tmp_path: Path) -> None:
    """One online and one offline hog on the same CPU, the quota out of the way: the offline parent is
    idle, so the online pod gets nearly all of the CPU.  With only the offline *pod* idle, the kernel
    weighs online-parent against offline-parent (equal weights) and online gets about half."""
    backend, parent, procs = sandbox
    profile = tmp_path / "profile.yaml"
    profile.write_text("spec:\n  cpu: {offlineThresholdPercent: 100}\n")
    agent = make_agent(backend, parent, [PodInfo("web", qos_class="Burstable", qos_level=QosLevel.LS),
                                         PodInfo("batch", qos_class="BestEffort", qos_level=QosLevel.BE)],
                       profile=profile)
    for group in ("online/podweb", "offline/podbatch"):
        os.sched_setaffinity(spawn(backend, f"{parent}/{group}", procs).pid, {0})
    agent.slow_tick()
    cpu = Path("/sys/fs/cgroup/cpu") / parent
    assert (cpu / "offline/cpu.idle").read_text().strip() == "1"
    assert (cpu / "online/cpu.idle").read_text().strip() == "0"
    used = lambda group: backend.cpu_usage_ns(f"{parent}/{group}")  # noqa: E731
    before = {g: used(g) for g in ("online/podweb", "offline/podbatch")}
    time.sleep(1.0)
    online, offline = (used(g) - before[g] for g in ("online/podweb", "offline/podbatch"))
    assert online / (online + offline) > 0.9, (online, offline)


def test_an_online_burst_shrinks_the_offline_quota(sandbox) -> None:
    backend, parent, procs = sandbox
    agent = make_agent(backend, parent, [PodInfo("web", qos_class="Burstable", qos_level=QosLevel.LS),
                                         PodInfo("batch", qos_class="BestEffort", qos_level=QosLevel.BE)])
    spawn(backend, f"{parent}/offline/podbatch", procs)
    online = spawn(backend, f"{parent}/online/podweb", procs)
    deadline = time.monotonic() + 30
    while backend.cpu_usage_ns(f"{parent}/online/podweb") == 0 and time.monotonic() < deadline:
        time.sleep(0.01)  # running (its interpreter started, however busy the machine), then stopped: idle
    os.kill(online.pid, signal.SIGSTOP)
    agent.slow_tick()
    time.sleep(0.5)
    agent.slow_tick()
    before = agent.quota if agent.quota is not None else agent.capacity.cpu_millis  # open: the whole node
    for _ in range(3):
        agent.fast_tick()
        time.sleep(0.025)
    os.kill(online.pid, signal.SIGCONT)  # online work steps from idle to busy
    started = time.monotonic()
    while time.monotonic() - started < 2 and (agent.quota is None or agent.quota >= before - 400):
        agent.fast_tick()
        time.sleep(0.025)
    assert agent.quota is not None and agent.quota < before - 400, f"quota stayed at {agent.quota} (was {before})"
    assert time.monotonic() - started < 0.5  # cut within a few fast ticks
    written = int((Path("/sys/fs/cgroup/cpu") / parent / "offline/cpu.cfs_quota_us").read_text())
    assert written * 1000 // 100_000 == agent.quota


def test_a_pod_that_vanished_is_skipped(sandbox) -> None:
    backend, parent, procs = sandbox
    pods = [PodInfo("gone", qos_class="BestEffort", qos_level=QosLevel.BE)]
    agent = make_agent(backend, parent, pods)
    report = agent.slow_tick()
    assert [p.uid for p in report.load.pods] == ["gone"]
    assert backend._fds, "the pod's counter files are kept open"
    remove_group(backend, f"{parent}/offline/podgone")  # it leaves between two ticks
    report = agent.slow_tick()
    assert report.load.pods[0].cpu_used_cores == 0
    with pytest.raises(FileNotFoundError):  # through the kept descriptor: ENODEV, then no file
        backend.cpu_usage_ns(f"{parent}/offline/podgone")
    assert agent.metrics.registry.get_sample_value("scoria_agent_cgroup_write_errors_total", {"kind": "ENOENT"}) is None


def test_the_fast_loops_reader_sees_a_removed_group_fail_and_a_new_one_read(sandbox) -> None:
    backend, parent, procs = sandbox
    make_group(backend, f"{parent}/x")
    read = backend.cpu_usage_reader(f"{parent}/x")
    assert read() == 0
    remove_group(backend, f"{parent}/x")
    with pytest.raises(OSError):  # ENODEV from the kept descriptor
        read()
    make_group(backend, f"{parent}/x")  # made again: the reader opens the new one
    p = spawn(backend, f"{parent}/x", procs)
    deadline = time.monotonic() + 10
    while read() == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert read() > 0 and p.poll() is None


def test_groups_are_created_joined_and_removed_cleanly(sandbox) -> None:
    backend, parent, procs = sandbox
    make_group(backend, f"{parent}/a/b")
    p = spawn(backend, f"{parent}/a/b", procs)
    assert p.pid in pids(backend, f"{parent}/a/b")
    assert (Path("/sys/fs/cgroup/cpuset") / parent / "a/b/cpuset.cpus").read_text().strip()  # usable cpuset
    remove_group(backend, f"{parent}/a")  # with a live process still inside
    assert not (Path("/sys/fs/cgroup/cpu") / parent / "a").exists() and p.poll() is None


def test_turning_cpu_idle_off_in_the_profile_takes_effect(sandbox, tmp_path: Path) -> None:
    """The kernel refuses cpu.shares on an idle group: the agent clears cpu.idle before it writes them."""
    backend, parent, _ = sandbox
    profile = tmp_path / "profile.yaml"
    profile.write_text("spec:\n  cpu: {useCpuIdle: true}\n")
    agent = make_agent(backend, parent, [PodInfo("batch", qos_class="BestEffort", qos_level=QosLevel.BE)],
                       profile=profile)
    agent.slow_tick()
    cpu = Path("/sys/fs/cgroup/cpu") / parent
    assert (cpu / "offline/cpu.idle").read_text().strip() == (cpu / "offline/podbatch/cpu.idle").read_text().strip() == "1"
    profile.write_text("spec:\n  cpu: {useCpuIdle: false}\n")
    os.utime(profile, (time.time() + 5, time.time() + 5))  # a new mtime whatever the clock's resolution
    agent.slow_tick()
    assert (cpu / "offline/cpu.idle").read_text().strip() == (cpu / "offline/podbatch/cpu.idle").read_text().strip() == "0"
    assert (cpu / "offline/podbatch/cpu.shares").read_text().strip() == "2"
    errors = [s.value for m in agent.metrics.registry.collect() for s in m.samples
              if s.name == "scoria_agent_cgroup_write_errors_total"]
    assert not any(errors), errors


def test_pids_below_finds_processes_in_every_group_under_a_parent(sandbox) -> None:
    backend, parent, procs = sandbox
    make_group(backend, f"{parent}/offline/podx")
    p = spawn(backend, f"{parent}/offline/podx", procs)
    assert p.pid in pids_below(backend, parent) and p.pid not in pids(backend, parent)
    assert pids_below(backend, f"{parent}/gone") == set()
