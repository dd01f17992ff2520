"""NVIDIA GPUs through NVML (the ``pynvml`` module of nvidia-ml-py).

NVML is initialised on first use and kept open until :meth:`GpuCollector.close`.  A node
without the driver (no ``libnvidia-ml.so.1``, driver not loaded, or no ``pynvml`` at all)
reports no GPUs, says so once at INFO, and tries again at most every ``retry_interval_s``,
since a driver may be installed later.

A call that fails on one device marks that device unhealthy, naming the call and the error,
and the other devices are reported normally.  ``NotSupported`` is not a fault: it leaves the
field at its default (a MIG-enabled GPU, for one, reports no utilisation of its own).

The NUMA node comes from sysfs, ``<sys>/bus/pci/devices/<bus id>/numa_node``.  Processes on a
GPU are mapped to pods by an injected ``pod_of_pid``; :func:`pod_of_pid_from_cgroup` is the
usual one, reading ``<proc>/<pid>/cgroup``.
"""

from __future__ import annotations

import importlib
import logging
import re
import time
from typing import Any, Callable

from agent.hostpaths import HostPaths
from proto.model import DeviceProcess, Gpu, MigMode

PodOfPid = Callable[[int], tuple[str, str] | None]

NO_DRIVER_MESSAGE = "no NVIDIA driver: this node reports no GPUs"
_NO_DRIVER_ERRORS = ("NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded")
_PROCESS_CALLS = ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses")
_MAX_REMEMBERED_WARNINGS = 256


class _GpuLost(Exception):
    """Stop reading a device: every further call on it would fail the same way."""


class _NeverRaised(Exception):
    """Stands in for an error class that this pynvml release does not have."""


