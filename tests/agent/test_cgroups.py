"""cgroup backends, kubelet layouts and the executor, on fixture trees for v1 and v2, cgroupfs and systemd."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agent.cgroups.backend import V1Backend, V2Backend, detect_backend, shares_to_weight
from agent.cgroups.executor import Executor, order
from agent.cgroups.layout import FixedLayout, KubeletLayout, container_id, detect_layout
from agent.intents import CgroupWrite
from hack.lib.cgroup_fixtures import FakePod, make_tree, pod_dir, set_usage

UID = "3f1c2a6e-6a1b-4d2e-9c1a-0d9c8b7a6f5e"
VARIANTS = [(v, d, r) for v in (1, 2) for d in ("cgroupfs", "systemd") for r in ("containerd", "crio", "docker")]


@pytest.mark.parametrize("version,driver,runtime", VARIANTS, ids=[f"v{v}-{d}-{r}" for v, d, r in VARIANTS])
def test_layout_detection_and_pod_paths(tmp_path: Path, version: int, driver: str, runtime: str) -> None:
    pods = [FakePod(UID, qos) for qos in ("Guaranteed", "Burstable", "BestEffort")]
    pods = [FakePod(f"{UID[:-1]}{i}", p.qos_class) for i, p in enumerate(pods)]
    paths = make_tree(tmp_path, version=version, driver=driver, runtime=runtime, pods=pods)
    backend = detect_backend(paths)
    assert backend.version == version
    layout = detect_layout(backend)
    assert isinstance(layout, KubeletLayout) and layout.driver == driver
    found = {(p.uid, p.qos_class, p.path) for p in layout.discover()}
    assert found == {(p.uid, p.qos_class, pod_dir(version, driver, p)) for p in pods}
    for pod in pods:
        path = layout.pod_path(pod.uid, pod.qos_class)
        assert path == pod_dir(version, driver, pod) and backend.exists(path)
        containers = layout.containers(path)
        assert len(containers) == 1 and container_id(containers[0].rsplit("/", 1)[1]) == pod.containers[0]
    assert layout.offline_parent.endswith("besteffort" if driver == "cgroupfs" else "kubepods-besteffort.slice")


def test_no_kubelet_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "cpu").mkdir()
    with pytest.raises(FileNotFoundError, match="no kubepods cgroup"):
        detect_layout(detect_backend(make_tree.__globals__["HostPaths"](cgroup=tmp_path)))


KNOBS = [
    # knob, value, v1 file and text, v2 file and text
    ("cpu.quota", 1500, "cpu/cpu.cfs_quota_us", "150000", "cpu.max", "150000 100000"),
    ("cpu.quota", None, "cpu/cpu.cfs_quota_us", "-1", "cpu.max", "max 100000"),
    ("cpu.idle", 1, "cpu/cpu.idle", "1", "cpu.idle", "1"),
    ("cpu.shares", 2, "cpu/cpu.shares", "2", "cpu.weight", "1"),
    ("cpu.burst", 50000, "cpu/cpu.cfs_burst_us", "50000", "cpu.max.burst", "50000"),
    ("memory.limit", 2**30, "memory/memory.limit_in_bytes", str(2**30), "memory.max", str(2**30)),
    ("memory.limit", None, "memory/memory.limit_in_bytes", "-1", "memory.max", "max"),
    ("cpuset.cpus", "0-3", "cpuset/cpuset.cpus", "0-3", "cpuset.cpus", "0-3"),
    ("cpuset.cpus", "0-3,8", "cpuset/cpuset.cpus", "0-3,8", "cpuset.cpus", "0-3,8"),
    ("cpuset.mems", "1", "cpuset/cpuset.mems", "1", "cpuset.mems", "1"),
]


@pytest.mark.parametrize("knob,value,v1file,v1text,v2file,v2text", KNOBS,
                         ids=[f"{k[0]}={k[1]}" for k in KNOBS])
def test_knobs_map_to_each_versions_file(tmp_path: Path, knob, value, v1file, v1text, v2file, v2text) -> None:
    for version, file, text in ((1, v1file, v1text), (2, v2file, v2text)):
        root = tmp_path / f"v{version}"
        paths = make_tree(root, version=version, pods=[FakePod(UID)])
        backend = detect_backend(paths)
        rel = pod_dir(version, "cgroupfs", FakePod(UID))
        backend.write(rel, knob, value)
        ctl, _, name = file.rpartition("/")
        written = (root / ctl / rel / name) if version == 1 else (root / rel / file)
        assert written.read_text().strip() == text
        assert backend.read(rel, knob) == value


@pytest.mark.parametrize("version", [1, 2])
def test_cpusets_are_written_and_compared_in_the_kernels_list_format(tmp_path: Path, version: int) -> None:
    paths = make_tree(tmp_path, version=version, pods=[FakePod(UID)])
    backend = detect_backend(paths)
    rel = pod_dir(version, "cgroupfs", FakePod(UID))
    backend.write(rel, "cpuset.cpus", [8, 0, 1, 2, 3])
    backend.write(rel, "cpuset.mems", "0,1")
    file = (tmp_path / "cpuset" / rel) if version == 1 else (tmp_path / rel)
    assert (file / "cpuset.cpus").read_text() == "0-3,8" and (file / "cpuset.mems").read_text() == "0-1"
    (file / "cpuset.cpus").write_text("0-3,8\n")  # as the kernel shows it
    executor = Executor(backend)
    assert executor.apply([CgroupWrite(rel, "cpuset.cpus", "0,1,2,3,8"), CgroupWrite(rel, "cpuset.mems", [1, 0])]) == []
    assert [(c.old, c.new) for c in executor.apply([CgroupWrite(rel, "cpuset.cpus", "4-5")])] == [("0-3,8", "4-5")]
    with pytest.raises(ValueError):
        backend.write(rel, "cpuset.cpus", "3-1")


def test_v2_shares_round_trip_through_weights(tmp_path: Path) -> None:
    assert shares_to_weight(2) == 1 and shares_to_weight(262144) == 10000 and shares_to_weight(1024) == 39
    paths = make_tree(tmp_path, version=2, pods=[FakePod(UID)])
    backend = V2Backend(paths)
    rel = pod_dir(2, "cgroupfs", FakePod(UID))
    executor = Executor(backend)
    assert len(executor.apply([CgroupWrite(rel, "cpu.shares", 1024)])) == 1
    assert executor.apply([CgroupWrite(rel, "cpu.shares", 1024)]) == []  # the same in weight terms: no write


def test_v1_knobs_go_through_cgroupspy_nodes_and_counters_are_plain_reads(tmp_path: Path) -> None:
    paths = make_tree(tmp_path, version=1, pods=[FakePod(UID, cpu_usage_ns=5_000_000, memory_bytes=7 * 2**20)])
    backend = V1Backend(paths)
    rel = pod_dir(1, "cgroupfs", FakePod(UID))
    node = backend._node(rel, "cpu")
    assert node.controller.__class__.__name__ == "CpuController" and node.controller.shares == 1024
    assert backend._node(rel, "cpu") is node  # kept, not rebuilt per read
    assert backend.cpu_usage_ns(rel) == 5_000_000 and backend.memory_usage(rel) == 7 * 2**20
    stat = tmp_path / "memory" / rel / "memory.stat"
    stat.write_text("cache 4096\ninactive_file 1048576\ntotal_cache 8192\ntotal_inactive_file 2097152\n")
    assert backend.memory_usage(rel) == 5 * 2**20  # working set: less the hierarchy's inactive file pages
    (tmp_path / "cpuacct" / rel / "cpuacct.usage").write_text("6000000\n")
    assert backend.cpu_usage_ns(rel) == 6_000_000  # the cached path reads the file afresh
    import shutil
    shutil.rmtree(tmp_path / "cpuacct" / rel)
    # the counter files are kept open (the kernel's read ENODEV once their cgroup is removed: see
    # tests/e2e/test_cgroups.py); a pod that leaves the inventory has them closed
    backend.forget(rel)
    with pytest.raises(FileNotFoundError):
        backend.cpu_usage_ns(rel)  # the pod left: the caller skips it


def test_executor_writes_only_differences_parents_first_and_logs(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="agent.cgroups.executor")
    paths = make_tree(tmp_path, version=1, pods=[FakePod(UID, "BestEffort")])
    backend = V1Backend(paths)
    child = pod_dir(1, "cgroupfs", FakePod(UID, "BestEffort"))
    writes = [CgroupWrite(child, "cpu.quota", 500), CgroupWrite("kubepods/besteffort", "cpu.quota", 1000, "test"),
              CgroupWrite(child, "cpu.shares", 1024)]  # already 1024
    assert [w.path for w in order(writes)] == ["kubepods/besteffort", child, child]
    executor = Executor(backend)
    changes = executor.apply(writes)
    assert [(c.path, c.knob, c.old, c.new) for c in changes] == [
        ("kubepods/besteffort", "cpu.quota", None, 1000), (child, "cpu.quota", None, 500)]
    assert "kubepods/besteffort cpu.quota: None -> 1000 (test)" in caplog.text
    assert executor.apply(writes) == []  # nothing differs any more
    assert list(executor.audit)[-1].new == 500


def test_executor_skips_a_vanished_pod_and_counts_real_errors(tmp_path: Path) -> None:
    paths = make_tree(tmp_path, version=2, pods=[FakePod(UID)])
    backend = V2Backend(paths)
    errors = []
    executor = Executor(backend, on_error=errors.append)
    rel = pod_dir(2, "cgroupfs", FakePod(UID))
    (tmp_path / rel / "cpu.idle").unlink()
    (tmp_path / rel / "cpu.idle").mkdir()  # reading a directory fails: a real error, not a vanished pod
    changes = executor.apply([CgroupWrite("kubepods/burstable/podgone", "cpu.idle", 1),
                              CgroupWrite(rel, "cpu.idle", 1), CgroupWrite(rel, "cpu.quota", 700)])
    assert [c.knob for c in changes] == ["cpu.quota"] and errors == ["EISDIR"]


def test_unsupported_knob_is_reported_not_fatal(tmp_path: Path) -> None:
    paths = make_tree(tmp_path, version=1, pods=[FakePod(UID)])
    errors = []
    executor = Executor(V1Backend(paths), on_error=errors.append)
    executor.apply([CgroupWrite(pod_dir(1, "cgroupfs", FakePod(UID)), "memory.min", 10)])
    assert errors == ["unsupported"]


def test_fixed_layout_for_the_embedded_runtime(tmp_path: Path) -> None:
    for name in ("cpu", "cpuacct", "memory"):
        for sub in ("scoria/online/poda", "scoria/offline/podb"):
            (tmp_path / name / sub).mkdir(parents=True)
    backend = V1Backend(make_tree.__globals__["HostPaths"](cgroup=tmp_path))
    layout = FixedLayout(backend, "/scoria/")
    assert layout.offline_parent == "scoria/offline" and layout.pod_path("x", "BestEffort") == "scoria/offline/podx"
    assert sorted((p.uid, p.qos_class) for p in layout.discover()) == [("a", "Burstable"), ("b", "BestEffort")]


@pytest.mark.parametrize("version", [1, 2])
def test_the_fast_loops_counter_reader_keeps_its_file_open_and_reads_it_afresh(tmp_path: Path, version: int) -> None:
    paths = make_tree(tmp_path, version=version, driver="systemd" if version == 2 else "cgroupfs",
                      pods=[FakePod(UID, cpu_usage_ns=5_000_000)])
    backend = V1Backend(paths) if version == 1 else V2Backend(paths)
    rel = pod_dir(version, "systemd" if version == 2 else "cgroupfs", FakePod(UID))
    read = backend.cpu_usage_reader(rel)
    assert read() == 5_000_000
    set_usage(tmp_path, version, rel, 7_000_000, 0)  # rewritten in place, as the kernel's files change
    assert read() == 7_000_000
    with pytest.raises(FileNotFoundError):
        backend.cpu_usage_reader("kubepods/gone")()
