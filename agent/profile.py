"""The QoS profile: how much offline work a node takes, when to suppress it and when to evict.

::

    name: default
    spec:
      cpu: {offlineThresholdPercent: 80, offlineFloorPercent: 5, useCpuIdle: true,
            clampOnSignals: true, onlineRisePercent: 20, onlineStallPercent: 10, clampHold: 200ms}
      burst: {enabled: true, burstPercent: 100, qosLevels: [LC, HLS]}
      memory: {limitOfflineToBatch: true, protectOnline: true, offlineHighPercent: 90}
      eviction: {cpuHighPercent: 95, cpuLowPercent: 85, memoryHighPercent: 92, memoryLowPercent: 85,
                 memoryStallPercent: 20, samples: 3, starvationPercent: 50, starvationUsagePercent: 90,
                 starvationSamples: 10, maxPerInterval: 2, interval: 10s}
      overcommit: {reclaimPercent: 80, smoothing: 0.5, minChangePercent: 5}
      timezone: Europe/Berlin          # for windows; default: the node's own
      windows:
      - time: "22:00-06:00"            # may cross midnight
        cpu: {offlineThresholdPercent: 95}
    nodes:                             # per-node overrides, by node labels, applied in order
    - selector: {pool: latency-critical}
      spec: {cpu: {offlineThresholdPercent: 50}}

Everything is typed and checked when the file is read: an unknown key, a
number that is not finite (``.nan``, ``.inf``) or outside its range (a
percentage outside 0–100, an eviction ``interval`` under 100 ms), a low
watermark above its high one — in the spec, in each node override, and
wherever windows are open, merged as they apply — a malformed window or time
zone, a structure of the wrong shape is a :class:`ProfileError` (one line)
naming the key; nothing else escapes.  :class:`ProfileWatcher` keeps the last
good profile in force and counts a refused reload.  A Kubernetes ConfigMap
holding the YAML under one key is accepted as is.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import threading
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


MAX_NODES = 20_000   # YAML nodes in one profile (an alias bomb is refused, not expanded)
MAX_DEPTH = 50       # nesting depth


class ProfileError(InputError):
    pass


def _show(raw: Any) -> str:
    """A value as a message shows it: its repr, on one line, cut short."""
    text = repr(raw)
    return text if len(text) <= 60 else text[:57] + "..."


def _key(key: Any) -> str:
    """A mapping key as a message names it (plain names as they are; anything else as its repr, cut short)."""
    if isinstance(key, str) and key.isprintable() and len(key) <= 60:
        return key
    return _show(key)


def _pct(default: float, upper: float = 100.0) -> float:
    return field(default=default, metadata={"min": 0.0, "max": upper})


@dataclass(frozen=True)
class CpuSettings:
    offline_threshold_percent: float = _pct(80.0)  # offline quota = capacity × this − online − system
    offline_floor_percent: float = _pct(5.0)       # ... but never below this share of capacity
    use_cpu_idle: bool = True                      # SCHED_IDLE for offline pods where the kernel has cpu.idle
    # Where offline pods are SCHED_IDLE the kernel already gives every online wake-up the CPU at once, so
    # the quota stays open and clamps (to the threshold above) only while online signals call for it:
    # online use rising by onlineRisePercent of the node within a fast window, or online tasks stalled
    # waiting for a CPU (PSI) more than onlineStallPercent of the time.  false: always clamped.
    clamp_on_signals: bool = True
    online_rise_percent: float = _pct(20.0)
    online_stall_percent: float = _pct(10.0)
    clamp_hold: float = field(default=0.2, metadata={"duration": True, "min": 0.0, "max": 60.0})


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
    cpu_high_percent: float = _pct(95.0)    # online + system CPU (never offline work's own) above this ...
    cpu_low_percent: float = _pct(85.0)     # ... evicts offline pods until it is below this
    memory_high_percent: float = _pct(92.0)  # node memory in use (working set) above this ...
    memory_low_percent: float = _pct(85.0)
    memory_stall_percent: float = _pct(20.0)  # ... or node memory PSI "full avg10" at least this (0: off)
    samples: int = field(default=3, metadata={"min": 1, "max": 1000})  # consecutive samples above high
    # Offline pods starve while the CPU they can get (what online and system work leave, within the quota)
    # is below starvationPercent of what they request and they use at least starvationUsagePercent of it.
    starvation_percent: float = _pct(50.0)
    starvation_usage_percent: float = _pct(90.0)
    starvation_samples: int = field(default=10, metadata={"min": 1, "max": 1000})
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


def numeric_settings(spec: ProfileSpec) -> dict[str, float]:
    """The spec's numbers and switches by their profile names (``cpu.offlineThresholdPercent``; true is 1)."""
    out = {}
    for section in _SECTIONS:
        values = getattr(spec, section)
        for f in dataclasses.fields(values):
            value = getattr(values, f.name)
            if isinstance(value, (bool, int, float)):
                out[f"{section}.{_camel(f.name)}"] = float(value)
    return out


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
        except (ValueError, OverflowError) as exc:
            raise ProfileError(f"{where}: {exc}") from None
    elif kind == "bool":
        if not isinstance(raw, bool):
            raise ProfileError(f"{where}: expected true or false, got {_show(raw)}")
        value = raw
    elif kind in ("int", "float"):
        value = _number(raw, kind, where)
    elif kind.startswith("tuple"):
        if not isinstance(raw, list) or not all(isinstance(x, str) and x.upper() in LEVELS for x in raw):
            raise ProfileError(f"{where}: expected a list of QoS levels ({', '.join(LEVELS)}), got {_show(raw)}")
        value = tuple(x.upper() for x in raw)
    else:
        value = raw
    _check_range(meta, value, raw, where)
    return value


