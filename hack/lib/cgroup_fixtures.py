"""cgroup trees as the kubelet lays them out, written into tmp_path for tests and benchmarks.

``make_tree(root, version=1|2, driver="cgroupfs"|"systemd", runtime="containerd"|"crio"|"docker", pods=[...])``
writes the files the agent reads and writes, with the kernel's formats and
defaults, and returns ``HostPaths`` whose cgroup root is ``root``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agent.cgroups.tree import V1_CONTROLLERS
from agent.hostpaths import HostPaths

V1_UNLIMITED_MEMORY = "9223372036854771712"


@dataclass
class FakePod:
    uid: str
    qos_class: str = "Burstable"
    containers: tuple[str, ...] = ("0123456789abcdef0123456789abcdef",)
    cpu_usage_ns: int = 0
    memory_bytes: int = 64 * 2**20


# The kubelet's QoS-class cgroups and the prefix of its systemd pod slices, per driver.
_QOS_DIRS = {
    "cgroupfs": {"Guaranteed": "kubepods", "Burstable": "kubepods/burstable", "BestEffort": "kubepods/besteffort"},
    "systemd": {"Guaranteed": "kubepods.slice", "Burstable": "kubepods.slice/kubepods-burstable.slice",
                "BestEffort": "kubepods.slice/kubepods-besteffort.slice"},
}
_SLICE_PREFIX = {"Guaranteed": "kubepods", "Burstable": "kubepods-burstable", "BestEffort": "kubepods-besteffort"}


def qos_dir(driver: str, qos_class: str) -> str:
    """The cgroup holding the pods of ``qos_class`` (Guaranteed: the kubepods root itself)."""
    return _QOS_DIRS[driver][qos_class]


def pod_dir(version: int, driver: str, pod: FakePod) -> str:
    parent = qos_dir(driver, pod.qos_class)
    if driver == "cgroupfs":
        return f"{parent}/pod{pod.uid}"
    return f"{parent}/{_SLICE_PREFIX[pod.qos_class]}-pod{pod.uid.replace('-', '_')}.slice"


def container_dir(driver: str, runtime: str, cid: str) -> str:
    if driver == "cgroupfs":
        return cid
    return {"containerd": f"cri-containerd-{cid}.scope", "crio": f"crio-{cid}.scope",
            "docker": f"docker-{cid}.scope"}[runtime]


def _v1_files(path: Path, controller: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    files = {
        "cpu": {"cpu.shares": "1024", "cpu.cfs_quota_us": "-1", "cpu.cfs_period_us": "100000", "cpu.idle": "0",
                "cpu.cfs_burst_us": "0"},
        "cpuacct": {"cpuacct.usage": "0"},
        "memory": {"memory.limit_in_bytes": V1_UNLIMITED_MEMORY, "memory.usage_in_bytes": "0",
                   "memory.stat": "total_inactive_file 0\ninactive_file 0\n"},
        "cpuset": {"cpuset.cpus": "0-3", "cpuset.mems": "0"},
    }[controller]
    for name, value in files.items():
        if not (path / name).exists():
            (path / name).write_text(value + "\n")


def _v2_files(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    files = {"cpu.weight": "100", "cpu.max": "max 100000", "cpu.max.burst": "0", "cpu.idle": "0",
             "cpu.stat": "usage_usec 0\nuser_usec 0\nsystem_usec 0\n",
             "memory.max": "max", "memory.min": "0", "memory.low": "0", "memory.high": "max",
             "memory.current": "0", "memory.stat": "inactive_file 0\n",
             "cpuset.cpus": "", "cpuset.mems": "", "cpu.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
                                                                  "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"}
    for name, value in files.items():
        if not (path / name).exists():
            (path / name).write_text(value + "\n")


def make_tree(root: Path, *, version: int = 1, driver: str = "cgroupfs", runtime: str = "containerd",
              pods: list[FakePod] = ()) -> HostPaths:
    classes = [qos_dir(driver, q) for q in ("Guaranteed", "Burstable", "BestEffort")]
    if version == 2:
        (root / "cgroup.controllers").parent.mkdir(parents=True, exist_ok=True)
        (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    dirs = list(classes)
    for pod in pods:
        p = pod_dir(version, driver, pod)
        dirs.append(p)
        dirs.extend(f"{p}/{container_dir(driver, runtime, c)}" for c in pod.containers)
    for rel in dirs:
        if version == 1:
            for controller in V1_CONTROLLERS:
                _v1_files(root / controller / rel, controller)
        else:
            _v2_files(root / rel)
    for pod in pods:
        set_usage(root, version, pod_dir(version, driver, pod), pod.cpu_usage_ns, pod.memory_bytes)
    return HostPaths(sys=root / "_sys", proc=root / "_proc", cgroup=root)


def make_groups(root: Path, *, version: int, groups: list[str]) -> HostPaths:
    """Cgroups at the paths ``groups`` (a layout of our own, ``--cgroup-parent``), with the kernel's files."""
    if version == 2:
        root.mkdir(parents=True, exist_ok=True)
        (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    for rel in groups:
        parts = rel.strip("/").split("/")
        for depth in range(1, len(parts) + 1):
            sub = "/".join(parts[:depth])
            if version == 1:
                for controller in V1_CONTROLLERS:
                    _v1_files(root / controller / sub, controller)
            else:
                _v2_files(root / sub)
    return HostPaths(sys=root / "_sys", proc=root / "_proc", cgroup=root)


def set_usage(root: Path, version: int, rel: str, cpu_ns: int, memory: int) -> None:
    """Overwrite a cgroup's usage counters (as if time had passed)."""
    if version == 1:
        (root / "cpuacct" / rel / "cpuacct.usage").write_text(f"{cpu_ns}\n")
        (root / "memory" / rel / "memory.usage_in_bytes").write_text(f"{memory}\n")
    else:
        (root / rel / "cpu.stat").write_text(f"usage_usec {cpu_ns // 1000}\nuser_usec 0\nsystem_usec 0\n")
        (root / rel / "memory.current").write_text(f"{memory}\n")


def make_proc(root: Path, *, busy_ticks: int = 0, idle_ticks: int = 0, mem_total_kib: int = 16 * 2**20,
              mem_available_kib: int = 12 * 2**20, boot_id: str = "b00710d0-0000-4000-8000-000000000001") -> Path:
    proc = root
    (proc / "pressure").mkdir(parents=True, exist_ok=True)
    (proc / "sys" / "kernel" / "random").mkdir(parents=True, exist_ok=True)
    set_cpu_ticks(proc, busy_ticks, idle_ticks)
    (proc / "meminfo").write_text(f"MemTotal:       {mem_total_kib} kB\nMemFree:        {mem_available_kib // 2} kB\n"
                                  f"MemAvailable:   {mem_available_kib} kB\nCached:         1024 kB\n")
    for name in ("cpu", "memory", "io"):
        (proc / "pressure" / name).write_text("some avg10=1.50 avg60=0.75 avg300=0.10 total=123456\n"
                                              "full avg10=0.25 avg60=0.10 avg300=0.00 total=2345\n")
    (proc / "sys" / "kernel" / "random" / "boot_id").write_text(boot_id + "\n")
    return proc


def set_cpu_ticks(proc: Path, busy: int, idle: int) -> None:
    """/proc/stat's first line: user nice system idle iowait irq softirq steal guest guest_nice."""
    (proc / "stat").write_text(f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 {busy} 0 0 {idle} 0 0 0 0 0 0\n")
