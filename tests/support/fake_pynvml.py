"""A fake ``pynvml`` module for tests, shaped on nvidia-ml-py's real one.

The NVML_* constants, the NVMLError hierarchy (``NVMLError(15)`` is an
``NVMLError_GpuIsLost``) and ``NVMLLibraryMismatchError`` are the real module's own
objects, which exist without a driver, so ``except pynvml.NVMLError_NotSupported`` in
production code catches what this fake raises.  The functions have the real names and
return objects with the real attribute names: memory ``.total/.free/.used``, utilisation
``.gpu/.memory``, PCI info ``.busId`` (plus ``.busIdLegacy``, ``.domain``, ...), processes
``.pid/.usedGpuMemory/.gpuInstanceId/.computeInstanceId`` (``usedGpuMemory`` may be None),
MIG mode ``[current, pending]``.  Like the real module, every call before ``nvmlInit`` or
after ``nvmlShutdown`` raises ``NVMLError_Uninitialized``.

    nvml = make_fake_nvml(gpus=[FakeGpu(uuid="GPU-0")], failing={0: {"nvmlDeviceGetMemoryInfo": pynvml.NVMLError_Unknown}})

Interconnect, as NVML shows it: ``FakeGpu.nvlinks`` lists the GPU's NVLinks by link number
(``nvmlDeviceGetNvLinkState`` / ``...RemotePciInfo`` / ``...RemoteDeviceType``; a link number
past the list raises ``NVMLError_InvalidArgument`` as for links a GPU does not have, and
``nvlinks=None`` — a GPU without NVLink — raises ``NVMLError_NotSupported`` for every link).
``make_fake_nvml(topology=...)`` gives ``nvmlDeviceGetTopologyCommonAncestor`` per pair of
device indices (NVML_TOPOLOGY_* values; pairs not named are NVML_TOPOLOGY_SYSTEM).
:func:`links_to` and :func:`switch_links` build link lists.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any

import pynvml as _real

NOT_SUPPORTED = None  # FakeGpu.mig_mode: nvmlDeviceGetMigMode raises NVMLError_NotSupported


@dataclass
class FakeProcess:
    pid: int
    used_gpu_memory: int | None = 0  # None: NVML_VALUE_NOT_AVAILABLE (pynvml turns it into None)


@dataclass
class FakeNvLink:
    """One NVLink of a GPU: the PCI bus id and kind of the device at its other end."""

    remote_bus_id: str
    active: bool = True
    remote_type: int = _real.NVML_NVLINK_DEVICE_TYPE_GPU


NVSWITCH_BUS_IDS = ("00000000:05:00.0", "00000000:06:00.0", "00000000:07:00.0", "00000000:08:00.0")


def links_to(bus_id: str, count: int) -> list[FakeNvLink]:
    """``count`` active NVLinks to the GPU at ``bus_id``."""
    return [FakeNvLink(bus_id) for _ in range(count)]


def switch_links(count: int = 18) -> list[FakeNvLink]:
    """``count`` active NVLinks spread over four NVSwitches, as on an HGX H100 board (18 links a GPU)."""
    return [FakeNvLink(NVSWITCH_BUS_IDS[i % len(NVSWITCH_BUS_IDS)], remote_type=_real.NVML_NVLINK_DEVICE_TYPE_SWITCH)
            for i in range(count)]


@dataclass
class FakeGpu:
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    name: str = "NVIDIA A100-SXM4-80GB"
    memory_total: int = 80 * 2**30
    memory_used: int = 0
    gpu_util: int = 0
    memory_util: int = 0
    bus_id: str = "00000000:3B:00.0"
    mig_mode: list[int] | None = field(default_factory=lambda: [_real.NVML_DEVICE_MIG_DISABLE] * 2)
    compute: list[FakeProcess] = field(default_factory=list)
    graphics: list[FakeProcess] = field(default_factory=list)
    nvlinks: list[FakeNvLink] | None = None  # None: no NVLink on this GPU (NVMLError_NotSupported)


@dataclass
class FakeHandle:
    """Opaque, like the real ``c_nvmlDevice_t`` pointer."""
    index: int


def _raise(error: Any) -> None:
    if isinstance(error, BaseException):
        raise error
    if issubclass(error, _real.NVMLError) and error is not _real.NVMLError:
        raise error()  # generated subclasses carry their own code
    raise error("raised by fake_pynvml")


def make_fake_nvml(gpus: list[FakeGpu] = (), fail_init: Any = None,
                   failing: dict[int, dict[str, Any]] | None = None, bytes_strings: bool = False,
                   topology: dict[tuple[int, int], int] | None = None) -> types.ModuleType:
    """A module object standing in for ``pynvml``.

    ``fail_init``: an error class or instance that ``nvmlInit`` raises (the attribute of the
    same name can be changed later: a driver installed while the agent runs).
    ``failing``: per device index, call name -> error class or instance that call raises;
    the key None is for calls that name no device (``nvmlDeviceGetCount``, ``nvmlShutdown``).
    ``bytes_strings``: return names, UUIDs and bus ids as bytes, as pynvml releases before
    11.5 did; newer ones return str.  The module records ``calls`` (names, in order).
    ``topology``: (index, index) -> NVML_TOPOLOGY_* level (or an error to raise), either
    order; unnamed pairs are NVML_TOPOLOGY_SYSTEM.
    """
    m = types.ModuleType("pynvml", "fake pynvml (tests/support/fake_pynvml.py)")
    for name in dir(_real):
        if name.startswith(("NVML_", "NVMLError")) or name == "NVMLLibraryMismatchError":
            setattr(m, name, getattr(_real, name))
    m.gpus, m.fail_init, m.failing = list(gpus), fail_init, dict(failing or {})
    m.initialised, m.calls = 0, []
    m.topology = {frozenset(pair): level for pair, level in (topology or {}).items()}

    def text(value: str) -> str | bytes:
        return value.encode() if bytes_strings else value

    def enter(name: str, handle: FakeHandle | None = None) -> FakeGpu | None:
        m.calls.append(name)
        if not m.initialised:
            raise _real.NVMLError(_real.NVML_ERROR_UNINITIALIZED)
        index = None if handle is None else handle.index
        error = m.failing.get(index, {}).get(name)
        if error is not None:
            _raise(error)
        return None if handle is None else m.gpus[index]

    def nvmlInit() -> None:
        m.calls.append("nvmlInit")
        if m.fail_init is not None:
            _raise(m.fail_init)
        m.initialised += 1

    def nvmlShutdown() -> None:
        enter("nvmlShutdown")
        m.initialised -= 1

    def nvmlDeviceGetCount() -> int:
        enter("nvmlDeviceGetCount")
        return len(m.gpus)

    def nvmlDeviceGetHandleByIndex(index: int) -> FakeHandle:
        if not 0 <= index < len(m.gpus):
            m.calls.append("nvmlDeviceGetHandleByIndex")
            raise _real.NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT)
        enter("nvmlDeviceGetHandleByIndex", FakeHandle(index))
        return FakeHandle(index)

    def nvmlDeviceGetUUID(handle: FakeHandle) -> str | bytes:
        return text(enter("nvmlDeviceGetUUID", handle).uuid)

    def nvmlDeviceGetName(handle: FakeHandle) -> str | bytes:
        return text(enter("nvmlDeviceGetName", handle).name)

    def nvmlDeviceGetMemoryInfo(handle: FakeHandle, version: int | None = None) -> Any:
        gpu = enter("nvmlDeviceGetMemoryInfo", handle)
        return types.SimpleNamespace(total=gpu.memory_total, used=gpu.memory_used,
                                     free=gpu.memory_total - gpu.memory_used)

    def nvmlDeviceGetUtilizationRates(handle: FakeHandle) -> Any:
        gpu = enter("nvmlDeviceGetUtilizationRates", handle)
        return types.SimpleNamespace(gpu=gpu.gpu_util, memory=gpu.memory_util)

    def nvmlDeviceGetPciInfo(handle: FakeHandle) -> Any:
        gpu = enter("nvmlDeviceGetPciInfo", handle)
        domain, bus, rest = gpu.bus_id.split(":")
        return types.SimpleNamespace(busIdLegacy=text(gpu.bus_id[-12:]), domain=int(domain, 16), bus=int(bus, 16),
                                     device=int(rest.split(".")[0], 16), pciDeviceId=0x20B210DE,
                                     pciSubSystemId=0x147F10DE, busId=text(gpu.bus_id))

    def nvmlDeviceGetMigMode(device: FakeHandle) -> list[int]:
        gpu = enter("nvmlDeviceGetMigMode", device)
        if gpu.mig_mode is NOT_SUPPORTED:
            raise _real.NVMLError_NotSupported()
        return list(gpu.mig_mode)

    def processes(name: str, handle: FakeHandle, kind: str) -> list[Any]:
        gpu = enter(name, handle)
        return [types.SimpleNamespace(pid=p.pid, usedGpuMemory=p.used_gpu_memory, gpuInstanceId=0xFFFFFFFF,
                                      computeInstanceId=0xFFFFFFFF) for p in getattr(gpu, kind)]

    def nvmlDeviceGetComputeRunningProcesses(handle: FakeHandle) -> list[Any]:
        return processes("nvmlDeviceGetComputeRunningProcesses", handle, "compute")

    def nvmlDeviceGetGraphicsRunningProcesses(handle: FakeHandle) -> list[Any]:
        return processes("nvmlDeviceGetGraphicsRunningProcesses", handle, "graphics")

    def nvmlDeviceGetTopologyCommonAncestor(device1: FakeHandle, device2: FakeHandle) -> int:
        enter("nvmlDeviceGetTopologyCommonAncestor", device1)
        if device1.index == device2.index:
            return _real.NVML_TOPOLOGY_INTERNAL
        level = m.topology.get(frozenset((device1.index, device2.index)), _real.NVML_TOPOLOGY_SYSTEM)
        if not isinstance(level, int):
            _raise(level)
        return level

    def nvlink(name: str, device: FakeHandle, link: int) -> FakeNvLink:
        gpu = enter(name, device)
        if gpu.nvlinks is None:
            raise _real.NVMLError_NotSupported()
        if not 0 <= link < min(len(gpu.nvlinks), _real.NVML_NVLINK_MAX_LINKS):
            raise _real.NVMLError_InvalidArgument()
        return gpu.nvlinks[link]

    def nvmlDeviceGetNvLinkState(device: FakeHandle, link: int) -> int:
        active = nvlink("nvmlDeviceGetNvLinkState", device, link).active
        return _real.NVML_FEATURE_ENABLED if active else _real.NVML_FEATURE_DISABLED

    def nvmlDeviceGetNvLinkRemotePciInfo(device: FakeHandle, link: int) -> Any:
        bus_id = nvlink("nvmlDeviceGetNvLinkRemotePciInfo", device, link).remote_bus_id
        domain, bus, rest = bus_id.split(":")
        return types.SimpleNamespace(busId=text(bus_id), domain=int(domain, 16), bus=int(bus, 16),
                                     device=int(rest.split(".")[0], 16), pciDeviceId=0, pciSubSystemId=0)

    def nvmlDeviceGetNvLinkRemoteDeviceType(handle: FakeHandle, link: int) -> int:
        return nvlink("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link).remote_type

    for fn in (nvmlInit, nvmlShutdown, nvmlDeviceGetCount, nvmlDeviceGetHandleByIndex, nvmlDeviceGetUUID,
               nvmlDeviceGetName, nvmlDeviceGetMemoryInfo, nvmlDeviceGetUtilizationRates, nvmlDeviceGetPciInfo,
               nvmlDeviceGetMigMode, nvmlDeviceGetComputeRunningProcesses, nvmlDeviceGetGraphicsRunningProcesses,
               nvmlDeviceGetTopologyCommonAncestor, nvmlDeviceGetNvLinkState, nvmlDeviceGetNvLinkRemotePciInfo,
               nvmlDeviceGetNvLinkRemoteDeviceType):
        setattr(m, fn.__name__, fn)
    return m

