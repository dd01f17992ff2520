"""Container environment from a pod's scoria.io/devices annotation (CUDA, HAMi-core, Ascend)."""

from __future__ import annotations

import json

import pytest

from agent.embedded.device_env import device_env
from proto.vocab.placement import DEVICES_ANNOTATION, DeviceGrant, encode_devices

H100_MIB = 81559
G0, G1, G2 = (f"GPU-{n}fda6c678-49c2-13a1-fc9e-d68253c421d4" for n in "012")


def grant(resource="nvidia.com/gpu", uuid=G0, index=0, memory_mib=H100_MIB, cores=100) -> DeviceGrant:
    return DeviceGrant(resource, uuid, index, memory_mib, cores)


def env(*grants: DeviceGrant) -> dict[str, str]:
    return device_env({DEVICES_ANNOTATION: encode_devices(list(grants)), "other": "x"})


CASES = {
    "one-whole-gpu": (
        [grant()],
        {"CUDA_VISIBLE_DEVICES": G0, "CUDA_DEVICE_MEMORY_LIMIT_0": f"{H100_MIB}m"}),
    "two-whole-gpus-in-grant-order": (
        [grant(uuid=G2, index=2), grant(uuid=G0, index=0)],
        {"CUDA_VISIBLE_DEVICES": f"{G2},{G0}", "CUDA_DEVICE_MEMORY_LIMIT_0": f"{H100_MIB}m",
         "CUDA_DEVICE_MEMORY_LIMIT_1": f"{H100_MIB}m"}),
    "shared-gpus-with-memory-and-cores": (
        [grant(uuid=G1, index=1, memory_mib=4096, cores=30), grant(uuid=G2, index=2, memory_mib=8192, cores=50)],
        {"CUDA_VISIBLE_DEVICES": f"{G1},{G2}", "CUDA_DEVICE_MEMORY_LIMIT_0": "4096m", "CUDA_DEVICE_SM_LIMIT_0": "30",
         "CUDA_DEVICE_MEMORY_LIMIT_1": "8192m", "CUDA_DEVICE_SM_LIMIT_1": "50"}),
    "shared-gpu-without-a-core-share-has-no-sm-limit": (
        [grant(memory_mib=2048, cores=0)],
        {"CUDA_VISIBLE_DEVICES": G0, "CUDA_DEVICE_MEMORY_LIMIT_0": "2048m"}),
    "sm-limit-bounds": (
        [grant(uuid=G0, cores=1), grant(uuid=G1, index=1, cores=99)],
        {"CUDA_VISIBLE_DEVICES": f"{G0},{G1}", "CUDA_DEVICE_MEMORY_LIMIT_0": f"{H100_MIB}m",
         "CUDA_DEVICE_SM_LIMIT_0": "1", "CUDA_DEVICE_MEMORY_LIMIT_1": f"{H100_MIB}m", "CUDA_DEVICE_SM_LIMIT_1": "99"}),
    "zero-memory-sets-no-memory-limit": (
        [grant(memory_mib=0, cores=100)],
        {"CUDA_VISIBLE_DEVICES": G0}),
    "ascend-910-npus": (
        [grant("huawei.com/Ascend910", "npu-uuid-5", 5, 65536), grant("huawei.com/Ascend910", "npu-uuid-4", 4, 65536)],
        {"ASCEND_VISIBLE_DEVICES": "5,4"}),
    "ascend-310p": (
        [grant("huawei.com/Ascend310P", "npu-uuid-0", 0, 0, 0)],
        {"ASCEND_VISIBLE_DEVICES": "0"}),
    "gpus-and-npus": (
        [grant("huawei.com/Ascend910", "npu-uuid-1", 1, 0), grant(uuid=G1, index=1, memory_mib=1000, cores=10)],
        {"CUDA_VISIBLE_DEVICES": G1, "CUDA_DEVICE_MEMORY_LIMIT_0": "1000m", "CUDA_DEVICE_SM_LIMIT_0": "10",
         "ASCEND_VISIBLE_DEVICES": "1"}),
    "other-resources-are-not-ours": (
        [grant("example.com/fpga", "fpga-0", 0, 0, 0)],
        {}),
}


@pytest.mark.parametrize("grants,want", CASES.values(), ids=list(CASES))
def test_environment_from_grants(grants, want):
    assert env(*grants) == want


def test_no_annotation_no_environment():
    assert device_env({}) == {} and device_env({"scoria.io/numa-nodes": "0"}) == {}


def test_an_empty_grant_list_is_no_environment():
    assert device_env({DEVICES_ANNOTATION: "[]"}) == {}


BAD = {
    "not-json": ("[{", "not JSON"),
    "not-a-list": ('{"uuid": "GPU-0"}', "expected a JSON list"),
    "missing-uuid": (json.dumps([{"resource": "nvidia.com/gpu", "index": 0, "memoryMiB": 1, "cores": 1}]),
                     "resource and uuid must be non-empty strings"),
    "cores-over-100": (json.dumps([{"resource": "nvidia.com/gpu", "uuid": G0, "index": 0, "memoryMiB": 1,
                                    "cores": 150}]), "cores: a percentage"),
    "negative-memory": (json.dumps([{"resource": "nvidia.com/gpu", "uuid": G0, "index": 0, "memoryMiB": -1,
                                     "cores": 0}]), "memoryMiB: expected a non-negative integer"),
    "same-gpu-twice": (encode_devices([grant(), grant(memory_mib=5)]), f"GPU {G0} is granted twice"),
    "same-npu-twice": (encode_devices([grant("huawei.com/Ascend910", "a", 3, 0),
                                       grant("huawei.com/Ascend910", "b", 3, 0)]), "NPU 3 is granted twice"),
}


@pytest.mark.parametrize("text,problem", BAD.values(), ids=list(BAD))
def test_a_bad_annotation_is_a_value_error_naming_it(text, problem):
    with pytest.raises(ValueError) as info:
        device_env({DEVICES_ANNOTATION: text})
    assert str(info.value).startswith(DEVICES_ANNOTATION) and problem in str(info.value)
