"""The GPU collector against this machine's real NVML, checked call by call against pynvml itself.

Skipped, with the reason, where there is no NVIDIA driver (CI, most laptops).  On a GPU host:
``.venv/bin/python -m pytest -q tests/e2e/test_gpu.py``.
"""

from __future__ import annotations

from pathlib import Path

import pynvml
import pytest

from agent.collectors.gpu import GpuCollector, normalise_bus_id
from agent.hostpaths import HostPaths
from proto.model import GpuTopologyLevel


def _nvml_or_reason() -> str | None:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return f"no NVIDIA driver here ({exc})"
    pynvml.nvmlShutdown()
    return None


_REASON = _nvml_or_reason()
pytestmark = pytest.mark.skipif(_REASON is not None, reason=_REASON or "")

LEVELS = {pynvml.NVML_TOPOLOGY_INTERNAL: GpuTopologyLevel.INTERNAL, pynvml.NVML_TOPOLOGY_SINGLE: GpuTopologyLevel.SINGLE,
          pynvml.NVML_TOPOLOGY_MULTIPLE: GpuTopologyLevel.MULTIPLE,
          pynvml.NVML_TOPOLOGY_HOSTBRIDGE: GpuTopologyLevel.HOSTBRIDGE, pynvml.NVML_TOPOLOGY_NODE: GpuTopologyLevel.NODE,
          pynvml.NVML_TOPOLOGY_SYSTEM: GpuTopologyLevel.SYSTEM}


@pytest.fixture
def nvml():
    pynvml.nvmlInit()
    try:
        yield pynvml
    finally:
        pynvml.nvmlShutdown()


@pytest.fixture
def gpus():
    collector = GpuCollector(HostPaths())
    try:
        yield collector.collect()
    finally:
        collector.close()


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


def test_every_gpu_reported_with_nvmls_own_identity_and_memory(nvml, gpus):
    assert len(gpus) == nvml.nvmlDeviceGetCount()
    for g in gpus:
        handle = nvml.nvmlDeviceGetHandleByIndex(g.index)
        assert g.healthy, g.health_detail
        assert g.uuid == _text(nvml.nvmlDeviceGetUUID(handle))
        assert g.model == _text(nvml.nvmlDeviceGetName(handle))
        assert g.memory_total_bytes == nvml.nvmlDeviceGetMemoryInfo(handle).total > 0
        assert 0 <= g.memory_used_bytes <= g.memory_total_bytes


def test_numa_node_is_sysfs_for_the_gpus_bus_id(nvml, gpus):
    for g in gpus:
        bus = normalise_bus_id(nvml.nvmlDeviceGetPciInfo(nvml.nvmlDeviceGetHandleByIndex(g.index)).busId)
        try:
            text = Path(f"/sys/bus/pci/devices/{bus}/numa_node").read_text().strip()
        except OSError:
            text = "-1"
        assert g.numa_node == max(-1, int(text))


def test_links_name_every_other_gpu_with_nvmls_level_symmetric(nvml, gpus):
    by_index = {g.index: g for g in gpus}
    for g in gpus:
        assert [k.peer_index for k in g.links] == sorted(i for i in by_index if i != g.index)
        for k in g.links:
            want = nvml.nvmlDeviceGetTopologyCommonAncestor(nvml.nvmlDeviceGetHandleByIndex(g.index),
                                                            nvml.nvmlDeviceGetHandleByIndex(k.peer_index))
            assert k.level == LEVELS[want]
            assert 0 <= k.nvlinks <= nvml.NVML_NVLINK_MAX_LINKS
            (back,) = [b for b in by_index[k.peer_index].links if b.peer_index == g.index]
            assert (back.nvlinks, back.level) == (k.nvlinks, k.level)
