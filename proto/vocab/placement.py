"""Topology and device placement as pods carry it: the requests they make and the decisions written on them.

Requests (read from the pod):

* NUMA policy — annotation ``volcano.sh/numa-topology-policy``: ``none``,
  ``best-effort``, ``restricted``, ``single-numa-node``.
* Whole devices — ``nvidia.com/gpu``, ``huawei.com/Ascend910``,
  ``huawei.com/Ascend310P``: that many devices, nobody else on them.
* Shared GPUs — ``volcano.sh/vgpu-number`` GPUs, each with
  ``volcano.sh/vgpu-memory`` MiB (unset: the whole memory of the GPU, as
  HAMi does) and ``volcano.sh/vgpu-cores`` percent of its cores (unset: 0, no
  core share reserved; 100: the GPU alone).
* Volcano's older GPU sharing (``deviceshare.GPUSharingEnable`` /
  ``GPUNumberEnable``): ``volcano.sh/gpu-memory`` MiB on one GPU that other
  such pods share, or ``volcano.sh/gpu-number`` whole GPUs nobody else uses.
* Expected run time — annotation ``scoria.io/expected-duration`` (``2h``).

Decisions (written on the pod by the scheduler when it binds; read by the
agent and the runtimes):

* ``scoria.io/numa-nodes`` — the NUMA zones the pod was placed in, ``"0"`` or ``"0,1"``.
* ``scoria.io/devices`` — a JSON list, one entry per device:
  ``{"resource": "nvidia.com/gpu", "uuid": "GPU-…", "index": 3, "memoryMiB": 4096, "cores": 30}``
  (``memoryMiB``/``cores`` are what the pod may use of that device).
* ``volcano.sh/gpu-index`` (``"0"``, ``"0,3"``) and ``volcano.sh/predicate-time``
  (nanoseconds) — for ``volcano.sh/gpu-memory``/``gpu-number`` pods also, as
  Volcano writes them: its GPU-share device plugin reads them on the node.

Everything here validates: a bad value is a ValueError that says what is wrong,
so manifests are refused at the edge and a corrupt annotation on a running pod
is reported, never guessed at.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from proto.errors import InputError
from proto.vocab.duration import parse_duration

NUMA_POLICY_ANNOTATION = "volcano.sh/numa-topology-policy"
NUMA_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
NUMA_NODES_ANNOTATION = "scoria.io/numa-nodes"
DEVICES_ANNOTATION = "scoria.io/devices"
EXPECTED_DURATION_ANNOTATION = "scoria.io/expected-duration"
PREEMPTABLE_ANNOTATION = "volcano.sh/preemptable"
REVOCABLE_ZONE_LABEL = "volcano.sh/revocable-zone"

GPU = "nvidia.com/gpu"
ASCEND_910 = "huawei.com/Ascend910"
ASCEND_310P = "huawei.com/Ascend310P"
WHOLE_DEVICE_RESOURCES = (GPU, ASCEND_910, ASCEND_310P)
VGPU_NUMBER = "volcano.sh/vgpu-number"
VGPU_MEMORY = "volcano.sh/vgpu-memory"
VGPU_CORES = "volcano.sh/vgpu-cores"
VGPU_RESOURCES = (VGPU_NUMBER, VGPU_MEMORY, VGPU_CORES)
GPU_MEMORY = "volcano.sh/gpu-memory"  # MiB of one GPU that other such pods share (GPUSharingEnable)
GPU_NUMBER = "volcano.sh/gpu-number"  # whole GPUs nobody else uses (GPUNumberEnable); on a node: its GPUs
GPU_SHARE_RESOURCES = (GPU_MEMORY, GPU_NUMBER)
GPU_INDEX_ANNOTATION = "volcano.sh/gpu-index"  # the GPUs given, "0" or "0,3": Volcano's GPU-share device plugin
PREDICATE_TIME_ANNOTATION = "volcano.sh/predicate-time"  # when they were given (ns): the plugin matches pods by it
GPU_UNHEALTHY_ANNOTATION = "volcano.sh/gpu-unhealthy-ids"  # on a node: GPU indices its device plugin found broken
MAX_DEVICES_PER_POD = 64
MAX_GPU_MEMORY_MIB = 2**20  # 1 TiB: more than any GPU has (a request in bytes, "10Gi", is caught by it)



def npu_resource(model: str) -> str:
    """The extended resource an Ascend NPU of this model counts under, as the Ascend device plugin advertises it.

    The agent reports an NPU by its model (``Ascend910B``, ``Ascend310P3``, as ``npu-smi`` names it); the
    scheduler maps the model to the name here, so a device the agent reports is the device the scheduler places.
    """
    return ASCEND_310P if model.startswith("Ascend310P") else ASCEND_910


# How a pod asks for devices (DeviceRequest.mode)
WHOLE, VGPU, SHARE_MEMORY, SHARE_NUMBER = "whole", "vgpu", "gpu-memory", "gpu-number"


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """``count`` devices of kind ``resource``, each giving the pod ``memory_mib`` and ``cores`` percent.

    ``memory_mib`` None means the whole memory of each device; an ``exclusive``
    request (whole devices, ``vgpu-cores: 100``, ``gpu-number``) needs devices
    nobody uses.  ``mode`` says how it was asked (WHOLE, VGPU, SHARE_MEMORY,
    SHARE_NUMBER): a mode the configuration does not enable is not counted per device.
    """

    resource: str
    count: int
    memory_mib: int | None = None
    cores: int = 100
    exclusive: bool = True
    shared: bool = False  # not left to a device plugin: only nodes whose GPUs the scheduler counts can give it
    mode: str = WHOLE

    def describe(self) -> str:
        if self.mode == SHARE_MEMORY:
            return f"a GPU with {self.memory_mib} MiB memory ({GPU_MEMORY})"
        if self.mode == SHARE_NUMBER:
            return f"{self.count} unused GPU(s) ({GPU_NUMBER})"
        if self.shared:
            memory = "all memory" if self.memory_mib is None else f"{self.memory_mib} MiB"
            return f"{self.count} shared GPU(s) with {memory} and {self.cores}% cores each"
        return f"{self.count} {self.resource}"


def device_requests(requests: Mapping[str, int]) -> tuple[DeviceRequest, ...]:
    """The devices a pod's requests ask for; ValueError for a request that cannot be met as written."""
    out = []
    for resource in WHOLE_DEVICE_RESOURCES:
        count = requests.get(resource, 0)
        if count:
            out.append(DeviceRequest(resource, _count(resource, count)))
    share = _gpu_share(requests)
    if share is not None:
        out.append(share)
    number = requests.get(VGPU_NUMBER, 0)
    memory = requests.get(VGPU_MEMORY)
    cores = requests.get(VGPU_CORES)
    if not number:
        if memory or cores:
            raise InputError(f"{VGPU_MEMORY}/{VGPU_CORES} need {VGPU_NUMBER} (how many GPUs)")
        return tuple(out)
    if cores is not None and cores > 100:
        raise InputError(f"{VGPU_CORES}: a percentage of one GPU's cores, at most 100, got {cores}")
    if memory:
        _memory_mib(VGPU_MEMORY, memory)
    if requests.get(GPU):
        raise InputError(f"a pod asks for whole GPUs ({GPU}) or shared ones ({VGPU_NUMBER}), not both")
    out.append(DeviceRequest(GPU, _count(VGPU_NUMBER, number), memory_mib=memory or None, cores=cores or 0,
                             exclusive=cores == 100, shared=True, mode=VGPU))
    return tuple(out)


