"""PSI: the cumulative stall counter, and triggers armed on this machine's real pressure files — the
node's (/proc/pressure/cpu) and a cgroup v2 group's cpu.pressure, where a v2 hierarchy is mounted."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from agent.cgroups.backend import V1Backend, V2Backend
from agent.collectors.psi import UNPRIVILEGED_WINDOW_US, arm, open_trigger, some_total_us, stall_counter
from agent.hostpaths import HostPaths

PRESSURE = Path("/proc/pressure/cpu")
UNIFIED = next((p for p in (Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup"))
                if (p / "cgroup.procs").exists() and (p / "cpu.pressure").exists()), None)
BUSY = "import time\nend = time.monotonic() + 8\nwhile time.monotonic() < end:\n    pass\n"


def test_the_stall_counter_reads_the_some_total(tmp_path: Path) -> None:
    group = tmp_path / "kubepods.slice"
    group.mkdir()
    (group / "cpu.pressure").write_text("some avg10=1.00 avg60=0.50 avg300=0.10 total=4321\n"
                                        "full avg10=0.00 avg60=0.00 avg300=0.00 total=99\n")
    assert some_total_us(str(group / "cpu.pressure")) == 4321
    read = stall_counter(V2Backend(HostPaths(cgroup=tmp_path)), "kubepods.slice")
    assert read is not None and read() == 4_321_000
    assert stall_counter(V2Backend(HostPaths(cgroup=tmp_path)), "elsewhere") is None  # no file: not kept
    assert stall_counter(V1Backend(HostPaths(cgroup=tmp_path)), "kubepods") is None  # v1: the node's only


def test_a_fixture_file_is_never_armed(tmp_path: Path) -> None:
    fake = tmp_path / "cpu"
    fake.write_text("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    with pytest.raises(OSError) as exc:
        arm(fake, 5000, 500_000)
    assert exc.value.errno == errno.EINVAL and fake.read_text().startswith("some avg10")  # left as it was
    assert open_trigger(fake) is None and open_trigger(tmp_path / "missing") is None


needs_psi = pytest.mark.skipif(not PRESSURE.exists() or os.geteuid() != 0, reason="needs root and PSI (psi=1)")


def _stall(procs: list, group: Path | None = None) -> None:
    """More busy processes than CPUs for a few seconds: tasks wait for a CPU (they are killed by the test)."""
    for _ in range((os.cpu_count() or 1) + 1):
        p = subprocess.Popen([sys.executable, "-c", BUSY])
        procs.append(p)
        os.setpriority(os.PRIO_PROCESS, p.pid, 19)  # stalled, but yielding to everyone else on the machine
        if group is not None:
            (group / "cgroup.procs").write_text(str(p.pid))


def _fires_within(trigger, seconds: float) -> bool:
    wait, deadline = trigger.waiter(), time.monotonic() + seconds
    while time.monotonic() < deadline:
        if wait(0.2):
            return True
    return False


@needs_psi
def test_a_fine_trigger_only_where_the_kernel_allows_one() -> None:
    """A window under 2 s needs CAP_SYS_RESOURCE; without it there is no trigger fine enough to use."""
    trigger = open_trigger(PRESSURE)
    try:
        with open("/proc/self/status") as f:
            effective = int(next(line for line in f if line.startswith("CapEff:")).split()[1], 16)
        if effective & (1 << 24):  # CAP_SYS_RESOURCE
            assert trigger is not None and trigger.window_us == 500_000
        else:
            assert trigger is None
    finally:
        if trigger is not None:
            trigger.close()


@needs_psi
def test_the_node_trigger_fires_on_a_cpu_stall() -> None:
    trigger = open_trigger(PRESSURE, stall_us=50_000, coarsest_us=UNPRIVILEGED_WINDOW_US)
    assert trigger is not None and repr(trigger).startswith("PSI trigger /proc/pressure/cpu")
    procs: list[subprocess.Popen] = []
    try:
        while trigger.fired():  # an event from before the test
            time.sleep(trigger.window_us / 1e6)
        _stall(procs)
        assert _fires_within(trigger, 3 * trigger.window_us / 1e6 + 1)
    finally:
        trigger.close()
        for p in procs:
            p.kill()
            p.wait()


@needs_psi
@pytest.mark.skipif(UNIFIED is None, reason="no cgroup v2 hierarchy with PSI mounted")
def test_a_cgroup_v2_trigger_fires_on_its_own_tasks_stall() -> None:
    """The v2 path: a group's cpu.pressure counts its own tasks only (on this hybrid host the v2 hierarchy
    holds no controllers, but keeps PSI per group)."""
    assert UNIFIED is not None
    parent = UNIFIED / f"scoria-test-{uuid.uuid4().hex[:12]}"
    group = parent / "online"
    group.mkdir(parents=True)
    procs: list[subprocess.Popen] = []
    trigger = None
    try:
        backend = V2Backend(HostPaths(cgroup=UNIFIED))
        read = stall_counter(backend, f"{parent.name}/online")
        assert read is not None and read() == 0  # a new group has stalled for nothing yet
        trigger = open_trigger(group / "cpu.pressure", stall_us=50_000, coarsest_us=UNPRIVILEGED_WINDOW_US)
        assert trigger is not None
        assert not trigger.fired()
        _stall(procs, group)
        assert _fires_within(trigger, 3 * trigger.window_us / 1e6 + 1)
        assert read() > 0
    finally:
        if trigger is not None:
            trigger.close()
        for p in procs:
            p.kill()
            p.wait()
        time.sleep(0.1)
        group.rmdir()
        parent.rmdir()
    assert not parent.exists()
