"""What the local runtime's parts share: this machine's cgroups, the state directory, the clock and settings.

One :class:`RuntimeContext` is made by :class:`~agent.embedded.runtime.LocalRuntime` and
handed to the functions of :mod:`.starting`, :mod:`.exits`, :mod:`.stopping`
and :mod:`.adoption`; none of them keeps anything of its own.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.cgroups.backend import Backend
from agent.cgroups.executor import Executor
from agent.cgroups.layout import Layout
from agent.embedded.phase import Backoff
from agent.embedded.records import StateDir
from agent.metrics import AgentMetrics

if TYPE_CHECKING:
    from agent.embedded.podnet import PodNetwork

# The runtime's parts log under the runtime's name, as they did when they were one module.
LOGGER = "agent.embedded.runtime"

BASE_ENV_KEYS = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR")


def default_base_env() -> dict[str, str]:
    """What every container starts from (no image, so no image environment): a few of the agent's own."""
    env = {k: os.environ[k] for k in BASE_ENV_KEYS if k in os.environ}
    env.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    return env


@dataclass
class RuntimeContext:
    backend: Backend
    layout: Layout
    executor: Executor              # writes the pods' limits: the agent's one seam for cgroup writes
    state: StateDir                 # records, exit files, logs
    clock: Callable[[], float]      # wall clock, seconds
    backoff: Backoff                # restarts' back-off
    node_name: str                  # for the pods' downward-API environment
    base_env: dict[str, str]        # what every container's environment starts from
    workdir: str                    # a container's working directory when its spec names none
    proc: str                       # /proc, to tell a surviving wrapper from a process reusing its pid
    metrics: AgentMetrics | None = None
    network: PodNetwork | None = None  # pods' own network namespaces (None: every pod on the host's network)
    tools: dict[str, str] | str = ""   # nsenter, unshare, mount, hostname (podns.find_tools), or what is missing
