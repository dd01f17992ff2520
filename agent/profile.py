"""The QoS profile: how much offline work a node takes, when to suppress it and when to evict.

::

    name: default
    spec:
      cpu: {offlineThresholdPercent: 80, offlineFloorPercent: 5}
      burst: {enabled: true, burstPercent: 100, qosLevels: [LC, HLS]}
      memory: {limitOfflineToBatch: true, protectOnline: true, offlineHighPercent: 90}
      eviction: {cpuHighPercent: 95, cpuLowPercent: 85, memoryHighPercent: 92, memoryLowPercent: 85,
                 samples: 3, maxPerInterval: 2, interval: 10s}
      overcommit: {reclaimPercent: 80, smoothing: 0.5, minChangePercent: 5}
      timezone: Europe/Berlin          # for windows; default: the node's own
      windows:
      - time: "22:00-06:00"            # may cross midnight
        cpu: {offlineThresholdPercent: 95}
    nodes:                             # per-node overrides, by node labels, applied in order
    - selector: {pool: latency-critical}
      spec: {cpu: {offlineThresholdPercent: 50}}

Everything is typed and checked when the file is read: an unknown key, a
percentage outside 0–100, a low watermark above its high one, a malformed
window or time zone is a :class:`ProfileError` naming the key, and
:class:`ProfileWatcher` keeps the last good profile in force.  A Kubernetes
ConfigMap holding the YAML under one key is accepted as is.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from datetime import time as dtime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml

from proto.errors import InputError
from proto.vocab.duration import DailyWindow, parse_daily_window, parse_duration

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

log = logging.getLogger(__name__)
LEVELS = ("LC", "HLS", "LS", "BE")
_Section = TypeVar("_Section", bound="DataclassInstance")


class ProfileError(InputError):
    pass


def _pct(default: float, upper: float = 100.0) -> float:
    return field(default=default, metadata={"min": 0.0, "max": upper})


@dataclass(frozen=True)
class CpuSettings:
    offline_threshold_percent: float = _pct(80.0)  # offline quota = capacity × this − online − system
    offline_floor_percent: float = _pct(5.0)       # ... but never below this share of capacity
    use_cpu_idle: bool = True                      # SCHED_IDLE for offline pods where the kernel has cpu.idle


@dataclass(frozen=True)
class BurstSettings:
    enabled: bool = False
    burst_percent: float = _pct(100.0, 1000.0)     # cfs burst = this share of the pod's CPU limit per period
    qos_levels: tuple[str, ...] = ("LC", "HLS")


@dataclass(frozen=True)
class MemorySettings:
    limit_offline_to_batch: bool = True            # offline pods' memory limit = their batch-memory request
    protect_online: bool = True                    # cgroup v2: memory.min (LC) / memory.low (HLS, LS) = request
    offline_high_percent: float = _pct(90.0)       # cgroup v2: offline memory.high = limit × this


@dataclass(frozen=True)
class EvictionSettings:
    enabled: bool = True
    cpu_high_percent: float = _pct(95.0)
    cpu_low_percent: float = _pct(85.0)
    memory_high_percent: float = _pct(92.0)
    memory_low_percent: float = _pct(85.0)
    samples: int = field(default=3, metadata={"min": 1, "max": 1000})  # consecutive samples above high
    max_per_interval: int = field(default=2, metadata={"min": 0, "max": 1000})
    interval: float = field(default=10.0, metadata={"duration": True, "min": 0.1})

    def __post_init__(self) -> None:
        for res in ("cpu", "memory"):
            low, high = getattr(self, f"{res}_low_percent"), getattr(self, f"{res}_high_percent")
            if low > high:
                raise ProfileError(f"{_camel(res + '_low_percent')}: {low:g} is above "
                                   f"{_camel(res + '_high_percent')} {high:g}")


@dataclass(frozen=True)
class OvercommitSettings:
    reclaim_percent: float = _pct(80.0)            # batch allocatable = capacity × this − online − system
    smoothing: float = field(default=0.5, metadata={"min": 0.01, "max": 1.0})  # weight of the newest sample
    min_change_percent: float = _pct(5.0)          # republish only when it moves more than this


@dataclass(frozen=True)
class Window:
    span: DailyWindow  # may cross midnight
    overrides: dict = field(default_factory=dict, hash=False)

    def contains(self, t: dtime) -> bool:
        return self.span.contains(t)


@dataclass(frozen=True)
class ProfileSpec:
    cpu: CpuSettings = CpuSettings()
    burst: BurstSettings = BurstSettings()
    memory: MemorySettings = MemorySettings()
    eviction: EvictionSettings = EvictionSettings()
    overcommit: OvercommitSettings = OvercommitSettings()
    timezone: str = ""
    windows: tuple[Window, ...] = ()


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.capitalize() for p in rest)


_SECTIONS: dict[str, type[DataclassInstance]] = {
    "cpu": CpuSettings, "burst": BurstSettings, "memory": MemorySettings, "eviction": EvictionSettings,
    "overcommit": OvercommitSettings}


def _value(f: dataclasses.Field, raw: Any, where: str) -> Any:
    meta = f.metadata
    kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    value: Any  # what the field's type asks for (raw as given where nothing is asked)
    if meta.get("duration"):
        try:
            value = parse_duration(raw)
        except ValueError as exc:
            raise ProfileError(f"{where}: {exc}") from None
    elif kind == "bool":
        if not isinstance(raw, bool):
            raise ProfileError(f"{where}: expected true or false, got {raw!r}")
        value = raw
    elif kind in ("int", "float"):
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or (kind == "int" and not float(raw).is_integer()):
            raise ProfileError(f"{where}: expected {'an integer' if kind == 'int' else 'a number'}, got {raw!r}")
        value = int(raw) if kind == "int" else float(raw)
    elif kind.startswith("tuple"):
        if not isinstance(raw, list) or not all(isinstance(x, str) and x.upper() in LEVELS for x in raw):
            raise ProfileError(f"{where}: expected a list of QoS levels ({', '.join(LEVELS)}), got {raw!r}")
        value = tuple(x.upper() for x in raw)
    else:
        value = raw
    if "min" in meta and value < meta["min"] or "max" in meta and value > meta["max"]:
        raise ProfileError(f"{where}: must be between {meta['min']:g} and {meta['max']:g}, got {raw!r}")
    return value


def _section(cls: type[_Section], raw: Any, where: str) -> _Section:
    if raw is None:
        return cls()
    if not isinstance(raw, dict):
        raise ProfileError(f"{where}: expected a mapping")
    fields = {_camel(f.name): f for f in dataclasses.fields(cls)}
    values = {}
    for key, value in raw.items():
        f = fields.get(key)
        if f is None:
            raise ProfileError(f"{where}.{key}: unknown key; known: {', '.join(sorted(fields))}")
        values[f.name] = _value(f, value, f"{where}.{key}")
    try:
        return cls(**values)
    except ProfileError as exc:
        raise ProfileError(f"{where}.{exc}") from None


def _window(raw: Any, where: str) -> Window:
    if not isinstance(raw, dict) or "time" not in raw:
        raise ProfileError(f"{where}: a window needs time: \"HH:MM-HH:MM\"")
    try:
        span = parse_daily_window(raw["time"])
    except ValueError as exc:
        raise ProfileError(f"{where}.time: {exc}") from None
    overrides = {k: v for k, v in raw.items() if k != "time"}
    for key in overrides:
        if key not in _SECTIONS:
            raise ProfileError(f"{where}.{key}: unknown key; a window may set {', '.join(_SECTIONS)}")
    _spec(overrides, where)  # check what it sets now, not when the window opens
    return Window(span, overrides)


def _spec(raw: Any, where: str) -> ProfileSpec:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ProfileError(f"{where}: expected a mapping")
    for key in raw:
        if key not in (*_SECTIONS, "timezone", "windows"):
            raise ProfileError(f"{where}.{key}: unknown key; known: {', '.join([*_SECTIONS, 'timezone', 'windows'])}")
    # one instance of each section's class, under ProfileSpec's field names
    sections: dict[str, Any] = {name: _section(cls, raw.get(name), f"{where}.{name}") for name, cls in _SECTIONS.items()}
    tz = raw.get("timezone") or ""
    if tz:
        try:
            ZoneInfo(str(tz))
        except (ZoneInfoNotFoundError, ValueError):
            raise ProfileError(f"{where}.timezone: unknown time zone {tz!r}") from None
    windows = raw.get("windows") or []
    if not isinstance(windows, list):
        raise ProfileError(f"{where}.windows: expected a list")
    return ProfileSpec(**sections, timezone=str(tz),
                       windows=tuple(_window(w, f"{where}.windows[{i}]") for i, w in enumerate(windows)))


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


@dataclass(frozen=True)
class NodeOverride:
    selector: dict
    raw: dict = field(hash=False)


@dataclass(frozen=True)
class QosProfile:
    name: str
    digest: str
    raw: dict = field(hash=False)        # the global spec as written
    spec: ProfileSpec = ProfileSpec()    # ... parsed
    nodes: tuple[NodeOverride, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.name}@{self.digest}"

    def for_node(self, labels: dict[str, str]) -> tuple[dict, ProfileSpec]:
        """The node's spec: the global one with every matching override merged in, in order."""
        raw = self.raw
        for override in self.nodes:
            if all(labels.get(k) == v for k, v in override.selector.items()):
                raw = _merge(raw, override.raw)
        return raw, _spec(raw, "spec") if raw is not self.raw else self.spec

    def effective(self, labels: dict[str, str], now: datetime) -> ProfileSpec:
        """What applies on this node at ``now``: node overrides, then the windows open at that time."""
        raw, spec = self.for_node(labels)
        if not spec.windows:
            return spec
        local = now.astimezone(ZoneInfo(spec.timezone)) if spec.timezone else now.astimezone()
        for window in spec.windows:
            if window.contains(local.time()):
                raw = _merge(raw, window.overrides)
        return _spec({k: v for k, v in raw.items() if k != "windows"}, "spec") if raw is not self.raw else spec


