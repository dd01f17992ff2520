"""Topology collector: the node's CPUs, physical cores, sockets and NUMA zones from sysfs and procfs.

Everything is read through :class:`~agent.hostpaths.HostPaths` in the kernel's own formats:

* ``<sys>/devices/system/cpu/online`` (cpulist) and, per online CPU, ``cpuN/topology/``
  ``physical_package_id``, ``core_id`` and ``core_cpus_list`` / ``thread_siblings_list``;
* ``<sys>/devices/system/node/online`` and, per node, ``nodeN/cpulist``, ``nodeN/meminfo``
  (``Node 0 MemTotal:       16314788 kB``) and ``nodeN/distance`` (``10 21``, one entry per
  online node, in node order);
* ``<proc>/meminfo`` (``MemTotal:       32629576 kB``).

Required files (``cpu/online``, ``MemTotal`` in ``/proc/meminfo`` and, where a ``node``
directory exists, ``node/online`` and each online node's ``cpulist``) raise ``ValueError``
naming the file when missing or malformed.  Optional files degrade: a missing or malformed
``physical_package_id`` reads as socket 0; without ``core_id`` the CPU's sibling list names
its core, and without either the CPU is its own core; without ``nodeN/meminfo`` a zone has
0 bytes; without ``distance`` a row is 10 to itself and 20 to every other zone.  A host with
no ``node`` directory (NUMA disabled) is one zone 0 holding every CPU and all of memory.
Offline CPUs are left out everywhere, including zone cpulists that still name them.
"""

from __future__ import annotations

from pathlib import Path

from agent.hostpaths import HostPaths, parse_cpulist
from proto.errors import InputError
from proto.model import Capacity, CpuTopology, LogicalCpu, NumaZone

LOCAL_DISTANCE = 10
REMOTE_DISTANCE = 20


def read_capacity(paths: HostPaths) -> Capacity:
    """The node's capacity: CPUs (millicores), memory (bytes), NUMA zones and CPU topology."""
    cpu_dir = paths.sys / "devices" / "system" / "cpu"
    online = _required_cpulist(paths, cpu_dir / "online")
    if not online:
        raise InputError(f"{cpu_dir / 'online'}: no online CPU")
    memory = _meminfo_kib(paths, paths.proc / "meminfo", "MemTotal:")
    if memory is None:
        raise InputError(f"{paths.proc / 'meminfo'}: missing, or no valid MemTotal line")
    zones = _read_zones(paths, online, memory * 1024)
    zone_of = {cpu: zone.id for zone in zones for cpu in zone.cpus}
    return Capacity(
        cpu_millis=len(online) * 1000,
        memory_bytes=memory * 1024,
        numa_zones=zones,
        cpu_topology=_read_cpu_topology(paths, cpu_dir, online, zone_of),
    )


def numa_of_cpus(capacity: Capacity) -> dict[int, int]:
    """CPU id -> NUMA zone id, from the zones' cpu lists and the topology's per-CPU zones."""
    out = {cpu: zone.id for zone in capacity.numa_zones for cpu in zone.cpus}
    out.update({cpu.id: cpu.numa_zone for cpu in capacity.cpu_topology.cpus})
    return out


def _read_cpu_topology(paths: HostPaths, cpu_dir: Path, online: list[int], zone_of: dict[int, int]) -> CpuTopology:
    keys: dict[int, tuple[int, tuple]] = {}  # cpu -> (socket, physical core key within the node)
    for cpu in online:
        topo = cpu_dir / f"cpu{cpu}" / "topology"
        socket = paths.read_int(topo / "physical_package_id")
        socket = socket if socket is not None and socket >= 0 else 0
        core_id = paths.read_int(topo / "core_id")
        if core_id is not None:
            keys[cpu] = (socket, ("core", core_id))
            continue
        siblings = _optional_cpulist(paths, topo / "core_cpus_list") or _optional_cpulist(
            paths, topo / "thread_siblings_list"
        )
        keys[cpu] = (socket, ("siblings", tuple(sorted(siblings or [cpu]))))
    # A node-wide physical core index: cores numbered in (socket, core id) order.
    core_index = {key: i for i, key in enumerate(sorted(set(keys.values())))}
    threads: dict[int, int] = {}
    cpus = []
    for cpu in online:
        core = core_index[keys[cpu]]
        threads[core] = threads.get(core, 0) + 1
        cpus.append(LogicalCpu(id=cpu, socket=keys[cpu][0], core=core, numa_zone=zone_of[cpu]))
    return CpuTopology(
        sockets=len({socket for socket, _ in keys.values()}),
        cores=len(core_index),
        threads_per_core=max(threads.values(), default=0),
        cpus=cpus,
    )


def _read_zones(paths: HostPaths, online: list[int], total_memory: int) -> list[NumaZone]:
    node_dir = paths.sys / "devices" / "system" / "node"
    if not node_dir.is_dir():
        return [NumaZone(id=0, cpus=list(online), memory_bytes=total_memory, distances=[LOCAL_DISTANCE])]
    node_ids = _required_cpulist(paths, node_dir / "online")
    if not node_ids:
        raise InputError(f"{node_dir / 'online'}: no online NUMA node")
    claimed: set[int] = set()
    zones = []
    for position, node in enumerate(node_ids):
        base = node_dir / f"node{node}"
        listed = set(_required_cpulist(paths, base / "cpulist"))
        cpus = [cpu for cpu in online if cpu in listed and cpu not in claimed]
        claimed.update(cpus)
        memory = _meminfo_kib(paths, base / "meminfo", f"Node {node} MemTotal:")
        zones.append(
            NumaZone(
                id=node,
                cpus=cpus,
                memory_bytes=(memory or 0) * 1024,
                distances=_distances(paths, base / "distance", position, len(node_ids)),
            )
        )
    orphans = [cpu for cpu in online if cpu not in claimed]
    if orphans:  # listed by no zone: the first zone (zone 0 on every real host)
        zones[0].cpus = sorted(zones[0].cpus + orphans)
    return zones


def _distances(paths: HostPaths, path: Path, position: int, count: int) -> list[int]:
    text = paths.read(path)
    try:
        row = [int(word) for word in (text or "").split()]
    except ValueError:
        row = []
    if len(row) == count:
        return row
    return [LOCAL_DISTANCE if i == position else REMOTE_DISTANCE for i in range(count)]


def _meminfo_kib(paths: HostPaths, path: Path, label: str) -> int | None:
    """The kB figure on the line starting with ``label``; None when the file or line is missing or bad."""
    for line in (paths.read(path) or "").splitlines():
        if line.startswith(label):
            try:
                return int(line[len(label) :].split()[0])
            except (ValueError, IndexError):
                return None
    return None


def _required_cpulist(paths: HostPaths, path: Path) -> list[int]:
    text = paths.read(path)
    if text is None:
        raise InputError(f"{path}: missing or unreadable")
    try:
        return parse_cpulist(text)
    except ValueError as exc:
        raise InputError(f"{path}: not a CPU list ({text.strip()!r}): {exc}") from None


def _optional_cpulist(paths: HostPaths, path: Path) -> list[int] | None:
    text = paths.read(path)
    try:
        return parse_cpulist(text) if text is not None else None
    except ValueError:
        return None
