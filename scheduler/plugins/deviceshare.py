"""deviceshare: whole and shared GPUs and whole Ascend NPUs, counted device by device.

Requests: ``nvidia.com/gpu``, ``huawei.com/Ascend910``, ``huawei.com/Ascend310P``
(whole devices nobody else uses) and Volcano's shared GPUs
``volcano.sh/vgpu-number`` / ``vgpu-memory`` (MiB per GPU; unset: all of it)
/ ``vgpu-cores`` (percent per GPU; 100: the GPU alone).  Devices come from the
agents' reports; the scheduler counts what it gave each device, so the memory
and cores handed out never exceed a device, an unhealthy device takes nothing
new, and a whole or ``vgpu-cores: 100`` request needs an unused device.

Volcano's older GPU sharing, one way at a time as in Volcano:
``deviceshare.GPUSharingEnable`` — ``volcano.sh/gpu-memory`` MiB on one GPU
whose free memory holds it (other such pods share it); ``deviceshare.GPUNumberEnable``
— ``volcano.sh/gpu-number`` unused GPUs, alone.  The GPU is the lowest-numbered
that fits (Volcano's choice; ``SchedulePolicy`` and the device score apply to
vGPUs only), written on the pod as ``volcano.sh/gpu-index`` (and
``volcano.sh/predicate-time``) for Volcano's GPU-share device plugin besides
``scoria.io/devices``.  Besides reported GPUs these also use the GPUs a node
without a report advertises (``volcano.sh/gpu-number`` cards sharing
``volcano.sh/gpu-memory``, as Volcano counts them).  Volcano refuses to start
with both ways on, or with either and ``VGPUEnable``; so does Scoria's
configuration, and with either on ``VGPUEnable`` defaults to off.  A pod asking
a way that is off waits, its reason naming the flag (Volcano would bind it by
node resources alone, and its device plugin then fails to start it).  Where the
Node does not advertise them, a node's reported healthy GPUs make its
``volcano.sh/gpu-memory`` (MiB) and ``volcano.sh/gpu-number`` totals.  All ways
count on the same devices (see :mod:`scheduler.framework.ledger`), so pods left
running from another configuration are never oversold.

Several GPUs for one pod are chosen as the best-connected set (NVLink before
a shared PCIe switch before the same host bridge …, from the report's GPU
links); under a ``single-numa-node``/``restricted`` NUMA policy (the
``numa-aware`` plugin) they come from the pod's zones.  ``binpack`` fills used
devices first (nodes too: the score favours nodes whose suitable GPUs are
fuller), ``spread`` the emptiest.  The choice is written on the pod
(``scoria.io/devices``) and becomes ``CUDA_VISIBLE_DEVICES`` /
``ASCEND_VISIBLE_DEVICES`` and HAMi-core limits in the runtimes that start pods.

Nodes that report no devices (no agent) are left to their device plugins for
whole devices (node allocatable still counts them); vGPUs need reports, the
older sharing reports or the cards Volcano's device plugin advertises.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np

from proto.vocab.placement import (
    GPU,
    GPU_MEMORY,
    GPU_NUMBER,
    SHARE_MEMORY,
    SHARE_NUMBER,
    VGPU,
    VGPU_RESOURCES,
)
from scheduler.framework.args import Arg, ArgError, Args
from scheduler.framework.ledger import GPU_SHARE_MODES
from scheduler.framework.plugin import Plugin
from scheduler.framework.snapshot import TaskInfo
from scheduler.framework.util import count_reason

if TYPE_CHECKING:
    from scheduler.framework.session import Session



class DeviceShare(Plugin):
    name = "deviceshare"
    hooks = ("predicate", "predicate_reasons", "node_order")
    predicate_modes = True
    arguments = {
        "vgpu": Arg("deviceshare.VGPUEnable", "bool", None,
                    "shared GPUs (volcano.sh/vgpu-*); default: on unless GPUSharingEnable or GPUNumberEnable is"),
        "policy": Arg("deviceshare.SchedulePolicy", "str", "binpack", choices=("binpack", "spread"),
                      help="fill used devices first, or the emptiest"),
        "weight": Arg("deviceshare.ScheduleWeight", "float", 10.0, minimum=0, help="multiplies the 0-100 score"),
        "gpu_sharing": Arg("deviceshare.GPUSharingEnable", "bool", False,
                           "volcano.sh/gpu-memory: MiB of one GPU shared with other pods"),
        "gpu_number": Arg("deviceshare.GPUNumberEnable", "bool", False, "volcano.sh/gpu-number: unused GPUs, alone"),
        "node_lock": Arg("deviceshare.NodeLockEnable", "bool", False,
                         ignored="Scoria binds from one leader, so no node lock is needed"),
        "ascend_vnpu": Arg("deviceshare.AscendHAMiVNPUEnable", "bool", False,
                           unsupported="Ascend NPUs are given whole"),
        "mindcluster_vnpu": Arg("deviceshare.AscendMindClusterVNPUEnable", "bool", False,
                                unsupported="Ascend NPUs are given whole"),
        "geometries_name": Arg("deviceshare.KnownGeometriesCMName", "str", "", ignored="no vNPU templates"),
        "geometries_namespace": Arg("deviceshare.KnownGeometriesCMNamespace", "str", "", ignored="no vNPU templates"),
        "exclusive_rules": Arg("deviceshare.GPUExclusiveRules", "list", (),
                               ignored="vGPU exclusivity by pod labels is not implemented"),
    }

    @classmethod
    def parse(cls, raw: dict[str, Any] | None) -> Args:
        args = super().parse(raw)
        if args.gpu_sharing and args.gpu_number:
            raise ArgError("deviceshare.GPUSharingEnable and deviceshare.GPUNumberEnable cannot both be true "
                           "(Volcano refuses to start with both): choose sharing by memory or by number")
        if (args.gpu_sharing or args.gpu_number) and args.vgpu:
            which = "GPUSharingEnable" if args.gpu_sharing else "GPUNumberEnable"
            raise ArgError(f"deviceshare.{which} and deviceshare.VGPUEnable cannot both be true (Volcano refuses "
                           "to start with both): volcano.sh/gpu-* and volcano.sh/vgpu-* are two device plugins "
                           "for the same GPUs")
        return args

    def __init__(self, args: Args, flags: dict[str, bool] | None = None):
        super().__init__(args, flags)
        self.vgpu = args.vgpu if args.vgpu is not None else not (args.gpu_sharing or args.gpu_number)
        self.modes = tuple(mode for mode, on in ((VGPU, self.vgpu), (SHARE_MEMORY, args.gpu_sharing),
                                                 (SHARE_NUMBER, args.gpu_number)) if on)

    def adjust_nodes(self, ssn: Session) -> None:
        # Shared-GPU amounts are per device: their sum over a node means nothing, so the node-level
        # resource fit must not limit them (this plugin checks them device by device).
        for name in VGPU_RESOURCES:
            col = ssn.index.column.get(name)
            if col is not None:
                ssn.nodes.set_capacity(col, np.inf if self.vgpu else 0.0)
        if any(name in ssn.index.column for name in (GPU_MEMORY, GPU_NUMBER)):
            self._offer_reported_gpus(ssn)

    def _offer_reported_gpus(self, ssn: Session) -> None:
        """A node whose agent reports GPUs offers them as Volcano's GPU-share device plugin would advertise them.

        ``volcano.sh/gpu-memory`` (MiB, all healthy GPUs) and ``volcano.sh/gpu-number``
        (healthy GPUs), where the Node does not say (a node that does keeps its
        word: the kubelet admits pods by it).  These totals are real sums, so
        queues can be limited in them as in Volcano; the per-GPU check is this plugin's.
        """
        s = ssn.topology.s
        nodes = ssn.nodes.nodes
        kind = s.resources.index(GPU) if GPU in s.resources else -1
        gpus = (s.dev_kind == kind) & s.dev_healthy & s.known[s.dev_node]
        counts = np.bincount(s.dev_node[gpus], minlength=len(nodes)).astype(float)
        memory = np.bincount(s.dev_node[gpus], weights=s.dev_memory[gpus], minlength=len(nodes))
        for name, derived in ((GPU_MEMORY, memory), (GPU_NUMBER, counts)):
            col = ssn.index.column.get(name)
            if col is None:
                continue
            undeclared = np.array([name not in n.allocatable for n in nodes], dtype=bool) & s.known
            if undeclared.any():
                ssn.nodes.set_capacity(col, np.where(undeclared, derived, ssn.nodes.alloc[col]))

    def open(self, ssn: Session) -> None:
        self.topology = ssn.topology
        self.topology.enable(*self.modes, clock_ns=int(ssn.now.timestamp() * 1e9))
        self.topology.binpack = self.args.policy == "binpack"

    def _disabled(self, task: TaskInfo) -> str | None:
        """Why ``task`` cannot be placed here: it asks for GPUs a way the configuration does not enable."""
        for r in task.facts.devices:
            if r.mode in GPU_SHARE_MODES and r.mode not in self.topology.modes:
                flag = "GPUSharingEnable" if r.mode == SHARE_MEMORY else "GPUNumberEnable"
                return f"{r.mode} requests need deviceshare.{flag}: true"
        return None

    def predicate(self, task: TaskInfo, avail: np.ndarray | None, mode: str = "now") -> np.ndarray:
        n = self.topology.s.known.size
        if task.facts.devices and self._disabled(task):
            # Volcano would bind it by node resources alone, and its device plugin then fails to start it
            return np.zeros(n, dtype=bool)
        fit = self.topology.device_fit(task, mode)
        return np.ones(n, dtype=bool) if fit is None else fit

    def predicate_reasons(self, task: TaskInfo, avail: np.ndarray | None, among: np.ndarray) -> Counter:
        disabled = self._disabled(task)
        if disabled:
            reasons: Counter = Counter()
            count_reason(reasons, f"node(s) could not take it: {disabled}", among)
            return reasons
        return self.topology.device_reasons(task, among)

    def score_key(self, task: TaskInfo) -> tuple:
        return (task.facts.devices,)

    def node_order(self, task: TaskInfo, nodes: np.ndarray | None) -> np.ndarray | None:
        t = self.topology
        # Volcano scores vGPUs only: its older sharing takes the first GPU that fits, whatever the node
        requests = [r for r in t.requests(task) if r.mode not in GPU_SHARE_MODES]
        if not requests or not self.args.weight:
            return None
        d = np.flatnonzero(t.suitable(requests[0]))
        used = np.minimum(t.used.dev_memory[d] / np.maximum(t.s.dev_memory[d], 1) + t.used.dev_cores[d] / 100, 1)
        value = used if self.args.policy == "binpack" else 1.0 - used
        score = np.zeros(t.s.known.size)
        np.maximum.at(score, t.s.dev_node[d], 100.0 * value)
        score *= self.args.weight
        return score if nodes is None else score[nodes]
