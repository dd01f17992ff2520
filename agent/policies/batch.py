"""Batch allocatable: what the node offers offline work, from what online work really uses.

``capacity × reclaim − online − system``, smoothed (so a brief online spike does
not collapse it), never below what running offline pods already use, and
republished only when it moves by more than ``minChangePercent``.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.intents import BatchAllocatable
from agent.policies.nodestate import NodeState
from agent.profile import OvercommitSettings


@dataclass(frozen=True)
class OvercommitState:
    cpu: float | None = None          # smoothed estimates
    memory: float | None = None
    published: BatchAllocatable | None = None


def _smooth(previous: float | None, sample: float, alpha: float) -> float:
    return sample if previous is None else alpha * sample + (1 - alpha) * previous


def _moved(old: int, new: int, pct: float) -> bool:
    return abs(new - old) > max(1.0, abs(old) * pct / 100.0)


def batch_allocatable(state: NodeState, settings: OvercommitSettings,
                      previous: OvercommitState) -> tuple[BatchAllocatable, OvercommitState]:
    share = settings.reclaim_percent / 100.0
    raw_cpu = state.cpu_capacity * share - state.online_cpu - state.system_cpu
    raw_mem = state.memory_capacity * share - state.online_memory - state.system_memory
    cpu = _smooth(previous.cpu, raw_cpu, settings.smoothing)
    mem = _smooth(previous.memory, raw_mem, settings.smoothing)
    offer = BatchAllocatable(int(max(0.0, cpu, state.offline_cpu)), int(max(0.0, mem, state.offline_memory)))
    old = previous.published
    if old is not None and not (_moved(old.cpu_millis, offer.cpu_millis, settings.min_change_percent) or
                                _moved(old.memory_bytes, offer.memory_bytes, settings.min_change_percent)):
        offer = old
    return offer, OvercommitState(cpu, mem, offer)
