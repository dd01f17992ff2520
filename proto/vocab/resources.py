"""Device resource names from what a node reports: which extended resource a reported device is.

The agent reports an Ascend NPU by its model (``Ascend910B``, ``Ascend310P3``, as ``npu-smi`` names
it); Kubernetes counts it under the name the Ascend device plugin advertises. Both sides map a model
to that name the same way, so a device the agent reports is the device the scheduler places.
"""

from __future__ import annotations

from proto.vocab.placement import ASCEND_310P, ASCEND_910


def npu_resource(model: str) -> str:
    """Ascend resource names as the Ascend device plugin advertises them."""
    return ASCEND_310P if model.startswith("Ascend310P") else ASCEND_910