def _gpu_share(requests: Mapping[str, int]) -> DeviceRequest | None:
    """Volcano's older sharing: ``gpu-memory`` MiB on one shared GPU, or ``gpu-number`` unused GPUs."""
    memory, number = requests.get(GPU_MEMORY, 0), requests.get(GPU_NUMBER, 0)
    if not (memory or number):
        return None
    if memory and number:
        raise InputError(f"a pod asks for part of one GPU ({GPU_MEMORY}) or whole GPUs ({GPU_NUMBER}), not both")
    for other in (GPU, VGPU_NUMBER):
        if requests.get(other):
            raise InputError(f"a pod asks for GPUs one way: {GPU_MEMORY if memory else GPU_NUMBER} "
                             f"and {other} both name the same GPUs")
    if memory:
        return DeviceRequest(GPU, 1, memory_mib=_memory_mib(GPU_MEMORY, memory), cores=0, exclusive=False,
                             shared=True, mode=SHARE_MEMORY)
    return DeviceRequest(GPU, _count(GPU_NUMBER, number), cores=100, shared=True, mode=SHARE_NUMBER)


def _memory_mib(resource: str, mib: int) -> int:
    if mib > MAX_GPU_MEMORY_MIB:
        raise InputError(f"{resource}: {mib} MiB of one GPU, more than any GPU has (at most {MAX_GPU_MEMORY_MIB}); "
                         "the amount is in MiB, not bytes")
    return mib


def _count(resource: str, count: int) -> int:
    if count > MAX_DEVICES_PER_POD:
        raise InputError(f"{resource}: {count} devices, more than any node has (limit {MAX_DEVICES_PER_POD})")
    return count


