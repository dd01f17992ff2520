"""What a run mode gives the agent's control loop, and the host modes (no API server, no local runtime).

The loop (:class:`agent.loop.Agent`) is the same in every mode; a :class:`Mode`
says where its pods come from, who evicts them, which executor writes cgroups,
what it reads and writes on the Node, and what it runs of its own:

==============  ====================================  ================================  ======================
mode            pods                                  evictions                         node
==============  ====================================  ================================  ======================
kubernetes      the API server's watch                the Eviction API                  labels, taint, batch
                (:mod:`agent.kubernetes.mode`)                                          resources in status
embedded        the local runtime, which runs them    the local runtime                 static labels
                (:mod:`agent.embedded.mode`)
host (here)     the kubelet's pod cgroups, or none    logged only (RecordingEvictor)    static labels
==============  ====================================  ================================  ======================

Every mode is built from a :class:`ModeContext` — what the command line made
first, for every mode — and built fully by its constructor; ``agent.cli``
picks one in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from agent.cgroups.backend import Backend
from agent.cgroups.executor import Executor
from agent.cgroups.layout import Layout
from agent.evictor import Evictor, RecordingEvictor
from agent.hostpaths import HostPaths
from agent.labels import NodeLabels
from agent.loop import LocalPods
from agent.metrics import AgentMetrics
from agent.pods import PodSource
from proto.model import Directive


@dataclass(frozen=True)
class ModeContext:
    """What every mode is built from: this host and its cgroups, the agent's metrics, the node's name and the
    labels given on the command line."""

    node_name: str
    paths: HostPaths
    backend: Backend
    layout: Layout
    metrics: AgentMetrics
    labels: NodeLabels
    enforce: bool              # False: observe and report only (--dry-run, report --once)


def make_executor(context: ModeContext) -> Executor:
    """The agent's one cgroup executor: write errors are counted in the agent's metrics."""
    return Executor(context.backend, on_error=context.metrics.write_error)


class Mode(Protocol):
    """What a run mode gives the control loop."""

    pods: PodSource                                   # the pods on this node
    evictor: Evictor                                  # how the loop's evictions are carried out
    executor: Executor                                # the one seam for cgroup writes (shared with the mode's own)
    node_labels: Callable[[], dict[str, str]]         # labels selecting the profile's node overrides
    taint: Callable[[bool], bool] | None              # marks the node while evicting; None: not marked
    node_resources: Callable[[int, int], bool] | None  # batch allocatable onto the Node; None: not published
    runtime: LocalPods | None                         # pods this agent runs itself (ticked, in the report)

    def start(self) -> None:
        """Start what the mode runs of its own (threads, watches); before the loop's first look at the pods."""

    def ready(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds until the pod inventory is complete; whether it is."""

    def on_directive(self, directive: Directive) -> None:
        """The scheduler's directives, for the mode's part in them (embedded: the pod actions)."""

    def shutdown(self) -> None:
        """Stop what the mode runs of its own (after the loop has stopped)."""


class HostMode:
    """No API server and no local runtime: the pods a source finds on the host, evictions only logged.

    With the kubelet's pod cgroups as the source (``--pods-from cgroups``, the
    default) or none (``--pods-from none``: node figures only).  Nothing of its own runs.
    """

    def __init__(self, context: ModeContext, *, pods: PodSource):
        self.pods: PodSource = pods
        self.evictor: Evictor = RecordingEvictor()
        self.executor: Executor = make_executor(context)
        self.node_labels: Callable[[], dict[str, str]] = context.labels
        self.taint: Callable[[bool], bool] | None = None
        self.node_resources: Callable[[int, int], bool] | None = None
        self.runtime: LocalPods | None = None

    def start(self) -> None:
        pass

    def ready(self, timeout: float) -> bool:
        return True

    def on_directive(self, directive: Directive) -> None:
        pass

    def shutdown(self) -> None:
        pass
