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

Interconnect (``Gpu.links``, one entry per other GPU, by peer index) is static, so it is read
once and again only when the device set changes (another UUID or bus id at an index):

* ``level`` is ``nvmlDeviceGetTopologyCommonAncestor`` mapped onto :class:`GpuTopologyLevel`
  (``NotSupported`` — as for GPUs passed through to a VM — is UNKNOWN; another error, or a
  value NVML did not document, is UNKNOWN and warned about once);
* ``nvlinks`` counts the GPU's active links (``nvmlDeviceGetNvLinkState``) whose far end
  (``nvmlDeviceGetNvLinkRemotePciInfo``) is the peer's PCI bus id, taking the larger count
  of the two ends.  ``NotSupported`` (a GPU without NVLink) and ``InvalidArgument`` (a link
  number the GPU does not have) mean no NVLink there, not a fault.
* NVSwitch: a link whose far end is an NVSwitch (``nvmlDeviceGetNvLinkRemoteDeviceType`` says
  SWITCH; where NVML cannot say, any far end that is not a GPU of this node) reaches every
  GPU on the same switches.  A pair of switch-attached GPUs is given the smaller of their two
  switch-link counts, on top of any direct links — what ``nvidia-smi topo -m`` shows as
  ``NV18`` between every pair of an HGX H100 board.  This assumes one NVLink fabric per node
  (no Fabric Manager partitions splitting the node's GPUs).

Interconnect errors never mark a device unhealthy: the sample's own calls decide health.
"""

from __future__ import annotations

import importlib
import logging
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from agent.hostpaths import HostPaths
from proto.model import DeviceProcess, Gpu, GpuLink, GpuTopologyLevel, MigMode

PodOfPid = Callable[[int], tuple[str, str] | None]

NO_DRIVER_MESSAGE = "no NVIDIA driver: this node reports no GPUs"
_NO_DRIVER_ERRORS = ("NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded")
_PROCESS_CALLS = ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses")
_MAX_REMEMBERED_WARNINGS = 256
# NVML's nvmlGpuTopologyLevel_t constants (INTERNAL=0 ... SYSTEM=50) -> ours; NODE is also NVML_TOPOLOGY_CPU.
_LEVELS = {"NVML_TOPOLOGY_INTERNAL": GpuTopologyLevel.INTERNAL, "NVML_TOPOLOGY_SINGLE": GpuTopologyLevel.SINGLE,
           "NVML_TOPOLOGY_MULTIPLE": GpuTopologyLevel.MULTIPLE, "NVML_TOPOLOGY_HOSTBRIDGE": GpuTopologyLevel.HOSTBRIDGE,
           "NVML_TOPOLOGY_NODE": GpuTopologyLevel.NODE, "NVML_TOPOLOGY_SYSTEM": GpuTopologyLevel.SYSTEM}


class _GpuLost(Exception):
    """Stop reading a device: every further call on it would fail the same way."""


class _NeverRaised(Exception):
    """Stands in for an error class that this pynvml release does not have."""


@dataclass
class _Device:
    """One sample of a device, with what reading its interconnect needs."""

    gpu: Gpu
    handle: Any = None          # None once lost, or when NVML gave none
    bus_id: str | None = None   # sysfs form (0000:3b:00.0)


@dataclass(frozen=True)
class _Nvlinks:
    """A GPU's active NVLinks: how many reach each peer GPU directly, and how many an NVSwitch."""

    to_gpu: Counter
    to_switch: int = 0


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
        self._links_key: tuple | None = None  # the device set the cached links were read for
        self._links: dict[int, list[GpuLink]] = {}

    def collect(self) -> list[Gpu]:
        if not self._ensure_initialised():
            return []
        nvml = self._nvml
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as e:
            self._warn_once(f"nvmlDeviceGetCount failed: {e}; reporting no GPUs")
            return []
        devices = [self._read_device(index) for index in range(count)]
        self._attach_links(devices)
        return [d.gpu for d in devices]

    def close(self) -> None:
        if self._nvml is None:
            return
        self._links_key, self._links = None, {}  # handles die with the NVML session
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

    def _read_device(self, index: int) -> _Device:
        device = _Device(Gpu(index=index, uuid=""))
        failures: list[str] = []
        try:
            self._read_fields(device, index, failures)
        except _GpuLost:
            device.handle = None
        if failures:
            device.gpu.healthy = False
            device.gpu.health_detail = "; ".join(failures)
        return device

    def _read_fields(self, device: _Device, index: int, failures: list[str]) -> None:
        call, gpu = self._caller(failures), device.gpu
        handle = device.handle = call("nvmlDeviceGetHandleByIndex", index)
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
            device.bus_id = normalise_bus_id(getattr(pci, "busId", "") or getattr(pci, "busIdLegacy", ""))
            gpu.numa_node = self._numa_node(device.bus_id)
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
                raise _GpuLost from None  # recorded in failures; the caller stops reading this GPU
            except nvml.NVMLError as e:
                failures.append(f"{name} failed: {e}")
                return None
            except mismatch as e:  # pynvml and the driver's NVML differ in version: not the device's fault
                self._warn_once(f"{name}: {e}")
                return None

        return call

    def _numa_node(self, device: str | None) -> int:
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

    # -- interconnect (static: read once per device set) --------------------------------------

    def _attach_links(self, devices: list[_Device]) -> None:
        key = tuple((d.gpu.uuid, d.bus_id, d.handle is not None) for d in devices)
        if key != self._links_key:
            self._links, self._links_key = self._read_links(devices), key
        for d in devices:  # fresh objects per sample: a report never shares them with the cache
            d.gpu.links = [GpuLink(k.peer_index, k.nvlinks, k.level) for k in self._links.get(d.gpu.index, [])]

    def _read_links(self, devices: list[_Device]) -> dict[int, list[GpuLink]]:
        """Every GPU's link to every other: common ancestor level and NVLink count (see the module doc)."""
        levels = {getattr(self._nvml, name): level for name, level in _LEVELS.items() if hasattr(self._nvml, name)}
        gpu_at = {d.bus_id: d.gpu.index for d in devices if d.bus_id is not None}
        nvlinks = {d.gpu.index: self._nvlinks(d, gpu_at) for d in devices}
        links: dict[int, list[GpuLink]] = {d.gpu.index: [] for d in devices}
        for a, b in combinations(devices, 2):
            i, j = a.gpu.index, b.gpu.index
            ends_a, ends_b = nvlinks[i], nvlinks[j]
            count = max(ends_a.to_gpu[j], ends_b.to_gpu[i]) + min(ends_a.to_switch, ends_b.to_switch)
            level = self._common_ancestor(a, b, levels)
            links[i].append(GpuLink(j, count, level))
            links[j].append(GpuLink(i, count, level))
        return links

    def _common_ancestor(self, a: _Device, b: _Device, levels: dict[int, GpuTopologyLevel]) -> GpuTopologyLevel:
        if a.handle is None or b.handle is None:
            return GpuTopologyLevel.UNKNOWN
        nvml = self._nvml
        try:
            value = nvml.nvmlDeviceGetTopologyCommonAncestor(a.handle, b.handle)
        except nvml.NVMLError_NotSupported:  # not a fault: e.g. GPUs passed through to a VM
            return GpuTopologyLevel.UNKNOWN
        except nvml.NVMLError as e:
            self._warn_once(f"GPUs {a.gpu.index} and {b.gpu.index}: nvmlDeviceGetTopologyCommonAncestor failed: {e}; "
                            "their topology level is unknown")
            return GpuTopologyLevel.UNKNOWN
        level = levels.get(value)
        if level is None:
            self._warn_once(f"GPUs {a.gpu.index} and {b.gpu.index}: NVML topology level {value!r} is not one we know")
            return GpuTopologyLevel.UNKNOWN
        return level

    def _nvlinks(self, device: _Device, gpu_at: dict[str, int]) -> _Nvlinks:
        """Where this GPU's active NVLinks go; links NVML says it lacks are skipped, other errors end the walk."""
        to_gpu: Counter = Counter()
        to_switch = 0
        if device.handle is None:
            return _Nvlinks(to_gpu)
        nvml, index = self._nvml, device.gpu.index
        absent = (nvml.NVMLError_NotSupported, nvml.NVMLError_InvalidArgument)
        for link in range(nvml.NVML_NVLINK_MAX_LINKS):
            try:
                if nvml.nvmlDeviceGetNvLinkState(device.handle, link) != nvml.NVML_FEATURE_ENABLED:
                    continue
                remote = normalise_bus_id(nvml.nvmlDeviceGetNvLinkRemotePciInfo(device.handle, link).busId)
            except absent:
                continue
            except nvml.NVMLError as e:
                self._warn_once(f"GPU {index}: reading NVLink {link} failed: {e}; its NVLink count may be short")
                break
            peer = gpu_at.get(remote) if remote is not None else None
            if peer is not None and peer != index:
                to_gpu[peer] += 1
            elif peer is None and self._is_switch(device.handle, link):
                to_switch += 1
        return _Nvlinks(to_gpu, to_switch)

    def _is_switch(self, handle: Any, link: int) -> bool:
        """Whether the far end of ``link`` (not a GPU of this node) is an NVSwitch; if NVML cannot say, assume so."""
        nvml = self._nvml
        try:
            kind = nvml.nvmlDeviceGetNvLinkRemoteDeviceType(handle, link)
        except (AttributeError, nvml.NVMLError):  # an older pynvml or driver: only switches lead off the node's GPUs
            return True
        return kind not in (getattr(nvml, "NVML_NVLINK_DEVICE_TYPE_GPU", 0),
                            getattr(nvml, "NVML_NVLINK_DEVICE_TYPE_IBMNPU", 1))


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
