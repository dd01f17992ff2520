"""Kubernetes mode (the DaemonSet): pods from the API server, evictions through the Eviction API, the Node patched.

The node's labels are read from its Node object (the command line's added on
top).  While enforcing, the node carries the evicting taint under pressure and
its status carries the batch allocatable; observing (``--dry-run``,
``report --once``) it is left alone.  The pod watch is the mode's own thread:
:meth:`KubernetesMode.start` starts it, :meth:`KubernetesMode.ready` waits for
its first list.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.cgroups.executor import Executor
from agent.evictor import Evictor
from agent.kubernetes.evictor import KubernetesEvictor
from agent.kubernetes.node import NodeResources, NodeTaint
from agent.kubernetes.pods import KubernetesPodSource
from agent.labels import NodeLabels
from agent.loop import LocalPods
from agent.mode import ModeContext, make_executor
from agent.pods import PodSource
from proto.model import Directive


def connect(kubeconfig: str | None) -> Any:
    """A CoreV1Api client: from ``kubeconfig``, or the pod's service account (in-cluster) without one."""
    from kubernetes import client, config
    if kubeconfig:
        config.load_kube_config(kubeconfig)
    else:
        config.load_incluster_config()
    return client.CoreV1Api()


class KubernetesMode:
    def __init__(self, context: ModeContext, *, core_v1: Any):
        node = context.node_name
        self.watch = KubernetesPodSource(core_v1, node)
        self.pods: PodSource = self.watch
        self.evictor: Evictor = KubernetesEvictor(core_v1)
        self.executor: Executor = make_executor(context)
        self.node_labels: Callable[[], dict[str, str]] = NodeLabels(context.labels.static, core_v1=core_v1,
                                                                    node_name=node)
        self.taint: Callable[[bool], bool] | None = NodeTaint(core_v1, node) if context.enforce else None
        self.node_resources: Callable[[int, int], bool] | None = \
            NodeResources(core_v1, node) if context.enforce else None
        self.runtime: LocalPods | None = None

    def start(self) -> None:
        self.watch.start()

    def ready(self, timeout: float) -> bool:
        return self.watch.synced.wait(timeout)

    def on_directive(self, directive: Directive) -> None:
        pass

    def shutdown(self) -> None:
        self.watch.stop()
