"""The agent on real cgroups, for the real-cgroup tests and ``hack/bench/qos_reaction.py``: CPU hogs
placed in a cgroup, and an agent managing pods under a parent of our own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from agent.agent import Agent, AgentConfig
from agent.cgroups.layout import FixedLayout
from agent.cgroups.tree import attach, make_group
from agent.evictor import RecordingEvictor
from agent.hostpaths import HostPaths
from agent.pods import PodInfo, StaticPodSource
from agent.profile import ProfileWatcher

BUSY = "while True:\n    pass\n"  # one core's worth of work


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
