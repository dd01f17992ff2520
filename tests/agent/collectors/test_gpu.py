"""The NVIDIA GPU collector against a fake pynvml, sysfs and /proc fixture trees."""

from __future__ import annotations

import inspect
import logging
import sys
from pathlib import Path

import pynvml
import pytest

from agent.collectors.gpu import NO_DRIVER_MESSAGE, GpuCollector, normalise_bus_id, pod_of_pid_from_cgroup
from agent.hostpaths import HostPaths
from proto.model import DeviceProcess, Gpu, MigMode
from proto.model import GpuTopologyLevel as Level
from tests.support.fake_pynvml import (
    NOT_SUPPORTED,
    FakeGpu,
    FakeNvLink,
    FakeProcess,
    links_to,
    make_fake_nvml,
    switch_links,
)

LOGGER = "agent.collectors.gpu"
UID = "3f2a9c1e-7b4d-4e8a-9c0f-1a2b3c4d5e6f"
CID = "4b825dc642cb6eb9a060e54bf8d69288fbee4904c4e1b2e9f1a0c3d5e7f9a1b2"


def gpu(i: int, **kw) -> FakeGpu:
    """The i-th of eight GPUs: distinct UUID and bus id (3B, 3C, ...)."""
    return FakeGpu(uuid=f"GPU-{i:08x}-aaaa-bbbb-cccc-000000000000", bus_id=f"00000000:{0x3B + i:02X}:00.0", **kw)


def write_numa(root: Path, bus_id: str, value: str) -> None:
    folder = root / "sys" / "bus" / "pci" / "devices" / bus_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "numa_node").write_text(value)


def collector(root: Path, nvml, **kw) -> GpuCollector:
    kw.setdefault("retry_interval_s", 0)
    return GpuCollector(HostPaths.under(root), nvml=nvml, **kw)


def messages(caplog, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == level]


# -- normal reports ---------------------------------------------------------------------


