"""Node reports as the scheduler keeps them: freshness, and what scheduling reads.

A report reaches this view only after the intake has checked it whole
(:func:`scheduler.api.nodereport.check_report`).  An accepted report
replaces the node's :class:`NodeTelemetry`; a node whose reports stop
becomes *stale* after a number of its own report intervals, and stale data
reads as unknown (NaN in the snapshot), never as an idle node.  A node that
registers itself by reporting offers what :func:`node_allocatable` reads off
its report.

A :class:`NodeTelemetry` may hold the received protobuf message as it is
(read through the field names :mod:`proto.model` shares with it) and build
the dataclasses only when something asks for the whole report — the
scheduling snapshot needs only the handful of figures it copies out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

from proto.model import Capacity, Devices, NodeReport, PodUsage, QosLevel
from proto.vocab.placement import GPU, npu_resource
from proto.vocab.qos import BATCH_CPU, BATCH_MEMORY
from scheduler.api.objects import DEFAULT_MAX_PODS

DEFAULT_INTERVAL_S = 1.0


class NodeTelemetry:
    """A node's last accepted report: the figures scheduling reads, and the whole report on demand."""

    __slots__ = ("node", "received", "sample_time_ns", "interval", "cpu_used_cores", "memory_used_bytes",
                 "batch_cpu_millis", "batch_memory_bytes", "evicting", "_report", "_decode", "inventory_key",
                 "capacity", "devices", "_pods", "_online", "runs_pods")

    node: str
    received: float
    sample_time_ns: int
    interval: float
    cpu_used_cores: float
    memory_used_bytes: int
    batch_cpu_millis: int
    batch_memory_bytes: int
    evicting: bool
    _report: NodeReport | None
    _decode: Callable[[], NodeReport] | None
    inventory_key: tuple[object, int]
    capacity: Capacity  # the model's, or the received message's with the same field names
    devices: Devices
    _pods: Sequence[PodUsage]
    _online: OnlineLoad | None
    runs_pods: bool  # the agent runs the pods bound to its node (embedded mode's local runtime)

    def __init__(self, view: NodeReport, received: float, decode: Callable[[], NodeReport] | None = None,
                 capacity_key: object = None):
        """``view`` is a NodeReport or anything with its field names; ``decode`` builds the NodeReport.

        ``capacity_key`` changes when the capacity does; with the devices' identity
        and health it keys what placement derives from the node's hardware
        (:attr:`inventory_key`), which is rebuilt only when that changes.
        """
        ident, load, co = view.identity, view.load, view.colocation
        self.node = ident.node_name
        self.received = received  # scheduler clock, Unix seconds
        self.sample_time_ns = ident.sample_time_ns
        ms = ident.report_interval_ms
        self.interval = ms / 1000.0 if ms else DEFAULT_INTERVAL_S
        self.cpu_used_cores = load.cpu_used_cores
        self.memory_used_bytes = load.memory_used_bytes
        self.batch_cpu_millis = co.batch_cpu_millis
        self.batch_memory_bytes = co.batch_memory_bytes
        self.evicting = co.evicting
        self.runs_pods = bool(ident.runs_pods)
        self._report = view if decode is None else None
        self._decode = decode
        devices = view.devices
        self.capacity, self.devices = view.capacity, devices  # as received (message or model): read lazily
        self._pods, self._online = load.pods, None  # online(): computed on first use
        # hashed, not kept: tens of thousands of live tuples would only feed the cycle collector
        hardware = hash((tuple((g.index, g.uuid, g.memory_total_bytes, g.numa_node, g.healthy,
                                tuple((k.peer_index, k.nvlinks, int(k.level)) for k in g.links))
                               for g in devices.gpus),
                         tuple((n.id, n.chip, n.model, n.hbm_total_bytes, n.numa_node, n.healthy)
                               for n in devices.npus))) if (devices.gpus or devices.npus) else 0
        self.inventory_key = (capacity_key if capacity_key is not None else id(view.capacity), hardware)

    @property
    def report(self) -> NodeReport:
        if self._report is None:
            assert self._decode is not None  # built with a report, or with what decodes one
            self._report = self._decode()
            self._decode = None
        return self._report

    def stale(self, now: float, missed_intervals: int) -> bool:
        """No report for ``missed_intervals`` of the node's own report interval."""
        return now - self.received > missed_intervals * self.interval

    def online(self) -> OnlineLoad:
        """What online (non-BE) work uses — the node's usage less its offline pods' — with the capacity.

        Walks the report's pods, so it is computed on first use (the load
        history samples a node once a minute, the forecast plugin only when a
        pending pod needs it) and kept with this report.
        """
        if self._online is None:
            cpu, memory, be = self.cpu_used_cores, self.memory_used_bytes, QosLevel.BE
            for p in self._pods:
                if p.qos == be:
                    cpu -= p.cpu_used_cores
                    memory -= p.memory_used_bytes
            c = self.capacity
            self._online = OnlineLoad(max(cpu, 0.0) * 1000, max(memory, 0), c.cpu_millis, c.memory_bytes)
        return self._online


class OnlineLoad(NamedTuple):
    """A node's online usage and capacity, in the scheduler's units (millicores, bytes)."""

    cpu_millis: float
    memory_bytes: int
    capacity_cpu_millis: int
    capacity_memory_bytes: int

    def percent(self) -> tuple[float, float]:
        """Online CPU and memory as percentages of the capacity (NaN where the capacity is unknown)."""
        cpu, memory = self.capacity_cpu_millis, self.capacity_memory_bytes
        return (100.0 * self.cpu_millis / cpu if cpu > 0 else math.nan,
                100.0 * self.memory_bytes / memory if memory > 0 else math.nan)


def node_allocatable(r: NodeReport) -> dict[str, int]:
    """What a node that registered itself by reporting offers: CPU, memory, pods, healthy devices, and the batch
    resources its agent offers offline pods (what the agent publishes on a Kubernetes Node)."""
    out = {"cpu": r.capacity.cpu_millis, "memory": r.capacity.memory_bytes, "pods": DEFAULT_MAX_PODS}
    for name, amount in ((BATCH_CPU, r.colocation.batch_cpu_millis), (BATCH_MEMORY, r.colocation.batch_memory_bytes)):
        if amount > 0:
            out[name] = amount
    healthy_gpus = sum(1 for g in r.devices.gpus if g.healthy)
    if healthy_gpus:
        out[GPU] = healthy_gpus
    for npu in r.devices.npus:
        if npu.healthy:
            name = npu_resource(npu.model)
            out[name] = out.get(name, 0) + 1
    return out

