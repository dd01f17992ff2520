"""Fake hosts for collector tests: a realistic ``/sys`` + ``/proc`` subset written under ``tmp_path``.

:func:`make_host` writes the files the kernel shows for a given shape, in the kernel's own
formats (``drivers/base/node.c``, ``drivers/base/topology.c``, ``fs/proc/meminfo.c``):

* ``cpu/online``, ``offline``, ``possible``, ``present``: cpulists (``0-31,33-63``, ``\\n`` when empty);
* ``cpuN/online`` (``1``/``0``, absent for cpu0 as on x86); for online CPUs only,
  ``cpuN/topology/`` with ``physical_package_id``, ``die_id``, ``core_id``, ``core_cpus_list``
  and its deprecated twin ``thread_siblings_list``, ``core_siblings_list`` / ``package_cpus_list``,
  plus the hex masks (``00000000,00000001``).  Sibling lists hold online CPUs only, and an
  offline CPU has no ``topology`` directory (x86 removes both on hot-unplug);
* ``node/online``, ``possible``, ``has_cpu``, ``has_memory``; ``nodeN/cpulist``, ``cpumap``,
  ``meminfo`` (``Node 0 MemTotal:       16314788 kB``), ``distance`` (``10 21``);
* ``/proc/meminfo`` (``MemTotal:       32629576 kB``).

Enumeration follows real machines.  ``vendor="intel"``: the first hardware thread of every core
is enumerated first, so cpu0 and cpu32 share a core on a 32-core host, and ``core_id`` has gaps
inside a package (0-4, 8-12, ... as on Xeon Scalable).  ``vendor="amd"``: siblings are adjacent
(0-1) and ``core_id`` is contiguous.  Physical cores are spread evenly over NUMA nodes in order, so
4 nodes on 2 sockets is sub-NUMA clustering (two nodes per socket, distance 11 / 12 within a socket).
"""

from __future__ import annotations

from pathlib import Path

from agent.hostpaths import HostPaths, format_cpulist

# (same node, same socket, other socket), as the firmware's SLIT typically reads.
DISTANCES = {"intel": (10, 11, 21), "amd": (10, 12, 32)}


