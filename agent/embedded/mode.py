"""Embedded mode: the local runtime runs the pods the scheduler sends, and is the pod source and the evictor.

Built whole by its constructor: one executor, made first, writes both the
runtime's pod limits and the loop's QoS settings (one audit, one error count);
the runtime adopts what an earlier agent left as it is made.  The scheduler's
pod actions (START, STOP, EVICT) go to the runtime.  Shutting down stops every
pod and removes every cgroup the runtime made; a second SIGINT/SIGTERM
meanwhile kills at once.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from agent.cgroups.executor import Executor
from agent.embedded.evictor import LocalEvictor
from agent.embedded.podnet import PodNetwork
from agent.embedded.runtime import LocalRuntime
from agent.evictor import Evictor
from agent.loop import LocalPods
from agent.mode import ModeContext, make_executor
from agent.pods import PodSource
from proto.errors import InputError
from proto.model import Directive

SignalHandler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


def pod_network_for(state_dir: str) -> PodNetwork:
    """Network namespaces for this agent's pods; InputError (exit 2) saying why when the machine cannot."""
    network = PodNetwork(str(Path(state_dir).absolute()))
    problem = network.problem()
    if problem is not None:
        raise InputError(f"--pod-network isolated: pods cannot have network namespaces of their own here ({problem}); "
                         "run with --pod-network host to put every pod on this machine's network")
    return network


class EmbeddedMode:
    def __init__(self, context: ModeContext, *, state_dir: str, shutdown_grace: float, pod_network: str = "host"):
        self.executor: Executor = make_executor(context)
        self.local = LocalRuntime(state_dir, context.backend, context.layout, node_name=context.node_name,
                                  metrics=context.metrics, proc=str(context.paths.proc), executor=self.executor,
                                  network=pod_network_for(state_dir) if pod_network == "isolated" else None)
        self.shutdown_grace = shutdown_grace
        self.pods: PodSource = self.local
        self.evictor: Evictor = LocalEvictor(self.local)
        self.node_labels: Callable[[], dict[str, str]] = context.labels
        self.taint: Callable[[bool], bool] | None = None
        self.node_resources: Callable[[int, int], bool] | None = None
        self.runtime: LocalPods | None = self.local

    def start(self) -> None:
        pass  # the runtime adopted its pods when it was made; the loop's slow tick drives it

    def ready(self, timeout: float) -> bool:
        return True

    def on_directive(self, directive: Directive) -> None:
        self.local.on_directive(directive)  # START/STOP/EVICT pod actions

    def shutdown(self) -> None:
        """Stop every local pod and remove its cgroups; a second SIGINT/SIGTERM meanwhile kills at once."""
        previous: dict[signal.Signals, SignalHandler] = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                previous[sig] = signal.signal(sig, lambda *_: self.local.hurry())
            except ValueError:  # not the main thread (tests): no handlers, the shutdown still runs
                pass
        try:
            self.local.shutdown(self.shutdown_grace)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
