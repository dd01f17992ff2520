"""The ``scoria.io/v1`` ``NodeLoadHistory`` document: a node's recorded online load, for the simulator.

Checked here, at the edge; :mod:`scheduler.modes.simulator.simulation` feeds its samples to the
scheduler's :class:`scheduler.history.LoadHistory` exactly as live reports are.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from proto.vocab.duration import parse_duration
from proto.vocab.quantity import QuantityError, parse_quantity, to_canonical
from scheduler.api.manifests import ManifestError

MAX_SAMPLES = 10_000  # per series
MAX_SERIES = 100
_NODE_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_Fail = Callable[[str, str], ManifestError]  # (field path, problem) -> the error to raise


@dataclass(frozen=True)
class Series:
    start: float                           # Unix seconds of the first sample
    step: float                            # seconds between samples
    cpu: tuple[float, ...]                 # online CPU, millicores
    memory: tuple[float, ...] | None       # online memory, bytes (None: not given)


@dataclass(frozen=True)
class NodeLoadHistory:
    """A node's past online load (``kind: NodeLoadHistory``), fed to a LoadHistory by the simulator."""

    node: str
    cpu_millis: int
    memory_bytes: int
    series: tuple[Series, ...]

    def samples(self) -> list[tuple[float, float, float]]:
        """``(Unix time, cpu percent, memory percent or NaN)`` of every sample, in time order."""
        out: list[tuple[float, float, float]] = []
        for s in self.series:
            memory = s.memory or (math.nan,) * len(s.cpu)
            out.extend((s.start + i * s.step, 100.0 * c / self.cpu_millis, 100.0 * m / self.memory_bytes)
                       for i, (c, m) in enumerate(zip(s.cpu, memory, strict=True)))
        out.sort(key=lambda sample: sample[0])
        return out


def parse_node_load_history(doc: dict, source: str) -> tuple[str, NodeLoadHistory]:
    """Check a NodeLoadHistory document; ManifestError names the field that is wrong."""
    raw_meta = doc.get("metadata")
    meta = raw_meta if isinstance(raw_meta, dict) else {}
    name = meta.get("name")

    def fail(path: str, problem: str) -> ManifestError:
        return ManifestError(source, f"NodeLoadHistory {name or '<unnamed>'}", f"{path}: {problem}")

    if not isinstance(name, str) or not _NODE_NAME.fullmatch(name):
        raise fail("metadata.name", f"expected a node name, got {name!r}")
    spec = _mapping(doc.get("spec"), "spec", {"capacity", "series"}, fail)
    capacity = _mapping(spec.get("capacity"), "spec.capacity", {"cpu", "memory"}, fail)
    amounts = {}
    for resource in ("cpu", "memory"):
        try:
            amounts[resource] = to_canonical(resource, capacity.get(resource))
        except QuantityError as exc:
            raise fail(f"spec.capacity.{resource}", str(exc)) from None
        if amounts[resource] <= 0:
            raise fail(f"spec.capacity.{resource}", "must be more than 0")
    raw = spec.get("series")
    if not isinstance(raw, list) or not raw or len(raw) > MAX_SERIES:
        raise fail("spec.series", f"expected a list of 1-{MAX_SERIES} series")
    series = tuple(_series(item, f"spec.series[{i}]", amounts, fail) for i, item in enumerate(raw))
    return name, NodeLoadHistory(name, amounts["cpu"], amounts["memory"], series)


def _mapping(value: Any, path: str, keys: set[str], fail: _Fail) -> dict:
    if not isinstance(value, dict):
        raise fail(path, f"expected a mapping, got {value!r}")
    unknown = sorted(set(map(str, value)) - keys)
    if unknown:
        raise fail(f"{path}.{unknown[0]}", f"unknown field; known: {', '.join(sorted(keys))}")
    return value


def _series(item: Any, path: str, capacity: dict[str, int], fail: _Fail) -> Series:
    item = _mapping(item, path, {"start", "step", "onlineCpu", "onlineMemory"}, fail)
    start = item.get("start")
    try:
        stamp = start if isinstance(start, datetime) else datetime.fromisoformat(str(start))
    except ValueError:
        raise fail(f"{path}.start", f"expected an RFC 3339 time like 2026-01-05T00:00:00Z, got {start!r}") from None
    if stamp.tzinfo is None:
        raise fail(f"{path}.start", f"{start} has no offset (add Z or +hh:mm)")
    try:
        step = parse_duration(item.get("step"))
    except ValueError as exc:
        raise fail(f"{path}.step", str(exc)) from None
    if not step > 0:
        raise fail(f"{path}.step", f"must be longer than 0, got {item.get('step')!r}")
    cpu = _values(item.get("onlineCpu"), f"{path}.onlineCpu", 1000, capacity["cpu"], "cores", fail)
    memory = None
    if item.get("onlineMemory") is not None:
        memory = _values(item["onlineMemory"], f"{path}.onlineMemory", 1, capacity["memory"], "bytes", fail)
        if len(memory) != len(cpu):
            raise fail(f"{path}.onlineMemory", f"{len(memory)} samples but onlineCpu has {len(cpu)}")
    return Series(stamp.timestamp(), step, cpu, memory)


def _values(raw: Any, path: str, scale: int, limit: int, unit: str, fail: _Fail) -> tuple[float, ...]:
    if not isinstance(raw, list) or not raw or len(raw) > MAX_SAMPLES:
        raise fail(path, f"expected a list of 1-{MAX_SAMPLES} samples")
    out = []
    for i, value in enumerate(raw):
        try:
            amount = float(parse_quantity(value)) * scale
        except QuantityError as exc:
            raise fail(f"{path}[{i}]", str(exc)) from None
        if amount < 0 or amount > limit:
            raise fail(f"{path}[{i}]", f"{value!r} is outside 0 and the capacity ({limit / scale:g} {unit})")
        out.append(amount)
    return tuple(out)