def make_host(
    root: Path,
    *,
    sockets: int = 1,
    cores_per_socket: int = 4,
    threads_per_core: int = 1,
    numa_nodes: int = 1,
    mem_per_node_kib: int = 16314788,
    numa_sysfs: bool = True,
    offline: tuple[int, ...] | list[int] = (),
    vendor: str = "intel",
) -> HostPaths:
    """Write a host of this shape under ``root`` and return ``HostPaths.under(root)``."""
    cores = sockets * cores_per_socket
    total = cores * threads_per_core
    if vendor not in DISTANCES:
        raise ValueError(f"vendor must be intel or amd, got {vendor!r}")
    if cores % numa_nodes or (numa_nodes % sockets and sockets % numa_nodes):
        raise ValueError(f"{numa_nodes} NUMA nodes do not divide {sockets} sockets of {cores_per_socket} cores")
    if not set(offline) <= set(range(total)):
        raise ValueError(f"offline CPUs {sorted(offline)} not in 0-{total - 1}")
    online = [cpu for cpu in range(total) if cpu not in set(offline)]

    def cpu_of(core: int, thread: int) -> int:  # core: 0..cores-1 across the node
        return thread * cores + core if vendor == "intel" else core * threads_per_core + thread

    def core_id(core_in_socket: int) -> int:
        return (core_in_socket // 5) * 8 + core_in_socket % 5 if vendor == "intel" else core_in_socket

    def node_of(core: int) -> int:
        return core * numa_nodes // cores

    core_cpus = {g: [cpu_of(g, t) for t in range(threads_per_core)] for g in range(cores)}
    socket_cpus = {
        s: sorted(c for g in range(s * cores_per_socket, (s + 1) * cores_per_socket) for c in core_cpus[g])
        for s in range(sockets)
    }

    def live(cpus: list[int]) -> list[int]:
        return sorted(set(cpus) & set(online))

    cpu_dir = root / "sys" / "devices" / "system" / "cpu"
    _write(cpu_dir / "online", format_cpulist(online) + "\n")
    _write(cpu_dir / "offline", format_cpulist(sorted(offline)) + "\n")
    for name in ("possible", "present"):
        _write(cpu_dir / name, format_cpulist(list(range(total))) + "\n")
    _write(cpu_dir / "kernel_max", "8191\n")
    for g in range(cores):
        socket, in_socket = divmod(g, cores_per_socket)
        for cpu in core_cpus[g]:
            base = cpu_dir / f"cpu{cpu}"
            if cpu != 0:
                _write(base / "online", "0\n" if cpu in offline else "1\n")
            else:
                base.mkdir(parents=True, exist_ok=True)
            if cpu in offline:
                continue
            topo = base / "topology"
            _write(topo / "physical_package_id", f"{socket}\n")
            _write(topo / "die_id", "0\n")
            _write(topo / "core_id", f"{core_id(in_socket)}\n")
            for name, cpus in (("core_cpus", core_cpus[g]), ("thread_siblings", core_cpus[g]),
                               ("core_siblings", socket_cpus[socket]), ("package_cpus", socket_cpus[socket])):
                _write(topo / f"{name}_list", format_cpulist(live(cpus)) + "\n")
                _write(topo / name, cpumask(live(cpus), total) + "\n")

    node_mem = dict.fromkeys(range(numa_nodes), mem_per_node_kib)
    if numa_sysfs:
        node_dir = root / "sys" / "devices" / "system" / "node"
        all_nodes = format_cpulist(list(range(numa_nodes))) + "\n"
        for name in ("online", "possible", "has_cpu", "has_memory", "has_normal_memory"):
            _write(node_dir / name, all_nodes)
        node_sockets = {n: {g // cores_per_socket for g in range(cores) if node_of(g) == n} for n in range(numa_nodes)}
        local, same_socket, remote = DISTANCES[vendor]
        for n in range(numa_nodes):
            base = node_dir / f"node{n}"
            cpus = live([c for g in range(cores) if node_of(g) == n for c in core_cpus[g]])
            _write(base / "cpulist", format_cpulist(cpus) + "\n")
            _write(base / "cpumap", cpumask(cpus, total) + "\n")
            _write(base / "meminfo", node_meminfo(n, node_mem[n]))
            row = [
                local if m == n else same_socket if node_sockets[m] & node_sockets[n] else remote
                for m in range(numa_nodes)
            ]
            _write(base / "distance", " ".join(map(str, row)) + "\n")
    _write(root / "proc" / "meminfo", proc_meminfo(sum(node_mem.values())))
    return HostPaths.under(root)


def cpumask(cpus: list[int], nbits: int) -> str:
    """The kernel's ``%*pb`` bitmap: 32-bit hex chunks, high first, comma separated (``00000000,00000001``)."""
    value = sum(1 << cpu for cpu in cpus)
    chunks, first = [], nbits % 32 or 32
    for start in range((nbits - 1) // 32 * 32, -1, -32):
        width = (first + 3) // 4 if not chunks else 8
        chunks.append(f"{(value >> start) & 0xFFFFFFFF:0{width}x}")
    return ",".join(chunks)


def node_meminfo(node: int, total_kib: int) -> str:
    """``nodeN/meminfo`` as ``node_read_meminfo`` prints it (a subset of its lines)."""
    free = total_kib * 9 // 10
    rows = [("MemTotal", total_kib), ("MemFree", free), ("MemUsed", total_kib - free), ("SwapCached", 0),
            ("Active", 61440), ("Inactive", 40960), ("Dirty", 12), ("FilePages", 102400), ("Shmem", 2048)]
    text = "".join(f"Node {node} {name + ':':<16}{value:>8} kB\n" for name, value in rows)
    huge = ("HugePages_Total", "HugePages_Free", "HugePages_Surp")
    return text + "".join(f"Node {node} {name + ':':<16} {0:>5}\n" for name in huge)


def proc_meminfo(total_kib: int) -> str:
    """``/proc/meminfo`` as ``meminfo_proc_show`` prints it (a subset of its lines)."""
    free = total_kib * 9 // 10
    rows = [("MemTotal", total_kib), ("MemFree", free), ("MemAvailable", free + 102400), ("Buffers", 2048),
            ("Cached", 102400), ("SwapCached", 0), ("SwapTotal", 0), ("SwapFree", 0)]
    text = "".join(f"{name + ':':<16}{value:>8} kB\n" for name, value in rows)
    return text + f"{'HugePages_Total:':<19}{0:>5}\n{'Hugepagesize:':<16}{2048:>8} kB\n"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