def parse_profile(text: str, source: str = "<profile>") -> QosProfile:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ProfileError(f"{source}: invalid YAML: {getattr(exc, 'problem', None) or exc}") from None
    if isinstance(doc, dict) and doc.get("kind") == "ConfigMap":
        entries = [v for v in (doc.get("data") or {}).values() if isinstance(v, str)]
        if len(entries) != 1:
            raise ProfileError(f"{source}: a ConfigMap must hold the profile as its one data entry")
        return parse_profile(entries[0], source)
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ProfileError(f"{source}: expected a mapping with name, spec and nodes")
    for key in doc:
        if key not in ("name", "spec", "nodes", "apiVersion", "kind"):
            raise ProfileError(f"{source}: {key}: unknown key; expected name, spec, nodes")
    try:
        raw = doc.get("spec") or {}
        spec = _spec(raw, "spec")
        nodes = []
        for i, item in enumerate(doc.get("nodes") or []):
            where = f"nodes[{i}]"
            if not isinstance(item, dict) or set(item) - {"selector", "spec"} or not isinstance(item.get("selector"), dict):
                raise ProfileError(f"{where}: expected selector (labels) and spec")
            override = item.get("spec") or {}
            _spec(_merge(raw, override), f"{where}.spec")  # the merged result must be valid too
            nodes.append(NodeOverride({str(k): str(v) for k, v in item["selector"].items()}, override))
    except ProfileError as exc:
        raise ProfileError(f"{source}: {exc}") from None
    return QosProfile(str(doc.get("name") or "default"), hashlib.sha256(text.encode()).hexdigest()[:12], raw, spec,
                      tuple(nodes))