def test_zero_gpus_reports_nothing_and_logs_nothing(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    nvml = make_fake_nvml(gpus=[])
    assert collector(tmp_path, nvml).collect() == []
    assert nvml.initialised == 1
    assert messages(caplog, logging.INFO) == [] and messages(caplog, logging.WARNING) == []


def test_one_gpu_every_field(tmp_path):
    nvml = make_fake_nvml(gpus=[FakeGpu(
        uuid="GPU-1234", name="NVIDIA H100 80GB HBM3", memory_total=85_899_345_920, memory_used=1_073_741_824,
        gpu_util=73, memory_util=41, bus_id="00000000:3B:00.0", compute=[FakeProcess(pid=4242, used_gpu_memory=512)],
    )])
    write_numa(tmp_path, "0000:3b:00.0", "1\n")
    pods = {4242: (UID, "trainer")}
    got = collector(tmp_path, nvml, pod_of_pid=pods.get).collect()
    assert got == [Gpu(
        index=0, uuid="GPU-1234", model="NVIDIA H100 80GB HBM3", memory_total_bytes=85_899_345_920,
        memory_used_bytes=1_073_741_824, gpu_utilization_percent=73.0, memory_utilization_percent=41.0,
        numa_node=1, healthy=True, health_detail="", mig_mode=MigMode.DISABLED,
        processes=[DeviceProcess(pid=4242, memory_bytes=512, pod_uid=UID, container="trainer")],
    )]


def test_eight_gpus_in_index_order_with_their_numa_nodes(tmp_path):
    nvml = make_fake_nvml(gpus=[gpu(i, memory_used=i * 1000) for i in range(8)])
    for i in range(8):
        write_numa(tmp_path, f"0000:{0x3B + i:02x}:00.0", "0" if i < 4 else "1")
    c = collector(tmp_path, nvml)
    got = c.collect()
    assert [g.index for g in got] == list(range(8))
    assert [g.uuid for g in got] == [f"GPU-{i:08x}-aaaa-bbbb-cccc-000000000000" for i in range(8)]
    assert [g.memory_used_bytes for g in got] == [i * 1000 for i in range(8)]
    assert [g.numa_node for g in got] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert all(g.healthy for g in got)
    assert c.collect() == got
    assert nvml.calls.count("nvmlInit") == 1, "NVML is initialised once, not per collect()"


def test_bytes_from_older_pynvml_become_text(tmp_path):
    nvml = make_fake_nvml(gpus=[FakeGpu(uuid="GPU-b", name="Tesla V100", bus_id="00000000:AF:00.0")],
                          bytes_strings=True)
    write_numa(tmp_path, "0000:af:00.0", "1")
    (g,) = collector(tmp_path, nvml).collect()
    assert (g.uuid, g.model, g.numa_node) == ("GPU-b", "Tesla V100", 1)


# -- no driver, initialisation, retry ------------------------------------------------------


@pytest.mark.parametrize("error", [pynvml.NVMLError_LibraryNotFound, pynvml.NVMLError_DriverNotLoaded])
def test_no_driver_reports_nothing_and_says_so_once(tmp_path, caplog, error):
    caplog.set_level(logging.INFO, logger=LOGGER)
    nvml = make_fake_nvml(gpus=[gpu(0)], fail_init=error)
    c = collector(tmp_path, nvml)
    assert c.collect() == [] and c.collect() == []
    assert nvml.calls.count("nvmlInit") == 2, "retried (interval 0)"
    info = messages(caplog, logging.INFO)
    assert len(info) == 1 and info[0].startswith(NO_DRIVER_MESSAGE)
    assert messages(caplog, logging.WARNING) == []


def test_missing_pynvml_module_is_no_driver(tmp_path, caplog, monkeypatch):
    caplog.set_level(logging.INFO, logger=LOGGER)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    c = GpuCollector(HostPaths.under(tmp_path), retry_interval_s=0)
    assert c.collect() == [] and c.collect() == []
    info = messages(caplog, logging.INFO)
    assert len(info) == 1 and info[0].startswith(NO_DRIVER_MESSAGE)


def test_init_is_retried_only_after_the_interval(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    now = [1000.0]
    nvml = make_fake_nvml(gpus=[gpu(0)], fail_init=pynvml.NVMLError_LibraryNotFound)
    c = collector(tmp_path, nvml, retry_interval_s=60, clock=lambda: now[0])
    assert c.collect() == []
    nvml.fail_init = None  # the driver gets installed
    now[0] += 59
    assert c.collect() == []
    assert nvml.calls.count("nvmlInit") == 1
    now[0] += 1
    assert [g.uuid for g in c.collect()] == [gpu(0).uuid]
    assert nvml.calls.count("nvmlInit") == 2
    assert len([m for m in messages(caplog, logging.INFO) if m.startswith(NO_DRIVER_MESSAGE)]) == 1


def test_other_init_failure_is_a_warning_not_no_driver(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    c = collector(tmp_path, make_fake_nvml(gpus=[gpu(0)], fail_init=pynvml.NVMLError_LibRmVersionMismatch))
    assert c.collect() == [] and c.collect() == []
    assert messages(caplog, logging.INFO) == []
    (warning,) = messages(caplog, logging.WARNING)
    assert "initialisation failed" in warning and "version mismatch" in warning


def test_device_count_failure_reports_nothing_and_warns_once(tmp_path, caplog):
    nvml = make_fake_nvml(gpus=[gpu(0)], failing={None: {"nvmlDeviceGetCount": pynvml.NVMLError_Unknown}})
    c = collector(tmp_path, nvml)
    assert c.collect() == [] and c.collect() == []
    (warning,) = messages(caplog, logging.WARNING)
    assert "nvmlDeviceGetCount" in warning and "Unknown Error" in warning


def test_close_shuts_nvml_down_once(tmp_path):
    nvml = make_fake_nvml(gpus=[gpu(0)])
    c = collector(tmp_path, nvml)
    c.close()
    assert "nvmlShutdown" not in nvml.calls, "never initialised, nothing to shut down"
    c.collect()
    c.close()
    c.close()
    assert nvml.calls.count("nvmlShutdown") == 1 and nvml.initialised == 0


# -- failing devices -----------------------------------------------------------------------


def test_a_failing_call_marks_only_that_device_unhealthy_and_keeps_what_was_read(tmp_path):
    gpus = [gpu(i, memory_used=7, gpu_util=50) for i in range(3)]
    nvml = make_fake_nvml(gpus=gpus, failing={1: {"nvmlDeviceGetMemoryInfo": pynvml.NVMLError_Unknown}})
    got = collector(tmp_path, nvml).collect()
    assert [g.healthy for g in got] == [True, False, True]
    bad = got[1]
    assert "nvmlDeviceGetMemoryInfo" in bad.health_detail and "Unknown Error" in bad.health_detail
    assert (bad.uuid, bad.gpu_utilization_percent, bad.memory_total_bytes) == (gpus[1].uuid, 50.0, 0)
    assert bad.mig_mode == MigMode.DISABLED, "calls after the failing one still ran"
    assert [g.memory_used_bytes for g in got] == [7, 0, 7]
    assert got[0].health_detail == got[2].health_detail == ""


@pytest.mark.parametrize("call", ["nvmlDeviceGetHandleByIndex", "nvmlDeviceGetUUID", "nvmlDeviceGetPciInfo"])
def test_a_lost_gpu_is_unhealthy_and_not_read_further(tmp_path, call):
    nvml = make_fake_nvml(gpus=[gpu(0), gpu(1)], failing={0: {call: pynvml.NVMLError_GpuIsLost}})
    lost, fine = collector(tmp_path, nvml).collect()
    assert (lost.index, lost.healthy) == (0, False)
    assert lost.health_detail.startswith("GPU is lost") and call in lost.health_detail
    assert (fine.uuid, fine.healthy, fine.model) == (gpu(1).uuid, True, gpu(1).name)
    first_of_device_1 = nvml.calls.index("nvmlDeviceGetHandleByIndex", nvml.calls.index(call) + 1)
    assert nvml.calls[nvml.calls.index(call) + 1:first_of_device_1] == [], "no call on a lost GPU after it"


def test_not_supported_leaves_the_field_default_and_the_gpu_healthy(tmp_path):
    nvml = make_fake_nvml(gpus=[gpu(0, gpu_util=99)],
                          failing={0: {"nvmlDeviceGetUtilizationRates": pynvml.NVMLError_NotSupported}})
    (g,) = collector(tmp_path, nvml).collect()
    assert (g.healthy, g.gpu_utilization_percent, g.uuid) == (True, 0.0, gpu(0).uuid)


def test_library_mismatch_on_processes_is_not_a_device_fault(tmp_path, caplog):
    mismatch = pynvml.NVMLLibraryMismatchError("Unversioned function called")
    nvml = make_fake_nvml(gpus=[gpu(0, compute=[FakeProcess(1)], graphics=[FakeProcess(2)])],
                          failing={0: {"nvmlDeviceGetComputeRunningProcesses": mismatch}})
    (g,) = collector(tmp_path, nvml).collect()
    assert g.healthy and [p.pid for p in g.processes] == [2]
    assert any("nvmlDeviceGetComputeRunningProcesses" in m for m in messages(caplog, logging.WARNING))


# -- NUMA -------------------------------------------------------------------------------


@pytest.mark.parametrize("files,bus_id,want", [
    ({"0000:3b:00.0": "1\n"}, "00000000:3B:00.0", 1),
    ({"0000:3b:00.0": "-1\n"}, "00000000:3B:00.0", -1),
    ({}, "00000000:3B:00.0", -1),
    ({"0000:3b:00.0": "garbage"}, "00000000:3B:00.0", -1),
    ({"0000:3b:00.0": "0", "0000:86:00.0": "3"}, "00000000:86:00.0", 3),
    ({"10000:01:00.0": "2"}, "00010000:01:00.0", 2),
], ids=["node-1", "minus-one", "missing-file", "unparsable", "picks-its-own-device", "vmd-5-digit-domain"])
def test_numa_node_from_sysfs(tmp_path, files, bus_id, want):
    for name, value in files.items():
        write_numa(tmp_path, name, value)
    (g,) = collector(tmp_path, make_fake_nvml(gpus=[FakeGpu(bus_id=bus_id)])).collect()
    assert g.numa_node == want and g.healthy


@pytest.mark.parametrize("bus_id,want", [
    ("00000000:3B:00.0", "0000:3b:00.0"), (b"00000000:3B:00.0", "0000:3b:00.0"),
    ("0000:D8:00.1", "0000:d8:00.1"), ("3b:00.0", "0000:3b:00.0"), ("", None), ("not a bus", None),
])
def test_normalise_bus_id(bus_id, want):
    assert normalise_bus_id(bus_id) == want


# -- MIG --------------------------------------------------------------------------------

ON, OFF = pynvml.NVML_DEVICE_MIG_ENABLE, pynvml.NVML_DEVICE_MIG_DISABLE


@pytest.mark.parametrize("modes,want", [
    ([ON, ON], MigMode.ENABLED), ([OFF, OFF], MigMode.DISABLED),
    ([OFF, ON], MigMode.DISABLED), ([ON, OFF], MigMode.ENABLED), (NOT_SUPPORTED, MigMode.UNSUPPORTED),
], ids=["enabled", "disabled", "pending-enable-is-current-disabled", "pending-disable-is-current-enabled",
        "unsupported"])
def test_mig_mode_is_the_current_mode(tmp_path, modes, want):
    (g,) = collector(tmp_path, make_fake_nvml(gpus=[FakeGpu(mig_mode=modes)])).collect()
    assert g.mig_mode == want and g.healthy


# -- processes --------------------------------------------------------------------------


def test_processes_mapped_to_pods_and_merged_by_pid(tmp_path):
    fake = FakeGpu(compute=[FakeProcess(10, 300), FakeProcess(11, None)],
                   graphics=[FakeProcess(10, 500), FakeProcess(12, 7)])
    pods = {10: (UID, "worker"), 12: ("other-uid", "viz")}
    (g,) = collector(tmp_path, make_fake_nvml(gpus=[fake]), pod_of_pid=pods.get).collect()
    assert g.processes == [
        DeviceProcess(pid=10, memory_bytes=500, pod_uid=UID, container="worker"),
        DeviceProcess(pid=11, memory_bytes=0, pod_uid="", container=""),
        DeviceProcess(pid=12, memory_bytes=7, pod_uid="other-uid", container="viz"),
    ]


def test_processes_mapped_through_proc_cgroup(tmp_path):
    write_proc_cgroup(tmp_path, 77, f"0::/kubepods.slice/kubepods-pod{UID.replace('-', '_')}.slice/"
                                    f"cri-containerd-{CID}.scope\n")
    paths = HostPaths.under(tmp_path)
    fake = FakeGpu(compute=[FakeProcess(77, 1 << 30), FakeProcess(78, 1)])
    c = GpuCollector(paths, nvml=make_fake_nvml(gpus=[fake]), pod_of_pid=pod_of_pid_from_cgroup(paths))
    (g,) = c.collect()
    assert [(p.pid, p.pod_uid, p.container) for p in g.processes] == [(77, UID, CID), (78, "", "")]


# -- pod_of_pid_from_cgroup -------------------------------------------------------------

SYS_UID = UID.replace("-", "_")
CGROUP_CASES = {
    "v1-cgroupfs-burstable": (
        f"12:memory:/kubepods/burstable/pod{UID}/{CID}\n11:cpu,cpuacct:/kubepods/burstable/pod{UID}/{CID}\n",
        (UID, CID)),
    "v1-cgroupfs-guaranteed": (f"4:devices:/kubepods/pod{UID}/{CID}\n", (UID, CID)),
    "v2-cgroupfs-besteffort": (f"0::/kubepods/besteffort/pod{UID}/{CID}\n", (UID, CID)),
    "v1-hybrid-systemd-skips-root-line": (
        f"0::/\n1:name=systemd:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{SYS_UID}.slice/"
        f"cri-containerd-{CID}.scope\n", (UID, CID)),
    "v2-systemd-containerd-burstable": (
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{SYS_UID}.slice/"
        f"cri-containerd-{CID}.scope\n", (UID, CID)),
    "v2-systemd-crio-besteffort": (
        f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{SYS_UID}.slice/crio-{CID}.scope\n",
        (UID, CID)),
    "v2-systemd-docker-guaranteed": (
        f"0::/kubepods.slice/kubepods-pod{SYS_UID}.slice/docker-{CID}.scope\n", (UID, CID)),
    "static-pod-hash-uid": (
        f"0::/kubepods/burstable/pod6c2b7f04d3e1a9b8c7d6e5f4a3b2c1d0/{CID}\n",
        ("6c2b7f04d3e1a9b8c7d6e5f4a3b2c1d0", CID)),
    "nested-in-kind-node": (f"0::/docker/{'e' * 64}/kubepods/burstable/pod{UID}/{CID}\n", (UID, CID)),
    "pod-level-cgroup-no-container": (f"0::/kubepods/burstable/pod{UID}\n", (UID, "")),
    "host-service": ("0::/system.slice/containerd.service\n", None),
    "user-session": ("0::/user.slice/user-1000.slice/session-3.scope\n", None),
    "empty-file": ("", None),
}


def write_proc_cgroup(root: Path, pid: int, text: str) -> None:
    (root / "proc" / str(pid)).mkdir(parents=True)
    (root / "proc" / str(pid) / "cgroup").write_text(text)


@pytest.mark.parametrize("text,want", list(CGROUP_CASES.values()), ids=list(CGROUP_CASES))
def test_pod_of_pid_from_cgroup(tmp_path, text, want):
    write_proc_cgroup(tmp_path, 1234, text)
    assert pod_of_pid_from_cgroup(HostPaths.under(tmp_path))(1234) == want


def test_pod_of_pid_from_cgroup_without_the_process(tmp_path):
    lookup = pod_of_pid_from_cgroup(HostPaths.under(tmp_path))
    assert lookup(999) is None and lookup(0) is None


# -- interconnect --------------------------------------------------------------------------

PIX, PXB, PHB = pynvml.NVML_TOPOLOGY_SINGLE, pynvml.NVML_TOPOLOGY_MULTIPLE, pynvml.NVML_TOPOLOGY_HOSTBRIDGE
NODE, SYS = pynvml.NVML_TOPOLOGY_NODE, pynvml.NVML_TOPOLOGY_SYSTEM


def bus(i: int) -> str:
    return gpu(i).bus_id


def links_of(g: Gpu) -> list[tuple[int, int, Level]]:
    return [(k.peer_index, k.nvlinks, k.level) for k in g.links]


def two_quads() -> tuple[list[FakeGpu], dict]:
    """Eight GPUs: 0-3 and 4-7 each fully NVLinked (4 links a pair, plus an idle link), none between
    the quads; PCIe pairs (0,1), (2,3), ... behind one switch, a quad on one NUMA node, SYSTEM across."""
    gpus = []
    for i in range(8):
        quad = range(4 * (i // 4), 4 * (i // 4) + 4)
        links = [link for peer in quad if peer != i for link in links_to(bus(peer), 4)]
        gpus.append(gpu(i, nvlinks=links + [FakeNvLink(bus(quad[0] ^ 1), active=False)]))
    topology = {(i, j): PIX if i // 2 == j // 2 else NODE if i // 4 == j // 4 else SYS
                for i in range(8) for j in range(i + 1, 8)}
    return gpus, topology


def test_eight_gpus_in_two_nvlink_quads(tmp_path):
    gpus, topology = two_quads()
    got = collector(tmp_path, make_fake_nvml(gpus=gpus, topology=topology)).collect()
    assert links_of(got[0]) == [(1, 4, Level.SINGLE), (2, 4, Level.NODE), (3, 4, Level.NODE),
                                (4, 0, Level.SYSTEM), (5, 0, Level.SYSTEM), (6, 0, Level.SYSTEM), (7, 0, Level.SYSTEM)]
    assert links_of(got[6]) == [(0, 0, Level.SYSTEM), (1, 0, Level.SYSTEM), (2, 0, Level.SYSTEM), (3, 0, Level.SYSTEM),
                                (4, 4, Level.NODE), (5, 4, Level.NODE), (7, 4, Level.SINGLE)]
    for g in got:
        assert [k.peer_index for k in g.links] == [i for i in range(8) if i != g.index]
        assert sum(k.nvlinks for k in g.links) == 12 and g.healthy
    for a in got:  # symmetric
        for k in a.links:
            (back,) = [b for b in got[k.peer_index].links if b.peer_index == a.index]
            assert (back.nvlinks, back.level) == (k.nvlinks, k.level)


def test_pcie_only_node_has_levels_and_no_nvlinks(tmp_path):
    nvml = make_fake_nvml(gpus=[gpu(i) for i in range(3)], topology={(0, 1): PHB, (0, 2): SYS, (1, 2): SYS})
    got = collector(tmp_path, nvml).collect()
    assert [links_of(g) for g in got] == [
        [(1, 0, Level.HOSTBRIDGE), (2, 0, Level.SYSTEM)],
        [(0, 0, Level.HOSTBRIDGE), (2, 0, Level.SYSTEM)],
        [(0, 0, Level.SYSTEM), (1, 0, Level.SYSTEM)]]
    assert all(g.healthy for g in got)
    assert "nvmlDeviceGetNvLinkRemotePciInfo" not in nvml.calls, "no link is active, none is followed"


def test_a_gpu_without_nvlink_beside_an_nvlinked_pair(tmp_path):
    gpus = [gpu(0, nvlinks=links_to(bus(1), 2)), gpu(1, nvlinks=links_to(bus(0), 2)), gpu(2, nvlinks=NOT_SUPPORTED)]
    got = collector(tmp_path, make_fake_nvml(gpus=gpus, topology={(0, 1): PXB, (0, 2): NODE, (1, 2): NODE})).collect()
    assert links_of(got[0]) == [(1, 2, Level.MULTIPLE), (2, 0, Level.NODE)]
    assert links_of(got[2]) == [(0, 0, Level.NODE), (1, 0, Level.NODE)]
    assert all(g.healthy for g in got)


def test_a_single_gpu_has_no_links(tmp_path):
    (g,) = collector(tmp_path, make_fake_nvml(gpus=[gpu(0, nvlinks=switch_links(18))])).collect()
    assert g.links == []


def test_nvswitch_gpus_reach_every_other_gpu(tmp_path):
    gpus = [gpu(i, nvlinks=switch_links(18)) for i in range(4)]
    gpus[3].nvlinks[5].active = gpus[3].nvlinks[6].active = False  # two links down on GPU 3
    got = collector(tmp_path, make_fake_nvml(gpus=gpus, topology={(0, 1): NODE, (2, 3): NODE})).collect()
    assert links_of(got[0]) == [(1, 18, Level.NODE), (2, 18, Level.SYSTEM), (3, 16, Level.SYSTEM)]
    assert links_of(got[3]) == [(0, 16, Level.SYSTEM), (1, 16, Level.SYSTEM), (2, 16, Level.NODE)]


@pytest.mark.parametrize("error", [pynvml.NVMLError_NotSupported, pynvml.NVMLError_FunctionNotFound])
def test_nvswitch_recognised_without_the_remote_device_type(tmp_path, error):
    """An older driver cannot say what is at the far end: a far end that is not one of our GPUs is a switch."""
    gpus = [gpu(i, nvlinks=switch_links(12)) for i in range(2)]
    failing = {i: {"nvmlDeviceGetNvLinkRemoteDeviceType": error} for i in range(2)}
    got = collector(tmp_path, make_fake_nvml(gpus=gpus, failing=failing)).collect()
    assert links_of(got[0]) == [(1, 12, Level.SYSTEM)] and all(g.healthy for g in got)


def test_a_link_to_a_gpu_we_do_not_see_is_not_counted(tmp_path):
    hidden = "00000000:99:00.0"
    gpus = [gpu(0, nvlinks=links_to(bus(1), 2) + links_to(hidden, 3)), gpu(1, nvlinks=links_to(bus(0), 2))]
    got = collector(tmp_path, make_fake_nvml(gpus=gpus)).collect()
    assert links_of(got[0]) == [(1, 2, Level.SYSTEM)]


def test_remote_bus_ids_as_bytes(tmp_path):
    gpus = [gpu(0, nvlinks=links_to(bus(1), 6)), gpu(1, nvlinks=links_to(bus(0), 6))]
    got = collector(tmp_path, make_fake_nvml(gpus=gpus, bytes_strings=True)).collect()
    assert links_of(got[1]) == [(0, 6, Level.SYSTEM)]


def test_topology_is_read_once_and_again_when_the_devices_change(tmp_path):
    gpus, topology = two_quads()
    nvml = make_fake_nvml(gpus=gpus, topology=topology)
    c = collector(tmp_path, nvml)
    first = c.collect()
    reads = nvml.calls.count("nvmlDeviceGetTopologyCommonAncestor"), nvml.calls.count("nvmlDeviceGetNvLinkState")
    assert reads == (28, 8 * pynvml.NVML_NVLINK_MAX_LINKS)
    assert c.collect() == first
    again = nvml.calls.count("nvmlDeviceGetTopologyCommonAncestor"), nvml.calls.count("nvmlDeviceGetNvLinkState")
    assert again == reads, "static: not read per sample"
    first[0].links[0].nvlinks = 99
    assert c.collect()[0].links[0].nvlinks == 4, "a report's links are its own, not the cache"
    nvml.gpus = nvml.gpus[:4]  # half the board went away
    got = c.collect()
    assert nvml.calls.count("nvmlDeviceGetTopologyCommonAncestor") == 28 + 6
    assert links_of(got[0]) == [(1, 4, Level.SINGLE), (2, 4, Level.NODE), (3, 4, Level.NODE)]


def test_topology_is_read_again_after_close(tmp_path):
    nvml = make_fake_nvml(gpus=[gpu(0), gpu(1)])
    c = collector(tmp_path, nvml)
    c.collect()
    c.close()
    c.collect()
    assert nvml.calls.count("nvmlDeviceGetTopologyCommonAncestor") == 2, "handles of a closed session are not reused"


def test_common_ancestor_failure_is_unknown_and_warned_once(tmp_path, caplog):
    nvml = make_fake_nvml(gpus=[gpu(i) for i in range(3)], topology={(0, 1): pynvml.NVMLError_Unknown, (1, 2): PIX})
    c = collector(tmp_path, nvml)
    got = c.collect()
    c.collect()
    assert links_of(got[0]) == [(1, 0, Level.UNKNOWN), (2, 0, Level.SYSTEM)]
    assert links_of(got[1]) == [(0, 0, Level.UNKNOWN), (2, 0, Level.SINGLE)]
    assert all(g.healthy for g in got), "interconnect errors are not device faults"
    (warning,) = messages(caplog, logging.WARNING)
    assert "GPUs 0 and 1" in warning and "nvmlDeviceGetTopologyCommonAncestor" in warning


def test_topology_not_supported_is_unknown_without_a_warning(tmp_path, caplog):
    """As for GPUs passed through to a VM (seen on an H100 VM: NotSupported even for a GPU with itself)."""
    nvml = make_fake_nvml(gpus=[gpu(0), gpu(1)], topology={(0, 1): pynvml.NVMLError_NotSupported})
    got = collector(tmp_path, nvml).collect()
    assert links_of(got[0]) == [(1, 0, Level.UNKNOWN)] and messages(caplog, logging.WARNING) == []


def test_an_nvml_level_we_do_not_know_is_unknown(tmp_path, caplog):
    (a, _) = collector(tmp_path, make_fake_nvml(gpus=[gpu(0), gpu(1)], topology={(0, 1): 35})).collect()
    assert links_of(a) == [(1, 0, Level.UNKNOWN)]
    assert "35" in messages(caplog, logging.WARNING)[0]


def test_a_failing_nvlink_read_counts_from_the_other_end(tmp_path, caplog):
    gpus = [gpu(0, nvlinks=links_to(bus(1), 4)), gpu(1, nvlinks=links_to(bus(0), 4))]
    nvml = make_fake_nvml(gpus=gpus, failing={0: {"nvmlDeviceGetNvLinkRemotePciInfo": pynvml.NVMLError_Unknown}})
    got = collector(tmp_path, nvml).collect()
    assert links_of(got[0]) == [(1, 4, Level.SYSTEM)] and all(g.healthy for g in got)
    (warning,) = messages(caplog, logging.WARNING)
    assert "GPU 0" in warning and "NVLink 0" in warning


def test_links_to_a_lost_gpu_are_unknown_and_it_is_not_asked(tmp_path):
    gpus = [gpu(i, nvlinks=links_to(bus(1 - i), 4)) for i in range(2)] + [gpu(2)]
    nvml = make_fake_nvml(gpus=gpus, topology={(0, 1): PIX, (0, 2): PIX},
                          failing={1: {"nvmlDeviceGetMemoryInfo": pynvml.NVMLError_GpuIsLost}})
    got = collector(tmp_path, nvml).collect()
    assert not got[1].healthy and got[0].healthy
    assert links_of(got[0]) == [(1, 0, Level.UNKNOWN), (2, 0, Level.SINGLE)], "its bus id was never read"
    assert links_of(got[1]) == [(0, 0, Level.UNKNOWN), (2, 0, Level.UNKNOWN)]
    assert nvml.calls.count("nvmlDeviceGetNvLinkState") == 2 * pynvml.NVML_NVLINK_MAX_LINKS, "GPUs 0 and 2 only"
    assert nvml.calls.count("nvmlDeviceGetTopologyCommonAncestor") == 1, "only the pair (0, 2)"


def test_links_pass_the_schedulers_report_check(tmp_path):
    from proto.model import Devices, Identity, NodeReport
    from scheduler.api.nodereport import check_report

    gpus, topology = two_quads()
    got = collector(tmp_path, make_fake_nvml(gpus=gpus, topology=topology)).collect()
    report = NodeReport(identity=Identity("n1", sample_time_ns=1), devices=Devices(gpus=got))
    assert check_report(report, now_ns=1, capacity_checked=True) is None
    got[2].links[1].peer_index = 2
    assert "devices.gpus[2].links[1].peer_index" in check_report(report, now_ns=1, capacity_checked=True)


# -- the fake stays shaped like the real module ---------------------------------------------


def test_fake_functions_match_real_pynvml_signatures():
    fake = make_fake_nvml()
    names = [n for n in dir(fake) if n.startswith("nvml")]
    assert len(names) >= 12
    for name in names:
        real = inspect.signature(getattr(pynvml, name))
        assert list(inspect.signature(getattr(fake, name)).parameters) == list(real.parameters), name


def test_fake_errors_are_the_real_classes():
    fake = make_fake_nvml()
    assert fake.NVMLError_GpuIsLost is pynvml.NVMLError_GpuIsLost
    assert type(fake.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)) is pynvml.NVMLError_NotSupported
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fake.nvmlDeviceGetCount()
