"""The topology collector against fixture hosts of many shapes, broken hosts, and this machine's own /sys."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agent.collectors.topology import numa_of_cpus, read_capacity
from agent.hostpaths import HostPaths, format_cpulist, parse_cpulist
from tests.support.sysfs_fixtures import make_host

MEM_KIB = 16314788


@dataclass(frozen=True)
class Case:
    name: str
    host: dict
    online: str
    sockets: int
    cores: int
    threads_per_core: int
    zones: dict[int, str]  # zone id -> its CPUs (cpulist)
    distances: dict[int, list[int]]  # zone id -> its row
    same_core: list[tuple[int, int]] = field(default_factory=list)
    other_core: list[tuple[int, int]] = field(default_factory=list)
    socket_of: dict[int, int] = field(default_factory=dict)


CASES = [
    Case("1numa-noht", {"cores_per_socket": 4}, "0-3", 1, 4, 1, {0: "0-3"}, {0: [10]},
         other_core=[(0, 1), (2, 3)]),
    Case("1numa-ht-intel", {"cores_per_socket": 4, "threads_per_core": 2}, "0-7", 1, 4, 2, {0: "0-7"}, {0: [10]},
         same_core=[(0, 4), (3, 7)], other_core=[(0, 1), (4, 5)]),
    Case("1numa-ht-amd", {"cores_per_socket": 4, "threads_per_core": 2, "vendor": "amd"}, "0-7", 1, 4, 2,
         {0: "0-7"}, {0: [10]}, same_core=[(0, 1), (6, 7)], other_core=[(0, 4), (1, 2)]),
    Case("1numa-2sockets-ht-intel", {"sockets": 2, "cores_per_socket": 4, "threads_per_core": 2}, "0-15", 2, 8, 2,
         {0: "0-15"}, {0: [10]}, same_core=[(4, 12)], other_core=[(0, 4), (12, 8)],
         socket_of={0: 0, 4: 1, 8: 0, 12: 1}),
    Case("2numa-2sockets-ht-intel", {"sockets": 2, "cores_per_socket": 16, "threads_per_core": 2, "numa_nodes": 2},
         "0-63", 2, 32, 2, {0: "0-15,32-47", 1: "16-31,48-63"}, {0: [10, 21], 1: [21, 10]},
         same_core=[(0, 32), (16, 48), (31, 63)], other_core=[(0, 16), (32, 48), (0, 1)],
         socket_of={0: 0, 15: 0, 16: 1, 32: 0, 48: 1, 63: 1}),
    Case("2numa-2sockets-noht-intel", {"sockets": 2, "cores_per_socket": 12, "numa_nodes": 2}, "0-23", 2, 24, 1,
         {0: "0-11", 1: "12-23"}, {0: [10, 21], 1: [21, 10]}, other_core=[(0, 12), (5, 6), (11, 12)],
         socket_of={11: 0, 12: 1}),
    Case("2numa-2sockets-ht-amd", {"sockets": 2, "cores_per_socket": 4, "threads_per_core": 2, "numa_nodes": 2, "vendor": "amd"},
         "0-15", 2, 8, 2, {0: "0-7", 1: "8-15"}, {0: [10, 32], 1: [32, 10]},
         same_core=[(0, 1), (8, 9)], other_core=[(0, 8), (1, 2), (7, 8)], socket_of={7: 0, 8: 1}),
    Case("4numa-4sockets-noht", {"sockets": 4, "cores_per_socket": 2, "numa_nodes": 4}, "0-7", 4, 8, 1,
         {0: "0-1", 1: "2-3", 2: "4-5", 3: "6-7"},
         {0: [10, 21, 21, 21], 1: [21, 10, 21, 21], 2: [21, 21, 10, 21], 3: [21, 21, 21, 10]},
         other_core=[(0, 2), (0, 4), (0, 6)], socket_of={1: 0, 2: 1, 5: 2, 6: 3}),
    Case("4numa-2sockets-snc-intel", {"sockets": 2, "cores_per_socket": 8, "threads_per_core": 2, "numa_nodes": 4},
         "0-31", 2, 16, 2, {0: "0-3,16-19", 1: "4-7,20-23", 2: "8-11,24-27", 3: "12-15,28-31"},
         {0: [10, 11, 21, 21], 1: [11, 10, 21, 21], 2: [21, 21, 10, 11], 3: [21, 21, 11, 10]},
         same_core=[(0, 16), (8, 24)], other_core=[(0, 8), (5, 13)], socket_of={7: 0, 8: 1, 23: 0, 24: 1}),
    Case("4numa-1socket-nps4-amd", {"cores_per_socket": 8, "threads_per_core": 2, "numa_nodes": 4, "vendor": "amd"},
         "0-15", 1, 8, 2, {0: "0-3", 1: "4-7", 2: "8-11", 3: "12-15"},
         {0: [10, 12, 12, 12], 3: [12, 12, 12, 10]}, same_core=[(2, 3), (4, 5)], other_core=[(3, 4)]),
    Case("numa-disabled", {"sockets": 2, "cores_per_socket": 4, "threads_per_core": 2, "numa_sysfs": False}, "0-15", 2, 8, 2,
         {0: "0-15"}, {0: [10]}, same_core=[(0, 8)], other_core=[(0, 4)], socket_of={3: 0, 4: 1}),
    Case("offline-sibling", {"sockets": 2, "cores_per_socket": 4, "threads_per_core": 2, "numa_nodes": 2, "offline": (9,)},
         "0-8,10-15", 2, 8, 2, {0: "0-3,8,10-11", 1: "4-7,12-15"}, {0: [10, 21], 1: [21, 10]},
         same_core=[(0, 8), (2, 10)], other_core=[(1, 8)]),
    Case("offline-whole-core", {"cores_per_socket": 4, "threads_per_core": 2, "offline": (1, 5)},
         "0,2-4,6-7", 1, 3, 2, {0: "0,2-4,6-7"}, {0: [10]}, same_core=[(0, 4), (2, 6)], other_core=[(0, 2)]),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_shapes(case: Case, tmp_path: Path) -> None:
    cap = read_capacity(make_host(tmp_path, mem_per_node_kib=MEM_KIB, **case.host))
    topo = cap.cpu_topology
    online = parse_cpulist(case.online)

    assert [c.id for c in topo.cpus] == online
    assert cap.cpu_millis == 1000 * len(online)
    assert (topo.sockets, topo.cores, topo.threads_per_core) == (case.sockets, case.cores, case.threads_per_core)
    assert {z.id: format_cpulist(z.cpus) for z in cap.numa_zones} == case.zones
    for zone_id, row in case.distances.items():
        assert next(z for z in cap.numa_zones if z.id == zone_id).distances == row
    nodes = case.host.get("numa_nodes", 1)
    assert cap.memory_bytes == nodes * MEM_KIB * 1024
    assert [z.memory_bytes for z in cap.numa_zones] == [MEM_KIB * 1024] * len(case.zones)

    by_id = {c.id: c for c in topo.cpus}
    for a, b in case.same_core:
        assert by_id[a].core == by_id[b].core, (a, b)
    for a, b in case.other_core:
        assert by_id[a].core != by_id[b].core, (a, b)
    for cpu, socket in case.socket_of.items():
        assert by_id[cpu].socket == socket, cpu
    zone_of = {cpu: z.id for z in cap.numa_zones for cpu in z.cpus}
    assert {c.id: c.numa_zone for c in topo.cpus} == zone_of
    assert numa_of_cpus(cap) == zone_of


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_core_indices_are_dense_and_never_span_sockets_or_zones(case: Case, tmp_path: Path) -> None:
    topo = read_capacity(make_host(tmp_path, **case.host)).cpu_topology
    assert sorted({c.core for c in topo.cpus}) == list(range(topo.cores))
    for core in range(topo.cores):
        members = [c for c in topo.cpus if c.core == core]
        assert len({c.socket for c in members}) == 1 and len({c.numa_zone for c in members}) == 1
        assert 1 <= len(members) <= topo.threads_per_core


def test_fixture_writes_the_kernels_formats(tmp_path: Path) -> None:
    paths = make_host(tmp_path, sockets=2, cores_per_socket=16, threads_per_core=2, numa_nodes=2, offline=(33,))
    cpu, node = paths.sys / "devices/system/cpu", paths.sys / "devices/system/node"
    assert (cpu / "online").read_text() == "0-32,34-63\n"
    assert (cpu / "offline").read_text() == "33\n"
    assert (cpu / "cpu0/topology/thread_siblings_list").read_text() == "0,32\n"
    assert (cpu / "cpu0/topology/thread_siblings").read_text() == "00000001,00000001\n"
    assert (cpu / "cpu1/topology/core_cpus_list").read_text() == "1\n"  # its sibling cpu33 is offline
    assert not (cpu / "cpu33/topology").exists() and (cpu / "cpu33/online").read_text() == "0\n"
    assert (cpu / "cpu5/topology/core_id").read_text() == "8\n"  # Xeon-style gap after core 4
    assert (node / "node1/distance").read_text() == "21 10\n"
    assert (node / "node0/meminfo").read_text().startswith("Node 0 MemTotal:       16314788 kB\n")
    assert (paths.proc / "meminfo").read_text().startswith("MemTotal:       32629576 kB\n")


def test_memory_total_comes_from_proc_meminfo(tmp_path: Path) -> None:
    paths = make_host(tmp_path, numa_nodes=2, cores_per_socket=4, mem_per_node_kib=1000)
    (paths.proc / "meminfo").write_text("MemTotal:           1900 kB\nMemFree:             100 kB\n")
    cap = read_capacity(paths)
    assert cap.memory_bytes == 1900 * 1024
    assert [z.memory_bytes for z in cap.numa_zones] == [1000 * 1024, 1000 * 1024]


def test_missing_distance_defaults_to_local_and_remote(tmp_path: Path) -> None:
    paths = make_host(tmp_path, sockets=2, cores_per_socket=2, numa_nodes=2)
    (paths.sys / "devices/system/node/node0/distance").unlink()
    (paths.sys / "devices/system/node/node1/distance").write_text("ten twenty\n")
    assert [z.distances for z in read_capacity(paths).numa_zones] == [[10, 20], [20, 10]]


def test_missing_optional_files_degrade(tmp_path: Path) -> None:
    paths = make_host(tmp_path, sockets=2, cores_per_socket=2, numa_nodes=2)
    for cpu in range(4):  # arm64 without a described package reads -1
        package = paths.sys / f"devices/system/cpu/cpu{cpu}/topology/physical_package_id"
        if cpu % 2:
            package.unlink()
        else:
            package.write_text("-1\n")
    (paths.sys / "devices/system/node/node1/meminfo").unlink()
    cap = read_capacity(paths)
    assert {c.socket for c in cap.cpu_topology.cpus} == {0} and cap.cpu_topology.sockets == 1
    assert [z.memory_bytes for z in cap.numa_zones] == [MEM_KIB * 1024, 0]


@pytest.mark.parametrize("keep", ["core_cpus_list", "thread_siblings_list"])
def test_without_core_id_the_sibling_list_names_the_core(keep: str, tmp_path: Path) -> None:
    paths = make_host(tmp_path, cores_per_socket=4, threads_per_core=2)
    drop = {"core_cpus_list", "thread_siblings_list"} - {keep}
    for cpu in range(8):
        topo = paths.sys / f"devices/system/cpu/cpu{cpu}/topology"
        for name in ("core_id", *drop):
            (topo / name).unlink()
    topo = read_capacity(paths).cpu_topology
    by_id = {c.id: c.core for c in topo.cpus}
    assert (topo.cores, topo.threads_per_core) == (4, 2)
    assert by_id[0] == by_id[4] and by_id[1] == by_id[5] and by_id[0] != by_id[1]


def test_without_core_id_or_siblings_each_cpu_is_its_own_core(tmp_path: Path) -> None:
    paths = make_host(tmp_path, cores_per_socket=4, threads_per_core=2)
    for cpu in range(8):
        topo = paths.sys / f"devices/system/cpu/cpu{cpu}/topology"
        for name in ("core_id", "core_cpus_list", "thread_siblings_list"):
            (topo / name).unlink()
    topo = read_capacity(paths).cpu_topology
    assert (topo.cores, topo.threads_per_core) == (8, 1)
    assert len({c.core for c in topo.cpus}) == 8


def test_zone_cpulists_naming_offline_cpus_are_filtered(tmp_path: Path) -> None:
    # x86 drops an offline CPU from its node's cpulist; other architectures keep it there.
    paths = make_host(tmp_path, sockets=2, cores_per_socket=2, numa_nodes=2, offline=(3,))
    (paths.sys / "devices/system/node/node1/cpulist").write_text("2-3\n")
    cap = read_capacity(paths)
    assert [z.cpus for z in cap.numa_zones] == [[0, 1], [2]]
    assert numa_of_cpus(cap) == {0: 0, 1: 0, 2: 1}


def test_cpu_in_no_zone_goes_to_zone_0(tmp_path: Path) -> None:
    paths = make_host(tmp_path, sockets=2, cores_per_socket=2, numa_nodes=2)
    (paths.sys / "devices/system/node/node1/cpulist").write_text("2\n")
    cap = read_capacity(paths)
    assert [z.cpus for z in cap.numa_zones] == [[0, 1, 3], [2]]
    assert numa_of_cpus(cap)[3] == 0


def test_sparse_node_ids_and_a_memory_only_node(tmp_path: Path) -> None:
    # Node 1 is offline; node 2 is memory without CPUs (CXL): empty cpulist, still a zone.
    paths = make_host(tmp_path, sockets=2, cores_per_socket=2, numa_nodes=2)
    node = paths.sys / "devices/system/node"
    (node / "node1").rename(node / "node2")
    (node / "online").write_text("0,2\n")
    (node / "node0/cpulist").write_text("0-3\n")
    (node / "node2/cpulist").write_text("\n")
    (node / "node2/meminfo").write_text("Node 2 MemTotal:        1048576 kB\n")
    (node / "node2/distance").unlink()  # its default row is by position in node/online, not by node id
    cap = read_capacity(paths)
    assert [(z.id, z.cpus, z.memory_bytes) for z in cap.numa_zones] == [
        (0, [0, 1, 2, 3], MEM_KIB * 1024), (2, [], 1 << 30)]
    assert [z.distances for z in cap.numa_zones] == [[10, 21], [20, 10]]


@pytest.mark.parametrize(
    "file,content",
    [
        ("sys/devices/system/cpu/online", "garbage\n"),
        ("sys/devices/system/cpu/online", "3-1\n"),
        ("sys/devices/system/cpu/online", None),
        ("sys/devices/system/cpu/online", "\n"),
        ("sys/devices/system/node/online", "zero\n"),
        ("sys/devices/system/node/node1/cpulist", "2-x\n"),
        ("proc/meminfo", "MemFree:  10 kB\n"),
        ("proc/meminfo", None),
    ],
    ids=["cpu-online-garbage", "cpu-online-backwards", "cpu-online-missing", "cpu-online-empty",
         "node-online-garbage", "node-cpulist-garbage", "meminfo-no-memtotal", "meminfo-missing"],
)
def test_malformed_required_file_raises_naming_it(file: str, content: str | None, tmp_path: Path) -> None:
    make_host(tmp_path, sockets=2, cores_per_socket=2, numa_nodes=2)
    path = tmp_path / file
    if content is None:
        path.unlink()
    else:
        path.write_text(content)
    with pytest.raises(ValueError, match=re.escape(str(path))):
        read_capacity(HostPaths.under(tmp_path))


def test_this_machine() -> None:
    paths = HostPaths()
    if not (paths.sys / "devices/system/cpu/online").exists():
        pytest.skip("no Linux sysfs here")
    cap = read_capacity(paths)
    topo = cap.cpu_topology
    assert topo.cpus and cap.numa_zones and cap.memory_bytes > 0
    assert cap.cpu_millis == 1000 * len(topo.cpus)
    assert 1 <= topo.sockets <= topo.cores <= len(topo.cpus)
    assert topo.threads_per_core >= 1
    listed = [cpu for z in cap.numa_zones for cpu in z.cpus]
    assert sorted(listed) == [c.id for c in topo.cpus]  # every online CPU in exactly one zone
    assert all(len(z.distances) == len(cap.numa_zones) for z in cap.numa_zones)
    assert numa_of_cpus(cap) == {cpu: z.id for z in cap.numa_zones for cpu in z.cpus}