def _number(raw: Any, kind: str, where: str) -> int | float:
    """A finite number of the field's kind; ProfileError otherwise (NaN and infinities included)."""
    wanted = "an integer" if kind == "int" else "a number"
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise ProfileError(f"{where}: expected {wanted}, got {_show(raw)}")
    if isinstance(raw, float) and not math.isfinite(raw):
        raise ProfileError(f"{where}: must be a finite number, got {_show(raw)}")
    if kind == "int":
        if isinstance(raw, float) and not raw.is_integer():
            raise ProfileError(f"{where}: expected {wanted}, got {_show(raw)}")
        return int(raw)
    try:
        return float(raw)
    except OverflowError:  # an integer too large for a float
        raise ProfileError(f"{where}: {_show(raw)} is out of range") from None


def _check_range(meta: Any, value: Any, raw: Any, where: str) -> None:
    low, high = meta.get("min"), meta.get("max")
    if (low is None or value >= low) and (high is None or value <= high):
        return
    unit = "s" if meta.get("duration") else ""
    if low is not None and high is not None:
        rule = f"must be between {low:g}{unit} and {high:g}{unit}"
    elif low is not None:
        rule = f"must be at least {low:g}{unit}"
    else:
        rule = f"must be at most {high:g}{unit}"
    raise ProfileError(f"{where}: {rule}, got {_show(raw)}")


def _section(cls: type[_Section], raw: Any, where: str) -> _Section:
    if raw is None:
        return cls()
    if not isinstance(raw, dict):
        raise ProfileError(f"{where}: expected a mapping")
    fields = {_camel(f.name): f for f in dataclasses.fields(cls)}
    values = {}
    for key, value in raw.items():
        f = fields.get(key) if isinstance(key, str) else None
        if f is None:
            raise ProfileError(f"{where}.{_key(key)}: unknown key; known: {', '.join(sorted(fields))}")
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
            raise ProfileError(f"{where}.{_key(key)}: unknown key; a window may set {', '.join(_SECTIONS)}")
    _spec(overrides, where)  # check what it sets now, not when the window opens
    return Window(span, overrides)


