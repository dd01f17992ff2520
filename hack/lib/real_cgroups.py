"""The agent on real cgroups, for the real-cgroup tests and ``hack/bench/qos_reaction.py``: CPU hogs
placed in a cgroup, and an agent managing pods under a parent of our own."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from pathlib import Path

from agent.cgroups.backend import detect_backend
from agent.cgroups.layout import FixedLayout
from agent.cgroups.tree import attach, make_group, remove_group
from agent.evictor import RecordingEvictor
from agent.hostpaths import HostPaths
from agent.loop import Agent, AgentConfig
from agent.pods import PodInfo, StaticPodSource
from agent.profile import ProfileWatcher

BUSY = "while True:\n    pass\n"  # one core's worth of work


@contextlib.contextmanager
def sandbox(backend, controller: str):
    """A uniquely named parent cgroup and a list for the processes started in it; both gone afterwards."""
    parent = f"scoria-test-{uuid.uuid4().hex[:12]}"
    procs: list[subprocess.Popen] = []
    make_group(backend, parent)
    try:
        yield parent, procs
    finally:
        for p in procs:
            p.kill()
            p.wait()
        remove_group(backend, parent)
        assert not backend.directory(parent, controller).exists()


def spawn(backend, group: str, procs: list) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", BUSY])
    procs.append(p)
    attach(backend, group, p.pid)
    return p


def make_agent(backend, parent: str, pods: list[PodInfo], profile: Path | None = None,
               config: AgentConfig | None = None) -> Agent:
    """An agent for ``pods`` under ``parent`` (``parent/online``, ``parent/offline``), their cgroups made."""
    layout = FixedLayout(backend, parent)
    for pod in pods:
        make_group(backend, layout.pod_path(pod.uid, pod.qos_class))
    return Agent(config or AgentConfig("this-node"), paths=HostPaths(), backend=backend, layout=layout,
                 pods=StaticPodSource(pods), profiles=ProfileWatcher(profile), evictor=RecordingEvictor())


def runtime_unavailable() -> str | None:
    """Why the local runtime's real-process tests cannot run here (None: they can)."""
    if os.geteuid() != 0:
        return "needs root (the local runtime makes cgroups and moves processes into them)"
    try:
        backend = detect_backend(HostPaths())
    except FileNotFoundError:
        return "no cgroup hierarchy mounted"
    if backend.version != 1:
        return "these tests are written for cgroup v1"
    for controller in ("cpu", "cpuacct", "memory", "cpuset"):
        if not os.access(backend.directory("", controller), os.W_OK):
            return f"needs a writable cgroup v1 {controller} hierarchy"
    return None
