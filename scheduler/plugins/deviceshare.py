"""deviceshare: whole and shared GPUs and whole Ascend NPUs, counted device by device.

Requests: ``nvidia.com/gpu``, ``huawei.com/Ascend910``, ``huawei.com/Ascend310P``
(whole devices nobody else uses) and Volcano's shared GPUs
``volcano.sh/vgpu-number`` / ``vgpu-memory`` (MiB per GPU; unset: all of it)
/ ``vgpu-cores`` (percent per GPU; 100: the GPU alone).  Devices come from the
agents' reports; the scheduler counts what it gave each device, so the memory
and cores handed out never exceed a device, an unhealthy device takes nothing
new, and a whole or ``vgpu-cores: 100`` request needs an unused device.

Several GPUs for one pod are chosen as the best-connected set (NVLink before
a shared PCIe switch before the same host bridge …, from the report's GPU
links); under a ``single-numa-node``/``restricted`` NUMA policy (the
``numa-aware`` plugin) they come from the pod's zones.  ``binpack`` fills used
devices first (nodes too: the score favours nodes whose suitable GPUs are
fuller), ``spread`` the emptiest.  The choice is written on the pod
(``scoria.io/devices``) and becomes ``CUDA_VISIBLE_DEVICES`` /
``ASCEND_VISIBLE_DEVICES`` and HAMi-core limits in the runtimes that start pods.

Nodes that report no devices (no agent) are left to their device plugins for
whole devices (node allocatable still counts them); shared GPUs need reports.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import numpy as np

from proto.vocab.placement import VGPU_RESOURCES, DeviceRequest
from scheduler.framework.args import Arg
from scheduler.framework.plugin import Plugin
from scheduler.framework.snapshot import TaskInfo
from scheduler.framework.util import count_reason

if TYPE_CHECKING:
    from scheduler.framework.session import Session

_OLD_SHARING = "Scoria shares GPUs through volcano.sh/vgpu-* (VGPUEnable); the older modes are not implemented"


class DeviceShare(Plugin):
    name = "deviceshare"
    hooks = ("predicate", "predicate_reasons", "node_order")
    predicate_modes = True
    arguments = {
        "vgpu": Arg("deviceshare.VGPUEnable", "bool", True, "shared GPUs (volcano.sh/vgpu-*)"),
        "policy": Arg("deviceshare.SchedulePolicy", "str", "binpack", choices=("binpack", "spread"),
                      help="fill used devices first, or the emptiest"),
        "weight": Arg("deviceshare.ScheduleWeight", "float", 10.0, minimum=0, help="multiplies the 0-100 score"),
        "gpu_sharing": Arg("deviceshare.GPUSharingEnable", "bool", False, unsupported=_OLD_SHARING),
        "gpu_number": Arg("deviceshare.GPUNumberEnable", "bool", False, unsupported=_OLD_SHARING),
        "node_lock": Arg("deviceshare.NodeLockEnable", "bool", False,
                         ignored="Scoria binds from one leader, so no node lock is needed"),
        "ascend_vnpu": Arg("deviceshare.AscendHAMiVNPUEnable", "bool", False,
                           unsupported="Ascend NPUs are given whole"),
        "mindcluster_vnpu": Arg("deviceshare.AscendMindClusterVNPUEnable", "bool", False,
                                unsupported="Ascend NPUs are given whole"),
        "geometries_name": Arg("deviceshare.KnownGeometriesCMName", "str", "", ignored="no vNPU templates"),
        "geometries_namespace": Arg("deviceshare.KnownGeometriesCMNamespace", "str", "", ignored="no vNPU templates"),
    }

    def adjust_nodes(self, ssn: Session) -> None:
        # Shared-GPU amounts are per device: their sum over a node means nothing, so the node-level
        # resource fit must not limit them (this plugin checks them device by device).
        for name in VGPU_RESOURCES:
            col = ssn.index.column.get(name)
            if col is not None:
                ssn.nodes.set_capacity(col, np.inf if self.args.vgpu else 0.0)

    def open(self, ssn: Session) -> None:
        self.topology = ssn.topology
        self.topology.devices = True
        self.topology.binpack = self.args.policy == "binpack"

    def _requests(self, task: TaskInfo) -> list[DeviceRequest]:
        return [r for r in task.facts.devices if self.args.vgpu or not r.shared]

    def predicate(self, task: TaskInfo, avail: np.ndarray | None, mode: str = "now") -> np.ndarray:
        fit = self.topology.device_fit(task, mode) if self._requests(task) else None
        return np.ones(self.topology.s.known.size, dtype=bool) if fit is None else fit

    def predicate_reasons(self, task: TaskInfo, avail: np.ndarray | None, among: np.ndarray) -> Counter:
        reasons: Counter = Counter()
        t = self.topology
        for r in self._requests(task):
            short = among & ~np.where(t.s.known, t.device_counts(r) >= r.count, not r.shared)
            unreported = short & ~t.s.known
            count_reason(reasons, "node(s) reported no GPUs for shared GPU requests", unreported)
            count_reason(reasons, f"node(s) had not {r.describe()} free", short & t.s.known)
            among = among & ~short
        return reasons

    def score_key(self, task: TaskInfo) -> tuple:
        return (task.facts.devices,)

    def node_order(self, task: TaskInfo, nodes: np.ndarray | None) -> np.ndarray | None:
        t = self.topology
        requests = self._requests(task)
        if not requests or not self.args.weight:
            return None
        d = np.flatnonzero(t.suitable(requests[0]))
        used = np.minimum(t.used.dev_memory[d] / np.maximum(t.s.dev_memory[d], 1) + t.used.dev_cores[d] / 100, 1)
        value = used if self.args.policy == "binpack" else 1.0 - used
        score = np.zeros(t.s.known.size)
        np.maximum.at(score, t.s.dev_node[d], 100.0 * value)
        score *= self.args.weight
        return score if nodes is None else score[nodes]
