"""What placement knows of a node's hardware: NUMA zones, devices and how GPUs are connected.

Read from the node's last report (:class:`scheduler.cluster.nodeview.NodeTelemetry`
keeps its capacity and devices as received) as it arrives, and rebuilt only
when the report's hardware changes (its ``inventory_key``); a cycle reuses the
arrays until a node or an inventory changes.  A node without a report whose
Node advertises Volcano's GPU-share resources (``volcano.sh/gpu-number``
cards, ``volcano.sh/gpu-memory`` MiB in all) gets those cards as its inventory,
counted only for the requests of those resources (:func:`advertised_inventory`).
:class:`StaticTopology` lays
the inventories of all nodes out as arrays once per change of the node set
or of any inventory, for the session's :class:`scheduler.framework.ledger.Topology`.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from proto.vocab.placement import (
    GPU,
    GPU_MEMORY,
    GPU_NUMBER,
    GPU_UNHEALTHY_ANNOTATION,
    NUMA_POLICIES,
    NUMA_POLICY_ANNOTATION,
    npu_resource,
)

log = logging.getLogger(__name__)

MIB = 2**20
POLICY_CODES = {"": 0, **{name: code for code, name in enumerate(NUMA_POLICIES)}}  # stricter is higher
# What a pair of GPUs costs to use together, by how they are connected (lower is better).
NVLINK_COST = 1.0
LEVEL_COSTS = (70.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0)  # by GpuTopologyLevel: UNKNOWN, INTERNAL … SYSTEM
UNLINKED_COST = 70.0
MAX_ADVERTISED_GPUS = 1024  # volcano.sh/gpu-number beyond this is not a node's GPUs: the node is given none


@dataclass(frozen=True, slots=True)
class Device:
    resource: str  # the whole-device resource it is counted under (nvidia.com/gpu, huawei.com/Ascend910, …)
    uuid: str
    index: int
    memory_mib: int
    zone: int  # NUMA zone, -1 for none
    healthy: bool


@dataclass(frozen=True, slots=True)
class Inventory:
    zone_ids: tuple[int, ...]
    zone_cpu: tuple[int, ...]  # millicores per zone
    zone_memory: tuple[int, ...]  # bytes per zone
    distances: tuple[tuple[int, ...], ...]
    policy: str  # the kubelet's topology manager policy; "" unknown
    devices: tuple[Device, ...]
    gpu_costs: dict[tuple[int, int], float]  # (index, index) -> cost of using the two GPUs together
    advertised: bool = False  # no report: GPUs a device plugin advertises (volcano.sh/gpu-number), see below


def build_inventory(capacity: Any, devices: Any) -> Inventory:
    """From a report's capacity and devices (protobuf messages or :mod:`proto.model` objects)."""
    zones = sorted(capacity.numa_zones, key=lambda z: z.id)
    out_devices = []
    for g in devices.gpus:
        out_devices.append(Device(GPU, g.uuid, g.index, g.memory_total_bytes // MIB, g.numa_node, g.healthy))
    # Each NPU chip is a device; its index is its place in the report (npu-smi lists chips in the order of
    # the /dev/davinci devices), which is what ASCEND_VISIBLE_DEVICES takes.
    for k, n in enumerate(sorted(devices.npus, key=lambda n: (n.id, n.chip))):
        out_devices.append(Device(npu_resource(n.model), f"NPU-{n.id}-{n.chip}", k, n.hbm_total_bytes // MIB,
                                  n.numa_node, n.healthy))
    costs: dict[tuple[int, int], float] = {}
    for g in devices.gpus:
        for link in g.links:
            cost = NVLINK_COST / min(link.nvlinks, 18) if link.nvlinks else LEVEL_COSTS[_level(link.level)]
            key = (min(g.index, link.peer_index), max(g.index, link.peer_index))
            costs[key] = min(cost, costs.get(key, cost))
    return Inventory(
        zone_ids=tuple(z.id for z in zones), zone_cpu=tuple(len(z.cpus) * 1000 for z in zones),
        zone_memory=tuple(z.memory_bytes for z in zones), distances=tuple(tuple(z.distances) for z in zones),
        policy=getattr(capacity, "topology_policy", "") or "", devices=tuple(out_devices), gpu_costs=costs)


def advertised_inventory(node: Any) -> Inventory | None:
    """The GPUs of a node without a report, as Volcano's GPU-share device plugin advertises them; None if it does not.

    ``volcano.sh/gpu-number`` cards (indices 0…n-1), each with an equal part of
    ``volcano.sh/gpu-memory`` MiB (0 under the plugin's number strategy), those
    named in the annotation ``volcano.sh/gpu-unhealthy-ids`` unhealthy; no
    NUMA zones, no links.  Volcano counts a node's cards this way, so its
    ``gpu-memory``/``gpu-number`` pods are placed here the same way.
    """
    alloc = node.allocatable
    number = alloc.get(GPU_NUMBER, 0)
    if number <= 0 or GPU_MEMORY not in alloc:
        return None
    if number > MAX_ADVERTISED_GPUS:
        log.warning("node %s: ignoring %s=%d: more GPUs than a node has", node.name, GPU_NUMBER, number)
        return None
    per_card = alloc[GPU_MEMORY] // number
    unhealthy: set[int] = set()
    for part in (node.annotations.get(GPU_UNHEALTHY_ANNOTATION) or "").split(","):
        if part.strip().isdigit():
            unhealthy.add(int(part))
        elif part.strip():
            log.warning("node %s: %s: ignoring %r, not a GPU index", node.name, GPU_UNHEALTHY_ANNOTATION, part)
    devices = tuple(Device(GPU, f"{GPU_NUMBER}/{i}", i, per_card, -1, i not in unhealthy) for i in range(number))
    return Inventory(zone_ids=(), zone_cpu=(), zone_memory=(), distances=(), policy="", devices=devices,
                     gpu_costs={}, advertised=True)


def _level(value: int) -> int:
    value = int(value)
    return value if 0 <= value < len(LEVEL_COSTS) else 0


class InventoryMemo:
    """Inventories per node, rebuilt when a node's ``inventory_key`` changes; shared by every cycle."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_node: dict[str, tuple[object, Inventory]] = {}
        self.version = 0  # bumped whenever any inventory changes
        self._static: tuple[tuple, StaticTopology] | None = None

    def note(self, name: str, telemetry: Any) -> None:
        """A report arrived: rebuild the node's inventory if its hardware changed (cheap when it did not)."""
        entry = self._by_node.get(name)
        if entry is not None and entry[0] == telemetry.inventory_key:
            return
        inv = build_inventory(telemetry.capacity, telemetry.devices)
        with self._lock:
            self._by_node[name] = (telemetry.inventory_key, inv)
            self.version += 1

    def static(self, nodes: list, node_generation: int) -> StaticTopology:
        """Arrays for ``nodes`` (in node-table order), rebuilt only when a node or an inventory changed."""
        key = (self.version, node_generation, len(nodes))
        cached = self._static
        if cached is not None and cached[0] == key:
            return cached[1]
        by_node = self._by_node
        static = StaticTopology([by_node[n.name][1] if n.name in by_node else advertised_inventory(n) for n in nodes],
                                [label_policy(n) for n in nodes])
        self._static = (key, static)
        return static


def label_policy(node: Any) -> str | None:
    """The node label ``volcano.sh/numa-topology-policy``: an operator's word on the kubelet's policy."""
    value = node.labels.get(NUMA_POLICY_ANNOTATION)
    if value is None:
        return None
    if value not in NUMA_POLICIES:
        log.warning("node %s: ignoring label %s=%r: not one of %s", node.name, NUMA_POLICY_ANNOTATION, value,
                    ", ".join(NUMA_POLICIES))
        return None
    return value


class StaticTopology:
    """All nodes' zones and devices as arrays (read-only; sessions copy what they change).

    Zones: ``(nodes, Z)`` arrays, ``Z`` the most zones any node has, padded
    with zero-capacity zones that do not exist.  Devices: flat arrays over every
    device of the cluster, grouped by node (``dev_start``/``dev_count``).
    ``known``: the node reported its hardware; ``counted``: its GPUs are counted
    here, reported or advertised (only Volcano's GPU-share requests use the latter).
    """

    def __init__(self, inventories: list[Inventory | None], labelled: list[str | None] | None = None):
        n = len(inventories)
        self.inventories = inventories
        z = max((len(inv.zone_ids) for inv in inventories if inv is not None), default=1) or 1
        self.zones = z
        self.known = np.array([inv is not None and not inv.advertised for inv in inventories], dtype=bool)
        self.counted = np.array([inv is not None for inv in inventories], dtype=bool)
        self.has_zones = np.zeros(n, dtype=bool)
        self.zone_exists = np.zeros((n, z), dtype=bool)
        self.zone_cpu = np.zeros((n, z))
        self.zone_memory = np.zeros((n, z))
        self.policy = np.zeros(n, dtype=np.int8)
        for i, policy in enumerate(labelled or ()):
            if policy is not None:
                self.policy[i] = POLICY_CODES[policy]  # a label wins over the report
        resources: list[str] = []
        dev_rows: list[tuple] = []
        self.dev_start = np.zeros(n, dtype=np.intp)
        self.dev_count = np.zeros(n, dtype=np.intp)
        for i, inv in enumerate(inventories):
            if inv is None:
                continue
            k = len(inv.zone_ids)
            if k:
                self.has_zones[i] = True
                self.zone_exists[i, :k] = True
                self.zone_cpu[i, :k] = inv.zone_cpu
                self.zone_memory[i, :k] = inv.zone_memory
            if labelled is None or labelled[i] is None:
                self.policy[i] = POLICY_CODES.get(inv.policy, 0)
            self.dev_start[i] = len(dev_rows)
            self.dev_count[i] = len(inv.devices)
            zone_pos = {zid: p for p, zid in enumerate(inv.zone_ids)}
            for d in inv.devices:
                if d.resource not in resources:
                    resources.append(d.resource)
                dev_rows.append((i, resources.index(d.resource), zone_pos.get(d.zone, -1), d.healthy, d.memory_mib))
        self.resources = resources  # device kind code -> resource name
        rows = np.array(dev_rows, dtype=np.int64).reshape(-1, 5)
        self.dev_node = rows[:, 0].astype(np.intp)
        self.dev_kind = rows[:, 1].astype(np.int16)
        self.dev_zone = rows[:, 2].astype(np.intp)  # position of the device's zone in the node's zones, -1 none
        self.dev_healthy = rows[:, 3].astype(bool)
        self.dev_memory = rows[:, 4].astype(np.float64)

    def device(self, d: int) -> Device:
        node = int(self.dev_node[d])
        inv = self.inventories[node]
        assert inv is not None  # only a node with an inventory has device rows
        return inv.devices[d - int(self.dev_start[node])]

    def zone_id(self, node: int, pos: int) -> int:
        inv = self.inventories[node]
        assert inv is not None  # only a node with an inventory has zones
        return inv.zone_ids[pos]