DEFAULT_PROFILE = parse_profile("name: builtin\n", "<builtin>")


class ProfileWatcher:
    """The profile in force, re-read when its file changes; a refused file keeps the previous profile."""

    def __init__(self, path: str | Path | None, on_result: Callable[[str], None] | None = None):
        self.path = Path(path) if path else None
        self.on_result = on_result or (lambda result: None)
        self.current = DEFAULT_PROFILE if self.path is None else self._load(self.path)
        self.last_error: str | None = None
        self._seen = self.current.digest

    @staticmethod
    def _load(path: Path) -> QosProfile:
        try:
            text = path.read_text()
        except OSError as exc:
            raise ProfileError(f"{path}: cannot read: {exc}") from None
        return parse_profile(text, str(path))

    def poll(self) -> bool:
        if self.path is None:
            return False
        try:
            text = self.path.read_text()
        except OSError as exc:
            return self._refuse(f"{self.path}: cannot read: {exc}", None)
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        if digest == self.current.digest:
            self.last_error = None
            return False
        if digest == self._seen:
            return False
        self._seen = digest
        try:
            profile = parse_profile(text, str(self.path))
        except ProfileError as exc:
            return self._refuse(str(exc), digest)
        self.current, self.last_error = profile, None
        log.info("QoS profile %s in force", profile.label)
        self.on_result("success")
        return True

    def _refuse(self, message: str, digest: str | None) -> bool:
        if message != self.last_error:
            log.error("refused QoS profile, keeping %s: %s", self.current.label, message)
            self.on_result("refused")
        self.last_error = message
        return False