class GpuCollector:
    def __init__(self, paths: HostPaths, nvml: Any = None, pod_of_pid: PodOfPid | None = None,
                 log: logging.Logger | None = None, *, retry_interval_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._paths = paths
        self._given_nvml = nvml
        self._pod_of_pid = pod_of_pid or (lambda pid: None)
        self._log = log or logging.getLogger(__name__)
        self._retry_interval_s = retry_interval_s
        self._clock = clock
        self._nvml: Any = None  # set once nvmlInit has succeeded
        self._last_attempt: float | None = None
        self._said_no_driver = False
        self._warned: set[str] = set()

    def collect(self) -> list[Gpu]:
        if not self._ensure_initialised():
            return []
        nvml = self._nvml
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as e:
            self._warn_once(f"nvmlDeviceGetCount failed: {e}; reporting no GPUs")
            return []
        return [self._read_device(index) for index in range(count)]

    def close(self) -> None:
        if self._nvml is None:
            return
        nvml, self._nvml = self._nvml, None
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError as e:
            self._log.debug("nvmlShutdown failed: %s", e)

    # -- initialisation ------------------------------------------------------------------

    def _ensure_initialised(self) -> bool:
        if self._nvml is not None:
            return True
        now = self._clock()
        if self._last_attempt is not None and now - self._last_attempt < self._retry_interval_s:
            return False
        self._last_attempt = now
        nvml = self._load_module()
        if nvml is None:
            self._no_driver("the pynvml module is not installed")
            return False
        try:
            nvml.nvmlInit()
        except tuple(getattr(nvml, name) for name in _NO_DRIVER_ERRORS) as e:
            self._no_driver(str(e))
            return False
        except nvml.NVMLError as e:
            self._warn_once(f"NVML initialisation failed: {e}; reporting no GPUs")
            return False
        if self._said_no_driver:
            self._log.info("NVIDIA driver found: reporting GPUs")
        self._nvml = nvml
        return True

    def _load_module(self) -> Any:
        if self._given_nvml is not None:
            return self._given_nvml
        try:
            return importlib.import_module("pynvml")
        except ImportError:
            return None

    def _no_driver(self, reason: str) -> None:
        if not self._said_no_driver:
            self._said_no_driver = True
            self._log.info("%s (%s)", NO_DRIVER_MESSAGE, reason)

    def _warn_once(self, message: str) -> None:
        if message in self._warned:
            return
        if len(self._warned) < _MAX_REMEMBERED_WARNINGS:
            self._warned.add(message)
        self._log.warning("%s", message)

    # -- one device ----------------------------------------------------------------------

    def _read_device(self, index: int) -> Gpu:
        gpu = Gpu(index=index, uuid="")
        failures: list[str] = []
        try:
            self._read_fields(gpu, index, failures)
        except _GpuLost:
            pass
        if failures:
            gpu.healthy = False
            gpu.health_detail = "; ".join(failures)
        return gpu

    def _read_fields(self, gpu: Gpu, index: int, failures: list[str]) -> None:
        call = self._caller(failures)
        handle = call("nvmlDeviceGetHandleByIndex", index)
        if handle is None:
            return
        gpu.uuid = _text(call("nvmlDeviceGetUUID", handle) or "")
        gpu.model = _text(call("nvmlDeviceGetName", handle) or "")
        memory = call("nvmlDeviceGetMemoryInfo", handle)
        if memory is not None:
            gpu.memory_total_bytes, gpu.memory_used_bytes = int(memory.total), int(memory.used)
        rates = call("nvmlDeviceGetUtilizationRates", handle)
        if rates is not None:
            gpu.gpu_utilization_percent = float(rates.gpu)
            gpu.memory_utilization_percent = float(rates.memory)
        pci = call("nvmlDeviceGetPciInfo", handle)
        if pci is not None:
            gpu.numa_node = self._numa_node(getattr(pci, "busId", "") or getattr(pci, "busIdLegacy", ""))
        gpu.mig_mode = self._mig_mode(call("nvmlDeviceGetMigMode", handle))
        gpu.processes = self._processes(call, handle)

    def _caller(self, failures: list[str]) -> Callable[..., Any]:
        """``call(name, *args)``: the NVML result, or None with the failure recorded."""
        nvml = self._nvml
        mismatch = getattr(nvml, "NVMLLibraryMismatchError", _NeverRaised)

        def call(name: str, *args: Any) -> Any:
            try:
                return getattr(nvml, name)(*args)
            except nvml.NVMLError_NotSupported:
                return None
            except nvml.NVMLError_GpuIsLost:
                failures.append(f"GPU is lost ({name})")
                raise _GpuLost
            except nvml.NVMLError as e:
                failures.append(f"{name} failed: {e}")
                return None
            except mismatch as e:  # pynvml and the driver's NVML differ in version: not the device's fault
                self._warn_once(f"{name}: {e}")
                return None

        return call

    def _numa_node(self, bus_id: str | bytes) -> int:
        device = normalise_bus_id(bus_id)
        if device is None:
            return -1
        node = self._paths.read_int(self._paths.sys / "bus" / "pci" / "devices" / device / "numa_node")
        return node if node is not None and node >= 0 else -1

    def _mig_mode(self, modes: Any) -> MigMode:
        if not modes:
            return MigMode.UNSUPPORTED
        current = modes[0]
        return MigMode.ENABLED if current == self._nvml.NVML_DEVICE_MIG_ENABLE else MigMode.DISABLED

    def _processes(self, call: Callable[..., Any], handle: Any) -> list[DeviceProcess]:
        """Compute and graphics processes, one entry per pid (a process may hold both kinds of context)."""
        by_pid: dict[int, DeviceProcess] = {}
        for name in _PROCESS_CALLS:
            for info in call(name, handle) or []:
                pid, used = int(info.pid), int(info.usedGpuMemory or 0)
                if pid in by_pid:
                    by_pid[pid].memory_bytes = max(by_pid[pid].memory_bytes, used)
                    continue
                pod_uid, container = self._pod_of_pid(pid) or ("", "")
                by_pid[pid] = DeviceProcess(pid=pid, memory_bytes=used, pod_uid=pod_uid, container=container)
        return list(by_pid.values())


def _text(value: str | bytes) -> str:
    """NVML strings are bytes in older pynvml releases and str in newer ones."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


_BUS_ID = re.compile(r"(?:([0-9a-f]+):)?([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])")


def normalise_bus_id(bus_id: str | bytes) -> str | None:
    """NVML's ``00000000:3B:00.0`` -> sysfs's ``0000:3b:00.0``; None when it is not a bus id."""
    match = _BUS_ID.fullmatch(_text(bus_id).strip().lower())
    if match is None:
        return None
    domain, bus, device, function = match.groups()
    return f"{int(domain or '0', 16):04x}:{bus}:{device}.{function}"


# kubelet's cgroup names: cgroupfs ".../kubepods[/burstable|/besteffort]/pod<uid>/<container id>"
# and systemd ".../kubepods[-burstable|-besteffort]-pod<uid with _>.slice/<runtime>-<id>.scope".
_CGROUPFS = re.compile(
    r"/kubepods(?:/(?:burstable|besteffort))?/pod([0-9a-fA-F-]+)"
    r"(?:/(?:cri-containerd-|crio-|docker-)?([0-9a-fA-F]+))?(?:/|$)")
_SYSTEMD = re.compile(
    r"kubepods(?:-(?:burstable|besteffort))?-pod([0-9a-fA-F_]+)\.slice"
    r"(?:/(?:cri-containerd|crio|docker)-([0-9a-fA-F]+)\.scope)?(?:/|$)")


def pod_of_pid_from_cgroup(paths: HostPaths) -> PodOfPid:
    """A ``pod_of_pid`` that reads ``<proc>/<pid>/cgroup``: (pod uid, container id) or None."""

    def pod_of_pid(pid: int) -> tuple[str, str] | None:
        if pid <= 0:
            return None
        text = paths.read(paths.proc / str(pid) / "cgroup")
        return parse_kubepods_cgroup(text) if text else None

    return pod_of_pid


def parse_kubepods_cgroup(text: str) -> tuple[str, str] | None:
    """The first kubelet pod in a ``/proc/<pid>/cgroup`` text (v1 or v2 lines); container "" if none."""
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        for pattern in (_SYSTEMD, _CGROUPFS):
            match = pattern.search(path)
            if match:
                return match.group(1).replace("_", "-").lower(), (match.group(2) or "").lower()
    return None