def numa_policy(annotations: Mapping[str, str]) -> str:
    """The pod's NUMA policy, ``""`` when unset; ValueError for an unknown one."""
    text = (annotations.get(NUMA_POLICY_ANNOTATION) or "").strip()
    if text and text not in NUMA_POLICIES:
        raise InputError(f"{NUMA_POLICY_ANNOTATION}: must be one of {', '.join(NUMA_POLICIES)}, got {text!r}")
    return text


@dataclass(frozen=True, slots=True)
class DeviceGrant:
    """One device given to a pod, and how much of it."""

    resource: str
    uuid: str
    index: int
    memory_mib: int
    cores: int


def encode_devices(grants: tuple[DeviceGrant, ...] | list[DeviceGrant]) -> str:
    return json.dumps([{"resource": g.resource, "uuid": g.uuid, "index": g.index, "memoryMiB": g.memory_mib,
                        "cores": g.cores} for g in grants], separators=(",", ":"))


def decode_devices(text: str) -> tuple[DeviceGrant, ...]:
    """Parse ``scoria.io/devices``; ValueError names the entry and field that is wrong."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise InputError(f"{DEVICES_ANNOTATION}: not JSON ({exc})") from None
    if not isinstance(raw, list):
        raise InputError(f"{DEVICES_ANNOTATION}: expected a JSON list of devices")
    out = []
    for i, entry in enumerate(raw):
        where = f"{DEVICES_ANNOTATION}[{i}]"
        if not isinstance(entry, dict):
            raise InputError(f"{where}: expected an object")
        resource, uuid = entry.get("resource"), entry.get("uuid")
        if not isinstance(resource, str) or not resource or not isinstance(uuid, str) or not uuid:
            raise InputError(f"{where}: resource and uuid must be non-empty strings")
        numbers = []
        for key in ("index", "memoryMiB", "cores"):
            value = entry.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InputError(f"{where}.{key}: expected a non-negative integer, got {value!r}")
            numbers.append(value)
        if numbers[2] > 100:
            raise InputError(f"{where}.cores: a percentage, at most 100, got {numbers[2]}")
        out.append(DeviceGrant(resource, uuid, *numbers))
    return tuple(out)


def encode_gpu_index(indices: tuple[int, ...] | list[int]) -> str:
    """``volcano.sh/gpu-index`` as Volcano writes it: indices joined by commas, in the order given."""
    return ",".join(str(i) for i in indices)


def decode_gpu_index(text: str) -> tuple[int, ...]:
    """Parse ``volcano.sh/gpu-index`` (``"0"``, ``"0,3"``); ValueError when it is not a list of GPU indices."""
    parts = [p.strip() for p in text.split(",")]
    if not all(p.isdigit() and len(p) <= 6 for p in parts):
        raise InputError(f"{GPU_INDEX_ANNOTATION}: expected GPU indices like '0' or '0,3', got {text!r}")
    indices = tuple(int(p) for p in parts)
    if len(set(indices)) != len(indices):
        raise InputError(f"{GPU_INDEX_ANNOTATION}: a GPU listed twice in {text!r}")
    return indices


def encode_zones(zones: tuple[int, ...] | list[int]) -> str:
    return ",".join(str(z) for z in sorted(zones))


def decode_zones(text: str) -> tuple[int, ...]:
    """Parse ``scoria.io/numa-nodes`` (``"0,1"``); ValueError when it is not a list of zone ids."""
    parts = [p.strip() for p in text.split(",")]
    if not parts or not all(p.isdigit() for p in parts):
        raise InputError(f"{NUMA_NODES_ANNOTATION}: expected zone ids like '0' or '0,1', got {text!r}")
    zones = tuple(sorted({int(p) for p in parts}))
    if len(zones) != len(parts):
        raise InputError(f"{NUMA_NODES_ANNOTATION}: zone listed twice in {text!r}")
    return zones


def expected_duration(annotations: Mapping[str, str]) -> float | None:
    """Seconds the pod says it runs (``scoria.io/expected-duration``), None when unset; ValueError if unreadable."""
    text = (annotations.get(EXPECTED_DURATION_ANNOTATION) or "").strip()
    if not text:
        return None
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise InputError(f"{EXPECTED_DURATION_ANNOTATION}: {exc}") from None
    if seconds <= 0:
        raise InputError(f"{EXPECTED_DURATION_ANNOTATION}: must be longer than 0, got {text!r}")
    return seconds


def preemptable(annotations: Mapping[str, str]) -> bool | None:
    """``volcano.sh/preemptable``: True/False, None when unset; ValueError for anything but true/false."""
    text = (annotations.get(PREEMPTABLE_ANNOTATION) or "").strip().lower()
    if not text:
        return None
    if text not in ("true", "false"):
        raise InputError(f"{PREEMPTABLE_ANNOTATION}: must be \"true\" or \"false\", got {text!r}")
    return text == "true"