def _spec(raw: Any, where: str) -> ProfileSpec:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ProfileError(f"{where}: expected a mapping")
    for key in raw:
        if key not in (*_SECTIONS, "timezone", "windows"):
            raise ProfileError(f"{where}.{_key(key)}: unknown key; known: "
                               f"{', '.join([*_SECTIONS, 'timezone', 'windows'])}")
    # one instance of each section's class, under ProfileSpec's field names
    sections: dict[str, Any] = {name: _section(cls, raw.get(name), f"{where}.{name}") for name, cls in _SECTIONS.items()}
    tz = raw.get("timezone") or ""
    if tz:
        if not isinstance(tz, str):
            raise ProfileError(f"{where}.timezone: expected a time zone name, got {_show(tz)}")
        try:
            ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a folder of zones, a name too long
            raise ProfileError(f"{where}.timezone: unknown time zone {_show(tz)}") from None
    windows = raw.get("windows") or []
    if not isinstance(windows, list):
        raise ProfileError(f"{where}.windows: expected a list")
    return ProfileSpec(**sections, timezone=tz,
                       windows=tuple(_window(w, f"{where}.windows[{i}]") for i, w in enumerate(windows)))


def _checked(raw: Any, where: str) -> ProfileSpec:
    """``_spec`` of ``raw``, and of ``raw`` with its windows merged in as they are open together at every
    minute of the day: a window valid alone but not on top of the spec (a low watermark above the high one
    it meets) is refused now, not on every tick while it is open."""
    spec = _spec(raw, where)
    if not spec.windows:
        return spec
    base = {k: v for k, v in raw.items() if k != "windows"}
    seen: set[tuple[int, ...]] = set()
    for minute in sorted({m for w in spec.windows for m in (w.span.start, w.span.end)}):
        t = dtime(minute // 60, minute % 60)
        open_now = tuple(i for i, w in enumerate(spec.windows) if w.contains(t))
        if not open_now or open_now in seen:
            continue
        seen.add(open_now)
        merged = base
        for i in open_now:
            merged = _merge(merged, spec.windows[i].overrides)
        try:
            _spec(merged, where)
        except ProfileError as exc:
            names = " and ".join(f"windows[{i}]" for i in open_now)
            raise ProfileError(f"{exc} (with {names} open, from {t:%H:%M})") from None
    return spec


def _merge(base: dict, over: Any) -> dict:
    """``base`` with ``over`` merged in (mappings key by key; anything else replaces); ``over`` a mapping."""
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


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def parse_profile(text: str, source: str = "<profile>") -> QosProfile:
    """The profile ``text`` holds; ProfileError (one line, naming ``source`` and the key) if it is not one."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise ProfileError(f"{source}: invalid YAML{where}: {problem}") from None
    except RecursionError:
        raise ProfileError(f"{source}: invalid YAML: nested too deeply") from None
    _check_size(doc, source)
    if isinstance(doc, dict) and doc.get("kind") == "ConfigMap":
        data = doc.get("data") or {}
        entries = [v for v in data.values() if isinstance(v, str)] if isinstance(data, dict) else []
        if len(entries) != 1:
            raise ProfileError(f"{source}: a ConfigMap must hold the profile as its one data entry")
        return parse_profile(entries[0], source)
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ProfileError(f"{source}: expected a mapping with name, spec and nodes")
    for key in doc:
        if key not in ("name", "spec", "nodes", "apiVersion", "kind"):
            raise ProfileError(f"{source}: {_key(key)}: unknown key; expected name, spec, nodes")
    name = doc.get("name") or "default"
    if not isinstance(name, (str, int, float)) or isinstance(name, bool):
        raise ProfileError(f"{source}: name: expected a string, got {_show(name)}")
    try:
        raw = doc.get("spec") or {}
        if not isinstance(raw, dict):
            raise ProfileError(f"spec: expected a mapping, got {_show(raw)}")
        spec = _checked(raw, "spec")
        nodes = [_override(item, raw, f"nodes[{i}]") for i, item in enumerate(_list(doc.get("nodes"), "nodes"))]
    except ProfileError as exc:
        raise ProfileError(f"{source}: {exc}") from None
    return QosProfile(str(name), _digest(text), raw, spec,
                      tuple(nodes))


def _list(raw: Any, where: str) -> list:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ProfileError(f"{where}: expected a list, got {_show(raw)}")
    return raw


def _override(item: Any, base: dict, where: str) -> NodeOverride:
    """One ``nodes[]`` entry: a selector of label values, and a spec that is valid merged over ``base``."""
    if not isinstance(item, dict) or set(item) - {"selector", "spec"} or not isinstance(item.get("selector"), dict):
        raise ProfileError(f"{where}: expected selector (labels) and spec")
    selector = {}
    for k, v in item["selector"].items():
        if not isinstance(k, str) or not isinstance(v, (str, int, float, bool)):
            raise ProfileError(f"{where}.selector.{_key(k)}: expected a label name and value, got {_show(v)}")
        selector[k] = str(v).lower() if isinstance(v, bool) else str(v)
    override = item.get("spec") or {}
    if not isinstance(override, dict):
        raise ProfileError(f"{where}.spec: expected a mapping, got {_show(override)}")
    _checked(_merge(base, override), f"{where}.spec")  # the merged result must be valid too
    return NodeOverride(selector, override)


def _check_size(doc: Any, source: str) -> None:
    """Refuse a document with more than MAX_NODES values or nested deeper than MAX_DEPTH (counting every
    use of an alias, so a small file that expands to millions of values is refused, not walked)."""
    count = 0
    stack: list[tuple[Any, int]] = [(doc, 0)]
    while stack:
        value, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise ProfileError(f"{source}: more than {MAX_NODES} values: not a QoS profile")
        if depth > MAX_DEPTH:
            raise ProfileError(f"{source}: nested more than {MAX_DEPTH} deep: not a QoS profile")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for kv in value.items() for v in kv)
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)


DEFAULT_PROFILE = parse_profile("name: builtin\n", "<builtin>")


class ProfileWatcher:
    """The profile in force: this agent's ``--profile`` file, re-read when it changes, or else the one the
    scheduler hands out (``serve --qos-profile``, in a directive after connecting and whenever it changes).
    A refused profile keeps the previous one; an agent with a file of its own keeps it and says once that it
    does not take the scheduler's.

    Every reload ends in ``on_result("success")`` or, once per distinct problem, ``on_result("refused")``
    (the agent counts them); nothing a file or a directive holds makes :meth:`poll` raise."""

    def __init__(self, path: str | Path | None, on_result: Callable[[str], None] | None = None):
        self.path = Path(path) if path else None
        self.on_result = on_result or (lambda result: None)
        self.current = DEFAULT_PROFILE if self.path is None else parse_profile(_read(self.path), str(self.path))
        self.last_error: str | None = None
        self._seen = self.current.digest
        self._lock = threading.Lock()
        self._offered: tuple[str, str] | None = None  # (name, text) handed over by the scheduler, not yet looked at
        self._said_pinned = False

    def offer(self, name: str, text: str) -> None:
        """The scheduler's profile (any thread): looked at by the next :meth:`poll`, which the slow tick calls."""
        with self._lock:
            self._offered = (name, text)

    def poll(self) -> bool:
        """Whether the profile in force changed."""
        with self._lock:
            offered, self._offered = self._offered, None
        if self.path is None:
            return offered is not None and self._take(offered[1], f"the scheduler's QoS profile {offered[0]!r}")
        if offered is not None and not self._said_pinned and _digest(offered[1]) != self.current.digest:
            log.warning("the scheduler hands out another QoS profile (%r); this agent keeps its own --profile %s",
                        offered[0], self.path)
            self._said_pinned = True
        try:
            text = _read(self.path)
        except ProfileError as exc:
            return self._refuse(str(exc))
        return self._take(text, str(self.path))

    def _take(self, text: str, source: str) -> bool:
        digest = _digest(text)
        if digest == self.current.digest:
            self.last_error = None
            self._seen = digest
            return False
        if digest == self._seen:
            return False
        try:
            profile = parse_profile(text, source)
        except ProfileError as exc:
            self._seen = digest
            return self._refuse(str(exc))
        self._seen = digest
        self.current, self.last_error = profile, None
        log.info("QoS profile %s in force (from %s)", profile.label, source)
        self.on_result("success")
        return True

    def _refuse(self, message: str) -> bool:
        if message != self.last_error:
            log.error("refused QoS profile, keeping %s: %s", self.current.label, message)
            self.on_result("refused")
        self.last_error = message
        return False


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ProfileError(f"{path}: not UTF-8 text (byte {exc.start})") from None
