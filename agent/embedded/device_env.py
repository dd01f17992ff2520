"""Environment variables that hand a pod's granted devices to its containers.

The scheduler writes the devices it gave a pod as the ``scoria.io/devices``
annotation (see :mod:`proto.vocab.placement`).  A runtime starting the pod's
containers adds what :func:`device_env` returns:

* ``CUDA_VISIBLE_DEVICES`` — the granted GPUs' UUIDs, comma-separated, in grant
  order; CUDA numbers the visible GPUs 0, 1, … in that order.
* ``CUDA_DEVICE_MEMORY_LIMIT_<i>=<MiB>m`` — HAMi-core's per-device memory cap for
  visible GPU ``i`` (what the grant's ``memoryMiB`` allows; a grant of 0 MiB sets none).
* ``CUDA_DEVICE_SM_LIMIT_<i>=<percent>`` — HAMi-core's share of the GPU's SMs, only for
  a share strictly between 0 and 100 (0 is "no share reserved", 100 the whole GPU:
  neither limits anything).
* ``ASCEND_VISIBLE_DEVICES`` — the granted Ascend NPUs' indices, comma-separated, in
  grant order (``huawei.com/Ascend910``, ``huawei.com/Ascend310P``, …).

The HAMi-core variables only take effect where HAMi-core's ``libvgpu.so`` is
preloaded in the container; without it they are inert.  Grants of other resources
are not ours to expose and are left out.  Pure: text in, a dict out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from proto.errors import InputError
from proto.vocab.placement import DEVICES_ANNOTATION, GPU, DeviceGrant, decode_devices

ASCEND_PREFIX = "huawei.com/Ascend"


def device_env(annotations: Mapping[str, str]) -> dict[str, str]:
    """The variables for a pod with these annotations ({} without ``scoria.io/devices``); ValueError if unreadable."""
    text = annotations.get(DEVICES_ANNOTATION)
    if text is None:
        return {}
    return grants_env(decode_devices(text))


def grants_env(grants: Sequence[DeviceGrant]) -> dict[str, str]:
    gpus = [g for g in grants if g.resource == GPU]
    npus = [g for g in grants if g.resource.startswith(ASCEND_PREFIX)]
    _each_once("GPU", [g.uuid for g in gpus])
    _each_once("NPU", [str(g.index) for g in npus])
    env: dict[str, str] = {}
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(g.uuid for g in gpus)
    for ordinal, g in enumerate(gpus):
        if g.memory_mib > 0:
            env[f"CUDA_DEVICE_MEMORY_LIMIT_{ordinal}"] = f"{g.memory_mib}m"
        if 0 < g.cores < 100:
            env[f"CUDA_DEVICE_SM_LIMIT_{ordinal}"] = str(g.cores)
    if npus:
        env["ASCEND_VISIBLE_DEVICES"] = ",".join(str(g.index) for g in npus)
    return env


def _each_once(kind: str, names: list[str]) -> None:
    """A device listed twice would be made visible twice: the annotation is corrupt, not a bigger grant."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InputError(f"{DEVICES_ANNOTATION}: {kind} {name} is granted twice")
        seen.add(name)
