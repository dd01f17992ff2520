"""NUMA pinning on this machine's real cgroup v1 cpuset hierarchy, through the agent's slow loop.

The node's topology is a fixture with two zones, zone 0 being CPU 0 and memory node 0 (valid
on any host), so a container of a pod annotated ``scoria.io/numa-nodes: "0"`` must end up on
CPU 0 and memory node 0 — in the files and in the affinity of the process inside it — while
the pod cgroup above keeps its parent's cpuset.  Under a uniquely named parent, removed with
its processes whatever happens.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from agent.cgroups.backend import detect_backend
from agent.cgroups.layout import FixedLayout
from agent.cgroups.tree import attach, make_group
from agent.evictor import RecordingEvictor
from agent.hostpaths import HostPaths, parse_cpulist
from agent.loop import Agent, AgentConfig
from agent.pods import PodInfo, StaticPodSource
from agent.profile import ProfileWatcher
from hack.lib.real_cgroups import sandbox as cgroup_sandbox
from proto.model import Capacity, NumaZone, QosLevel
from proto.vocab.placement import NUMA_NODES_ANNOTATION

CPUSET = Path("/sys/fs/cgroup/cpuset")
CONTAINER = "0123456789abcdef0123"  # a container id, as the runtime names its cgroup


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    if (Path("/sys/fs/cgroup") / "cgroup.controllers").exists():
        return "cgroup v2 host (this test is for the v1 cpuset hierarchy)"
    if not (CPUSET / "cpuset.cpus").exists() or not os.access(CPUSET, os.W_OK):
        return "no writable cgroup v1 cpuset hierarchy at /sys/fs/cgroup/cpuset"
    try:
        cpus, mems = (parse_cpulist((CPUSET / f"cpuset.{k}").read_text()) for k in ("cpus", "mems"))
    except (OSError, ValueError) as exc:
        return f"cannot read the root cpuset ({exc})"
    if 0 not in cpus or 0 not in mems or len(cpus) < 2:
        return f"needs CPU 0, memory node 0 and a second CPU in the root cpuset (have cpus {cpus}, mems {mems})"
    return None


REASON = _why_not()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")


@pytest.fixture
def sandbox():
    backend = detect_backend(HostPaths())
    with cgroup_sandbox(backend, "cpuset") as (parent, procs):
        yield backend, parent, procs


def test_a_container_of_a_pod_placed_in_zone_0_runs_on_zone_0(sandbox) -> None:
    backend, parent, procs = sandbox
    layout = FixedLayout(backend, parent)
    pod = PodInfo("numa0", "ml", "pinned", "Guaranteed", QosLevel.LC, annotations={NUMA_NODES_ANNOTATION: "0"})
    pod_path = layout.pod_path(pod.uid, pod.qos_class)
    container = f"{pod_path}/{CONTAINER}"
    make_group(backend, container)  # v1: a new cpuset group gets its parent's lists (else it could hold no task)
    wide = (CPUSET / pod_path / "cpuset.cpus").read_text().strip()
    wide_mems = (CPUSET / pod_path / "cpuset.mems").read_text().strip()
    sleeper = subprocess.Popen(["sleep", "60"])
    procs.append(sleeper)
    attach(backend, container, sleeper.pid)
    assert os.sched_getaffinity(sleeper.pid) == set(parse_cpulist(wide))
    zones = [NumaZone(0, cpus=[0], memory_bytes=2**30), NumaZone(1, cpus=[1], memory_bytes=2**30)]
    agent = Agent(AgentConfig("this-node"), paths=HostPaths(), backend=backend, layout=layout,
                  pods=StaticPodSource([pod]), profiles=ProfileWatcher(None), evictor=RecordingEvictor(),
                  read_capacity=lambda paths: Capacity(2000, 2 * 2**30, numa_zones=zones))
    agent.slow_tick()
    assert (CPUSET / container / "cpuset.cpus").read_text().strip() == "0"
    assert (CPUSET / container / "cpuset.mems").read_text().strip() == "0"
    assert os.sched_getaffinity(sleeper.pid) == {0}, "the kernel moved the container's process onto zone 0"
    assert (CPUSET / pod_path / "cpuset.cpus").read_text().strip() == wide, "the pod cgroup keeps its cpuset"
    assert agent.metrics.registry.get_sample_value("scoria_agent_cgroup_write_errors_total", {"kind": "EINVAL"}) is None
    pinning = [(c.knob, c.new) for c in agent.executor.audit if c.path == container]
    assert pinning == [("cpuset.cpus", "0")] + ([("cpuset.mems", "0")] if wide_mems != "0" else [])
    agent.slow_tick()
    assert [(c.knob, c.new) for c in agent.executor.audit if c.path == container] == pinning, "written once"
