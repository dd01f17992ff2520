"""Conversion between the generated protobuf classes and :mod:`proto.model`.

With :mod:`scheduler.intake.server` and :mod:`agent.client` this is the wire
boundary: the only modules that import ``*_pb2``.  Conversions are written
out field by field (no reflection) because the scheduler decodes thousands
of reports a second.  The JSON form is protobuf's canonical JSON mapping
(camelCase names, 64-bit integers as strings).
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format

from proto.errors import InputError
from proto.model import (
    Ack,
    Capacity,
    Colocation,
    ContainerRuntime,
    ContainerTermination,
    ContainerUsage,
    CpuTopology,
    DeviceProcess,
    Devices,
    Directive,
    Eviction,
    Gpu,
    GpuLink,
    GpuTopologyLevel,
    Identity,
    Load,
    LogicalCpu,
    MigMode,
    NodeReport,
    Npu,
    NumaZone,
    PodAction,
    PodActionKind,
    PodRuntime,
    PodUsage,
    Pressure,
    QosLevel,
    QosProfile,
    ReportDelta,
)
from proto.scoria.v1 import agent_pb2 as pb

__all__ = ["pb", "report_to_pb", "report_from_pb", "directive_to_pb", "directive_from_pb",
           "report_to_json", "report_from_json", "JSON_API_VERSION"]

JSON_API_VERSION = "scoria.io/v1"


# -- report: model -> pb ----------------------------------------------------------------------
def _pressure_to(p: Pressure, out: Any) -> None:
    out.some_avg10, out.some_avg60, out.full_avg10, out.full_avg60 = p.some_avg10, p.some_avg60, p.full_avg10, p.full_avg60
    out.some_total_us, out.full_total_us = p.some_total_us, p.full_total_us


def _processes_to(procs: list[DeviceProcess], out: Any) -> None:
    for p in procs:
        out.add(pid=p.pid, memory_bytes=p.memory_bytes, pod_uid=p.pod_uid, container=p.container)


def report_to_pb(r: NodeReport, delta: ReportDelta | None = None) -> Any:
    """``r`` on the wire: whole, or with ``delta`` (a base_sequence) leaving out the sections it marks the same;
    ``ReportDelta(0)``: whole, marked as coming from an agent that sends deltas."""
    msg = pb.NodeReport()
    i = r.identity
    mi = msg.identity
    mi.node_name, mi.agent_version, mi.boot_id = i.node_name, i.agent_version, i.boot_id
    mi.sequence, mi.sample_time_ns, mi.report_interval_ms = i.sequence, i.sample_time_ns, i.report_interval_ms
    mi.runs_pods = i.runs_pods
    if delta is not None and delta.base_sequence:
        md = msg.delta
        md.base_sequence, md.same_capacity, md.same_devices = (delta.base_sequence, delta.same_capacity,
                                                               delta.same_devices)
        md.same_pods, md.same_runtime = delta.same_pods, delta.same_runtime
    else:
        if delta is not None:  # ReportDelta(0): whole, from an agent that sends deltas
            msg.delta.SetInParent()
        delta = None
    if delta is None or not delta.same_capacity:
        _capacity_to(r.capacity, msg.capacity)
    if delta is None or not delta.same_devices:
        _devices_to(r.devices, msg.devices)
    _load_to(r.load, msg.load, pods=delta is None or not delta.same_pods)
    co, mco = r.colocation, msg.colocation
    mco.batch_cpu_millis, mco.batch_memory_bytes = co.batch_cpu_millis, co.batch_memory_bytes
    if co.offline_cpu_quota_millis is not None:
        mco.offline_cpu_quota_millis = co.offline_cpu_quota_millis
    for e in co.evictions:
        mco.evictions.add(pod_uid=e.pod_uid, namespace=e.namespace, name=e.name, reason=e.reason, time_ns=e.time_ns)
    mco.qos_profile, mco.evicting = co.qos_profile, co.evicting
    if delta is None or not delta.same_runtime:
        for pr in r.runtime:
            mp = msg.runtime.add(uid=pr.uid, namespace=pr.namespace, name=pr.name, phase=pr.phase, reason=pr.reason,
                                 message=pr.message, restarts=pr.restarts, started_ns=pr.started_ns,
                                 log_dir=pr.log_dir)
            for cr in pr.containers:
                mcr = mp.containers.add(name=cr.name, state=cr.state, exit_code=cr.exit_code, restarts=cr.restarts,
                                        pid=cr.pid, reason=cr.reason, message=cr.message, started_ns=cr.started_ns,
                                        finished_ns=cr.finished_ns)
                if (last := cr.last_termination) is not None:
                    mcr.last_termination.SetInParent()
                    mcr.last_termination.exit_code, mcr.last_termination.reason = last.exit_code, last.reason
                    mcr.last_termination.message, mcr.last_termination.started_ns = last.message, last.started_ns
                    mcr.last_termination.finished_ns = last.finished_ns
    return msg


def _capacity_to(c: Capacity, mc: Any) -> None:
    mc.cpu_millis, mc.memory_bytes, mc.topology_policy = c.cpu_millis, c.memory_bytes, c.topology_policy
    for z in c.numa_zones:
        mc.numa_zones.add(id=z.id, cpus=z.cpus, memory_bytes=z.memory_bytes, distances=z.distances)
    t, mt = c.cpu_topology, mc.cpu_topology
    mt.sockets, mt.cores, mt.threads_per_core = t.sockets, t.cores, t.threads_per_core
    for cpu in t.cpus:
        mt.cpus.add(id=cpu.id, socket=cpu.socket, core=cpu.core, numa_zone=cpu.numa_zone)


def _devices_to(d: Devices, md: Any) -> None:
    for g in d.gpus:
        mg = md.gpus.add(
            index=g.index, uuid=g.uuid, model=g.model, memory_total_bytes=g.memory_total_bytes,
            memory_used_bytes=g.memory_used_bytes, gpu_utilization_percent=g.gpu_utilization_percent,
            memory_utilization_percent=g.memory_utilization_percent, numa_node=g.numa_node, healthy=g.healthy,
            health_detail=g.health_detail, mig_mode=int(g.mig_mode))
        _processes_to(g.processes, mg.processes)
        for link in g.links:
            mg.links.add(peer_index=link.peer_index, nvlinks=link.nvlinks, level=int(link.level))
    for n in d.npus:
        mn = md.npus.add(
            id=n.id, chip=n.chip, model=n.model, hbm_total_bytes=n.hbm_total_bytes, hbm_used_bytes=n.hbm_used_bytes,
            aicore_utilization_percent=n.aicore_utilization_percent, healthy=n.healthy, health_detail=n.health_detail,
            numa_node=n.numa_node)
        _processes_to(n.processes, mn.processes)


def _load_to(lo: Load, ml: Any, *, pods: bool) -> None:
    ml.cpu_used_cores, ml.memory_used_bytes = lo.cpu_used_cores, lo.memory_used_bytes
    _pressure_to(lo.cpu_pressure, ml.cpu_pressure)
    _pressure_to(lo.memory_pressure, ml.memory_pressure)
    _pressure_to(lo.io_pressure, ml.io_pressure)
    if not pods:
        return
    for p in lo.pods:
        ml.pods.add(uid=p.uid, namespace=p.namespace, name=p.name, qos=int(p.qos), cpu_used_cores=p.cpu_used_cores,
                    memory_used_bytes=p.memory_used_bytes)
        if p.containers or p.cpu_pressure is not None or p.memory_pressure is not None:
            md = ml.pod_details.add(uid=p.uid)
            for cu in p.containers:
                md.containers.add(name=cu.name, cpu_used_cores=cu.cpu_used_cores, memory_used_bytes=cu.memory_used_bytes)
            if p.cpu_pressure is not None:
                _pressure_to(p.cpu_pressure, md.cpu_pressure)
            if p.memory_pressure is not None:
                _pressure_to(p.memory_pressure, md.memory_pressure)


# -- report: pb -> model ----------------------------------------------------------------------
def _pressure_from(m: Any) -> Pressure:
    return Pressure(m.some_avg10, m.some_avg60, m.full_avg10, m.full_avg60, m.some_total_us, m.full_total_us)


def _processes_from(procs: Any) -> list[DeviceProcess]:
    return [DeviceProcess(p.pid, p.memory_bytes, p.pod_uid, p.container) for p in procs]


_MIG = tuple(MigMode)
_LEVEL = tuple(GpuTopologyLevel)
_QOS = tuple(QosLevel)


def _mig(value: int) -> MigMode:
    # a newer agent's value is not a reason to drop the report
    return _MIG[value] if 0 <= value < len(_MIG) else MigMode.UNSUPPORTED


def _level(value: int) -> GpuTopologyLevel:
    return _LEVEL[value] if 0 <= value < len(_LEVEL) else GpuTopologyLevel.UNKNOWN


def capacity_from_pb(c: Any) -> Capacity:
    t = c.cpu_topology
    return Capacity(
        c.cpu_millis, c.memory_bytes,
        [NumaZone(z.id, list(z.cpus), z.memory_bytes, list(z.distances)) for z in c.numa_zones],
        CpuTopology(t.sockets, t.cores, t.threads_per_core,
                    [LogicalCpu(x.id, x.socket, x.core, x.numa_zone) for x in t.cpus]),
        c.topology_policy)


def devices_from_pb(d: Any) -> Devices:
    return Devices(
        [Gpu(g.index, g.uuid, g.model, g.memory_total_bytes, g.memory_used_bytes, g.gpu_utilization_percent,
             g.memory_utilization_percent, g.numa_node, g.healthy, g.health_detail, _mig(g.mig_mode),
             _processes_from(g.processes), [GpuLink(k.peer_index, k.nvlinks, _level(k.level)) for k in g.links])
         for g in d.gpus],
        [Npu(n.id, n.chip, n.model, n.hbm_total_bytes, n.hbm_used_bytes, n.aicore_utilization_percent, n.healthy,
             n.health_detail, n.numa_node, _processes_from(n.processes)) for n in d.npus])


def report_from_pb(msg: Any, capacity: Capacity | None = None) -> NodeReport:
    """Decode a report; ``capacity`` replaces decoding the capacity when the caller knows it is unchanged."""
    i = msg.identity
    lo = msg.load
    co = msg.colocation
    return NodeReport(
        identity=Identity(i.node_name, i.agent_version, i.boot_id, i.sequence, i.sample_time_ns, i.report_interval_ms,
                          i.runs_pods),
        capacity=capacity if capacity is not None else capacity_from_pb(msg.capacity),
        devices=devices_from_pb(msg.devices),
        load=Load(lo.cpu_used_cores, lo.memory_used_bytes, _pressure_from(lo.cpu_pressure),
                  _pressure_from(lo.memory_pressure), _pressure_from(lo.io_pressure),
                  _pods_from(lo.pods, lo.pod_details)),
        colocation=Colocation(
            co.batch_cpu_millis, co.batch_memory_bytes,
            co.offline_cpu_quota_millis if co.HasField("offline_cpu_quota_millis") else None,
            [Eviction(e.pod_uid, e.namespace, e.name, e.reason, e.time_ns) for e in co.evictions],
            co.qos_profile, co.evicting),
        runtime=runtime_from_pb(msg.runtime),
    )


def runtime_from_pb(pods: Any) -> list[PodRuntime]:
    return [PodRuntime(p.uid, p.namespace, p.name, p.phase, p.reason, p.message, p.restarts, p.started_ns, p.log_dir,
                       [_container_from(c) for c in p.containers])
            for p in pods]


def _container_from(c: Any) -> ContainerRuntime:
    last = c.last_termination if c.HasField("last_termination") else None
    return ContainerRuntime(c.name, c.state, c.exit_code, c.restarts, c.pid, c.reason, c.message, c.started_ns,
                            c.finished_ns, None if last is None else ContainerTermination(
                                last.exit_code, last.reason, last.message, last.started_ns, last.finished_ns))


def _pods_from(pods: Any, details: Any) -> list[PodUsage]:
    qos, unspecified, n = _QOS, QosLevel.UNSPECIFIED, len(_QOS)  # inlined: this loop is the hot spot
    out = [PodUsage(p.uid, p.namespace, p.name, qos[q] if 0 <= (q := p.qos) < n else unspecified,
                    p.cpu_used_cores, p.memory_used_bytes) for p in pods]
    if details:  # joined back by uid; a detail for a pod not listed has nothing to attach to
        by_uid = {u.uid: u for u in out}
        for d in details:
            usage = by_uid.get(d.uid)
            if usage is None:
                continue
            usage.containers = [ContainerUsage(c.name, c.cpu_used_cores, c.memory_used_bytes) for c in d.containers]
            if d.HasField("cpu_pressure"):
                usage.cpu_pressure = _pressure_from(d.cpu_pressure)
            if d.HasField("memory_pressure"):
                usage.memory_pressure = _pressure_from(d.memory_pressure)
    return out


class ReportDecoder:
    """Decodes one stream's reports, reusing the last Capacity while its bytes stay the same.

    A node's capacity (CPU lists, topology) is the bulk of a report and almost
    never changes.  :meth:`capacity_key` gives the bytes callers compare to
    notice a change; :meth:`decode` builds the whole report (lazily, if the
    caller keeps the message and calls it later).
    """

    def __init__(self) -> None:
        self._capacity_bytes: bytes | None = None
        self._capacity: Capacity | None = None

    @staticmethod
    def capacity_key(msg: Any) -> bytes:
        return msg.capacity.SerializeToString()

    def decode(self, msg: Any, capacity_key: bytes | None = None) -> NodeReport:
        raw = capacity_key if capacity_key is not None else self.capacity_key(msg)
        if raw != self._capacity_bytes:
            self._capacity_bytes, self._capacity = raw, capacity_from_pb(msg.capacity)
        return report_from_pb(msg, self._capacity)


# -- directives -----------------------------------------------------------------------------
def directive_to_pb(d: Directive) -> Any:
    msg = pb.Directive()
    if d.ack is not None:
        msg.ack.sequence, msg.ack.code, msg.ack.message = d.ack.sequence, d.ack.code, d.ack.message
        if d.ack.deltas:
            msg.ack.deltas = True
    if d.qos_profile is not None:
        p = d.qos_profile
        msg.qos_profile.name, msg.qos_profile.digest, msg.qos_profile.yaml = p.name, p.digest, p.yaml
    for a in d.pod_actions:
        msg.pod_actions.add(kind=int(a.kind), pod_uid=a.pod_uid, namespace=a.namespace, name=a.name, reason=a.reason,
                            pod_json=a.pod_json, grace_period_seconds=a.grace_period_seconds)
    return msg


def directive_from_pb(msg: Any) -> Directive:
    ack = Ack(msg.ack.sequence, msg.ack.code, msg.ack.message, msg.ack.deltas) if msg.HasField("ack") else None
    profile = (QosProfile(msg.qos_profile.name, msg.qos_profile.digest, msg.qos_profile.yaml)
               if msg.HasField("qos_profile") else None)
    actions = []
    for a in msg.pod_actions:
        try:
            kind = PodActionKind(a.kind)
        except ValueError:
            kind = PodActionKind.UNSPECIFIED
        actions.append(PodAction(kind, a.pod_uid, a.namespace, a.name, a.reason, a.pod_json, a.grace_period_seconds))
    return Directive(ack, profile, actions)


# -- JSON form ---------------------------------------------------------------------------------
def report_to_json(r: NodeReport) -> dict:
    """``{"apiVersion": "scoria.io/v1", "kind": "NodeReport", ...report fields in camelCase}``."""
    body = json_format.MessageToDict(report_to_pb(r), always_print_fields_with_no_presence=True)
    return {"apiVersion": JSON_API_VERSION, "kind": "NodeReport", **body}


def report_from_json(doc: dict) -> NodeReport:
    """Parse the JSON form (``apiVersion``/``kind`` optional); ValueError names the bad field."""
    body = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind")}
    try:
        msg = json_format.ParseDict(body, pb.NodeReport())
    except json_format.ParseError as exc:
        raise InputError(str(exc)) from None
    if msg.delta.base_sequence:
        raise InputError("delta: a delta report exists only on an agent's stream (it needs the report it is "
                         "based on); give the whole report")
    return report_from_pb(msg)
