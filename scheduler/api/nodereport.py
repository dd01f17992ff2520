"""The NodeReport as the scheduler accepts it: every report is checked whole before anything of it is kept.

:func:`check_report` returns the first problem, with the field's path, or None.
Reports enter in two places, which both check them here, at the edge: an
agent's stream (:mod:`scheduler.intake.reports` answers a refused report
with an ``INVALID_ARGUMENT`` ack) and the simulator's ``NodeReport``
documents (refused as a manifest error).  A refused report changes nothing;
an accepted one becomes the node's :class:`scheduler.cluster.nodeview.NodeTelemetry`.

The checks read a report only through the field names that
:mod:`proto.model` shares with the generated protobuf classes, so the
server validates a received message as it is and builds the dataclasses
only when something asks for the whole report — at thousands of reports a
second that halves the work.  The checks are annotated with the model
classes (:class:`~proto.model.NodeReport`, :class:`~proto.model.Load`, …)
whose field names they read.

A problem names the field and shows the offending value shortened (:func:`shown`), and the whole
message is at most :data:`MAX_MESSAGE` characters: the refusal goes back to the sender on its own
stream, and a report built to make the answer large (a 3 MiB list, a 10 MB name) must not make it so.
A sample time more than ``max_clock_skew_s`` (30 s) ahead of the scheduler's clock is refused: kept,
it would make every genuine report look older than it until that time came.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence, Sized
from dataclasses import dataclass

from proto.model import DeviceProcess, Load, NodeReport, Pressure
from proto.vocab.placement import NUMA_POLICIES

# The kubelet's topology manager policies ("" where the agent does not know the node's).
TOPOLOGY_POLICIES = ("",) + NUMA_POLICIES
_NODE_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


@dataclass(frozen=True)
class ReportLimits:
    """Sizes beyond which a report is not a real node but a bug or an attack."""

    max_cpus: int = 8192
    max_numa_zones: int = 256
    max_gpus: int = 64
    max_npus: int = 64
    max_pods: int = 2000
    max_containers: int = 64      # per pod
    max_evictions: int = 1000
    max_processes: int = 4096
    max_clock_skew_s: float = 30.0  # how far ahead of the scheduler's clock a sample may be dated
    min_interval_ms: int = 50
    max_interval_ms: int = 3_600_000


#: the longest problem message check_report returns (the field and a shortened value)
MAX_MESSAGE = 300
_SHOWN_CHARS = 60
_SHOWN_ITEMS = 8


class _Problem(Exception):
    pass


def shown(value: object) -> str:
    """``repr(value)``, shortened to about 60 characters (a list: its first items and how many there are).

    Cheap on a huge value too: only the part shown is ever turned into text.
    """
    if isinstance(value, str | bytes):
        return repr(value[:_SHOWN_CHARS]) + (f"… ({len(value)} characters)" if len(value) > _SHOWN_CHARS else "")
    if isinstance(value, Sequence):
        text = ", ".join(shown(value[k]) for k in range(min(len(value), _SHOWN_ITEMS)))
        text = text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "…"
        return f"[{text}]" if len(value) <= _SHOWN_ITEMS else f"[{text}, … ({len(value)} items)]"
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "…"


def bounded(message: str, limit: int = MAX_MESSAGE) -> str:
    """``message`` cut to ``limit`` characters (a last guard; the checks already shorten values)."""
    return message if len(message) <= limit else message[:limit - 1] + "…"


def _finite(path: str, value: float, *, upper: float | None = None) -> None:
    if not math.isfinite(value) or value < 0 or (upper is not None and value > upper):
        bound = f" and at most {upper:g}" if upper is not None else ""
        raise _Problem(f"{path}: must be a finite number >= 0{bound}, got {value!r}")


def _natural(path: str, value: int) -> None:
    if value < 0:
        raise _Problem(f"{path}: must not be negative, got {value}")


def _at_most(path: str, items: Sized, limit: int, what: str) -> None:
    if len(items) > limit:
        raise _Problem(f"{path}: {len(items)} {what}, more than any real node has (limit {limit})")


def check_report(r: NodeReport, *, now_ns: int, limits: ReportLimits = ReportLimits(),
                 capacity_checked: bool = False, devices_checked: bool = False, pods_checked: bool = False,
                 runtime_checked: bool = False) -> str | None:
    """The first thing wrong with ``r`` (``path: problem``), or None when it can be kept.

    ``r`` may be a NodeReport, a received message or a merged delta (same field names).
    ``*_checked``: that section passed before as it is (a delta's sections taken from its base; the devices
    only together with the capacity whose NUMA zones they name), skip its checks.
    """
    try:
        _identity(r, now_ns, limits)
        if not capacity_checked:
            _capacity(r, limits)
        if not devices_checked:
            _devices(r, len(r.capacity.numa_zones), limits)
        _load(r, limits, pods_checked)
        _colocation(r, limits)
        if not runtime_checked:
            _runtime(r, limits)
    except _Problem as exc:
        return bounded(str(exc))
    return None


def _identity(r: NodeReport, now_ns: int, limits: ReportLimits) -> None:
    i = r.identity
    if not _NODE_NAME.fullmatch(i.node_name or ""):
        raise _Problem(f"identity.node_name: {shown(i.node_name)} is not a valid node name")
    if i.sample_time_ns <= 0:
        raise _Problem(f"identity.sample_time_ns: must be a positive Unix time in ns, got {i.sample_time_ns}")
    if i.sample_time_ns > now_ns + limits.max_clock_skew_s * 1e9:
        ahead = (i.sample_time_ns - now_ns) / 1e9
        raise _Problem(f"identity.sample_time_ns: {ahead:.0f}s in the future (clock skew over "
                       f"{limits.max_clock_skew_s:g}s)")
    ms = i.report_interval_ms
    if ms and not limits.min_interval_ms <= ms <= limits.max_interval_ms:
        raise _Problem(f"identity.report_interval_ms: must be {limits.min_interval_ms}-{limits.max_interval_ms}, got {ms}")


def _capacity(r: NodeReport, limits: ReportLimits) -> None:
    c = r.capacity
    if c.cpu_millis <= 0 or c.memory_bytes <= 0:
        raise _Problem(f"capacity: a node needs CPUs and memory, got cpu_millis={c.cpu_millis} "
                       f"memory_bytes={c.memory_bytes}")
    logical = c.cpu_topology.cpus
    cpus = len(logical) or math.ceil(c.cpu_millis / 1000)
    if cpus > limits.max_cpus:
        raise _Problem(f"capacity: {cpus} CPUs, more than any real node has (limit {limits.max_cpus})")
    zones = c.numa_zones
    _at_most("capacity.numa_zones", zones, limits.max_numa_zones, "zones")
    if len(zones) > cpus:
        raise _Problem(f"capacity.numa_zones: {len(zones)} zones but only {cpus} CPUs")
    seen_zone: set[int] = set()
    seen_cpu: set[int] = set()
    for k, z in enumerate(zones):
        path = f"capacity.numa_zones[{k}]"
        if z.id < 0 or z.id in seen_zone:
            raise _Problem(f"{path}.id: {z.id} is negative or repeated")
        seen_zone.add(z.id)
        _natural(f"{path}.memory_bytes", z.memory_bytes)
        for cpu in z.cpus:
            if not 0 <= cpu < cpus or cpu in seen_cpu:
                raise _Problem(f"{path}.cpus: CPU {cpu} is out of range 0-{cpus - 1} or in two zones")
            seen_cpu.add(cpu)
        if z.distances and (len(z.distances) != len(zones) or min(z.distances) < 0):
            raise _Problem(f"{path}.distances: need {len(zones)} non-negative distances, got {shown(z.distances)}")
    ids: set[int] = set()
    for k, lc in enumerate(logical):
        path = f"capacity.cpu_topology.cpus[{k}]"
        if lc.id < 0 or lc.id in ids or min(lc.socket, lc.core, lc.numa_zone) < 0:
            raise _Problem(f"{path}: ids must be unique and nothing negative, got id {lc.id} socket {lc.socket} "
                           f"core {lc.core} numa_zone {lc.numa_zone}")
        if zones and lc.numa_zone not in seen_zone:
            raise _Problem(f"{path}.numa_zone: zone {lc.numa_zone} is not reported")
        ids.add(lc.id)
    t = c.cpu_topology
    for name in ("sockets", "cores", "threads_per_core"):
        _natural(f"capacity.cpu_topology.{name}", getattr(t, name))
    if c.topology_policy not in TOPOLOGY_POLICIES:
        raise _Problem(f"capacity.topology_policy: must be empty or one of {', '.join(TOPOLOGY_POLICIES[1:])}, "
                       f"got {shown(c.topology_policy)}")


def _processes(path: str, procs: Sequence[DeviceProcess], limits: ReportLimits) -> None:
    _at_most(path, procs, limits.max_processes, "processes")
    for k, p in enumerate(procs):
        _natural(f"{path}[{k}].memory_bytes", p.memory_bytes)


def _devices(r: NodeReport, zones: int, limits: ReportLimits) -> None:
    gpus, npus = r.devices.gpus, r.devices.npus
    _at_most("devices.gpus", gpus, limits.max_gpus, "GPUs")
    _at_most("devices.npus", npus, limits.max_npus, "NPUs")
    indices, uuids = set(), set()
    for k, g in enumerate(gpus):
        path = f"devices.gpus[{k}]"
        if g.index < 0 or g.index in indices or not g.uuid or g.uuid in uuids:
            raise _Problem(f"{path}: index and uuid must be set and unique, got index {g.index} uuid {shown(g.uuid)}")
        indices.add(g.index)
        uuids.add(g.uuid)
        _natural(f"{path}.memory_total_bytes", g.memory_total_bytes)
        _natural(f"{path}.memory_used_bytes", g.memory_used_bytes)
        if g.memory_used_bytes > g.memory_total_bytes:
            raise _Problem(f"{path}.memory_used_bytes: {g.memory_used_bytes} is more than the "
                           f"{g.memory_total_bytes} the GPU has")
        _finite(f"{path}.gpu_utilization_percent", g.gpu_utilization_percent, upper=100)
        _finite(f"{path}.memory_utilization_percent", g.memory_utilization_percent, upper=100)
        _numa(f"{path}.numa_node", g.numa_node, zones)
        _processes(f"{path}.processes", g.processes, limits)
    for k, g in enumerate(gpus):
        peers = set()
        for j, link in enumerate(g.links):
            if link.peer_index not in indices or link.peer_index == g.index or link.peer_index in peers:
                raise _Problem(f"devices.gpus[{k}].links[{j}].peer_index: {link.peer_index} is not another GPU "
                               f"of this node, or is listed twice")
            peers.add(link.peer_index)
            _natural(f"devices.gpus[{k}].links[{j}].nvlinks", link.nvlinks)
    ids = set()
    for k, n in enumerate(npus):
        path = f"devices.npus[{k}]"
        if n.id < 0 or (n.id, n.chip) in ids or n.chip < 0:
            raise _Problem(f"{path}: id and chip must be non-negative and unique, got {n.id}/{n.chip}")
        ids.add((n.id, n.chip))
        _natural(f"{path}.hbm_total_bytes", n.hbm_total_bytes)
        _natural(f"{path}.hbm_used_bytes", n.hbm_used_bytes)
        if n.hbm_used_bytes > n.hbm_total_bytes:
            raise _Problem(f"{path}.hbm_used_bytes: more than the {n.hbm_total_bytes} the NPU has")
        _finite(f"{path}.aicore_utilization_percent", n.aicore_utilization_percent, upper=100)
        _numa(f"{path}.numa_node", n.numa_node, zones)
        _processes(f"{path}.processes", n.processes, limits)


def _numa(path: str, node: int, zones: int) -> None:
    if node < -1 or (zones and node >= zones):
        raise _Problem(f"{path}: must be -1 (none) or a reported zone, got {node}")


def _pressure(path: str, p: Pressure) -> None:
    # every report has three of these: one chained comparison first (NaN fails it), the culprit only then
    if 0 <= p.some_avg10 <= 100 and 0 <= p.some_avg60 <= 100 and 0 <= p.full_avg10 <= 100 and 0 <= p.full_avg60 <= 100:
        return
    for name in ("some_avg10", "some_avg60", "full_avg10", "full_avg60"):
        _finite(f"{path}.{name}", getattr(p, name), upper=100)


def _load(r: NodeReport, limits: ReportLimits, pods_checked: bool = False) -> None:
    lo = r.load
    _finite("load.cpu_used_cores", lo.cpu_used_cores)
    _natural("load.memory_used_bytes", lo.memory_used_bytes)
    _pressure("load.cpu_pressure", lo.cpu_pressure)
    _pressure("load.memory_pressure", lo.memory_pressure)
    _pressure("load.io_pressure", lo.io_pressure)
    if pods_checked:
        return
    pods = lo.pods
    _at_most("load.pods", pods, limits.max_pods, "pods")
    if not pods:
        _pod_details(lo, set(), limits)
        return
    # Whole-list checks first (C loops); look for the culprit only when one fails.
    uids = [p.uid for p in pods]
    cpu = [p.cpu_used_cores for p in pods]
    memory = [p.memory_used_bytes for p in pods]
    if "" in uids or len(set(uids)) != len(uids) or not math.isfinite(sum(cpu)) or min(cpu) < 0 or min(memory) < 0:
        seen: set[str] = set()
        for k, p in enumerate(pods):
            path = f"load.pods[{k}]"
            _new_uid(path, p.uid, seen)
            _finite(f"{path}.cpu_used_cores", p.cpu_used_cores)
            _natural(f"{path}.memory_used_bytes", p.memory_used_bytes)
    _pod_details(lo, set(uids), limits)


def _pod_details(lo: Load, uids: set[str], limits: ReportLimits) -> None:
    """Per-container usage and pod PSI: ``load.pod_details`` on the wire, fields of each pod in the model."""
    details = getattr(lo, "pod_details", None)
    if details is None:  # a NodeReport: the detail sits on the pods themselves
        items = [(f"load.pods[{k}]", p) for k, p in enumerate(lo.pods)
                 if p.containers or p.cpu_pressure is not None or p.memory_pressure is not None]
    else:
        if not details:
            return
        items = []
        for k, d in enumerate(details):
            path = f"load.pod_details[{k}]"
            if d.uid not in uids:
                raise _Problem(f"{path}.uid: names no pod in load.pods, got {shown(d.uid)}")
            items.append((path, d))
        if len(items) != len({d.uid for d in details}):
            raise _Problem("load.pod_details: a pod has more than one entry")
    for path, d in items:
        _at_most(f"{path}.containers", d.containers, limits.max_containers, "containers")
        for j, c in enumerate(d.containers):
            _finite(f"{path}.containers[{j}].cpu_used_cores", c.cpu_used_cores)
            _natural(f"{path}.containers[{j}].memory_used_bytes", c.memory_used_bytes)
        for name in ("cpu_pressure", "memory_pressure"):
            value = getattr(d, name)
            if value is not None:
                _pressure(f"{path}.{name}", value)


def _colocation(r: NodeReport, limits: ReportLimits) -> None:
    co = r.colocation
    _natural("colocation.batch_cpu_millis", co.batch_cpu_millis)
    _natural("colocation.batch_memory_bytes", co.batch_memory_bytes)
    if co.offline_cpu_quota_millis is not None:
        _natural("colocation.offline_cpu_quota_millis", co.offline_cpu_quota_millis)
    _at_most("colocation.evictions", co.evictions, limits.max_evictions, "evictions")
    for k, e in enumerate(co.evictions):
        if not e.pod_uid:
            raise _Problem(f"colocation.evictions[{k}].pod_uid: must be set")


POD_PHASES = ("Pending", "Running", "Succeeded", "Failed")
CONTAINER_STATES = ("waiting", "running", "terminated")


def _new_uid(path: str, uid: str, seen: set[str]) -> None:
    """A pod uid that is set and not seen before in its list (then remembered)."""
    if not uid or uid in seen:
        raise _Problem(f"{path}.uid: must be set and unique, got {shown(uid)}")
    seen.add(uid)


def _runtime(r: NodeReport, limits: ReportLimits) -> None:
    """Embedded mode: the pods the agent's local runtime holds."""
    pods = getattr(r, "runtime", ())
    if not pods:
        return
    _at_most("runtime", pods, limits.max_pods, "pods")
    seen: set[str] = set()
    for k, p in enumerate(pods):
        path = f"runtime[{k}]"
        _new_uid(path, p.uid, seen)
        if p.phase not in POD_PHASES:
            raise _Problem(f"{path}.phase: must be one of {', '.join(POD_PHASES)}, got {shown(p.phase)}")
        _natural(f"{path}.restarts", p.restarts)
        _at_most(f"{path}.containers", p.containers, limits.max_containers, "containers")
        for j, c in enumerate(p.containers):
            if c.state not in CONTAINER_STATES:
                raise _Problem(f"{path}.containers[{j}].state: must be one of {', '.join(CONTAINER_STATES)}, "
                               f"got {shown(c.state)}")
            _natural(f"{path}.containers[{j}].restarts", c.restarts)

