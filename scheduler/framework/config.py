"""The scheduler configuration, in Volcano's format, validated and reloadable.

::

    actions: "enqueue, allocate, preempt, reclaim, backfill"
    tiers:
    - plugins:
      - name: priority
      - name: gang
    - plugins:
      - name: binpack
        arguments: {binpack.weight: 10}
    configurations:
    - name: allocate
      arguments: {}

A Volcano ConfigMap (``data: {volcano-scheduler.conf: ...}``) is accepted as
is.  Anything unknown — an action, a plugin, a flag, an argument — is a
:class:`ConfigError` naming where it is, and :class:`ConfigWatcher` keeps the
last good configuration when a new file is refused.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proto.errors import InputError
from scheduler.api.safeyaml import YamlError, load_one
from scheduler.framework.args import ArgError, Args
from scheduler.framework.plugin import ACTIONS, KNOWN_FLAGS, PLUGINS, Action, Plugin, require_registered

log = logging.getLogger(__name__)

DEFAULT_CONFIG = """\
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""

# Plugins that each own queue shares; running two would double-count.
_EXCLUSIVE = ("proportion", "capacity")


class ConfigError(InputError):
    pass


@dataclass(frozen=True)
class PluginConf:
    name: str
    flags: dict[str, bool]
    args: Args
    raw_args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SchedulerConfig:
    actions: tuple[str, ...]
    tiers: tuple[tuple[PluginConf, ...], ...]
    action_args: dict[str, Args]
    source: str = "<default>"
    digest: str = ""

    def plugin_names(self) -> list[str]:
        return [p.name for tier in self.tiers for p in tier]

    def build_tiers(self) -> list[list[Plugin]]:
        """Fresh plugin instances for one session."""
        return [[PLUGINS[p.name](p.args, p.flags) for p in tier] for tier in self.tiers]

    def build_actions(self) -> list[Action]:
        return [ACTIONS[name](self.action_args[name]) for name in self.actions]

    def has_periodic_action(self) -> bool:
        """Whether a configured action needs cycles as time passes, pending work or not."""
        return any(ACTIONS[name].periodic for name in self.actions)

    def plugin(self, name: str) -> PluginConf | None:
        for tier in self.tiers:
            for p in tier:
                if p.name == name:
                    return p
        return None


def parse_config(text: str, source: str = "<config>") -> SchedulerConfig:
    """Parse and validate a configuration; raise ConfigError with the place of the problem."""
    require_registered()
    doc = _read_yaml(text, source)
    doc = _unwrap_configmap(doc, source)
    if not isinstance(doc, dict):
        raise ConfigError(f"{source}: expected a mapping with actions and tiers")
    unknown = set(doc) - {"actions", "tiers", "configurations"}
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) {', '.join(sorted(map(str, unknown)))}; "
                          "expected actions, tiers, configurations")
    actions = _actions(doc.get("actions"), source)
    tiers = _tiers(doc.get("tiers"), source)
    action_args = _configurations(doc.get("configurations"), actions, source)
    return SchedulerConfig(actions, tiers, action_args, source, hashlib.sha256(text.encode()).hexdigest())


def _unwrap_configmap(doc: Any, source: str) -> Any:
    if isinstance(doc, dict) and doc.get("kind") == "ConfigMap":
        data = doc.get("data")
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: ConfigMap data: expected a mapping of file names to text")
        texts = [(k, v) for k, v in data.items() if str(k).endswith((".conf", ".yaml"))]
        if len(texts) != 1:
            raise ConfigError(f"{source}: ConfigMap must hold exactly one *.conf or *.yaml entry")
        key, text = texts[0]
        if not isinstance(text, str):
            raise ConfigError(f"{source}: ConfigMap data.{key}: expected the configuration as text")
        return _read_yaml(text, f"{source}: ConfigMap data.{key}")
    return doc


def _read_yaml(text: str, source: str) -> Any:
    """One YAML document as JSON values (bounded: see scheduler.api.safeyaml); ConfigError with the place."""
    try:
        return load_one(text)
    except YamlError as exc:
        where = f"{source}:{exc.line}:{exc.column}" if exc.line else source
        raise ConfigError(f"{where}: invalid YAML: {exc.problem}") from None


def _actions(raw: Any, source: str) -> tuple[str, ...]:
    if raw is None:
        raise ConfigError(f"{source}: actions: missing (e.g. \"enqueue, allocate, backfill\")")
    names = [a.strip() for a in raw.split(",")] if isinstance(raw, str) else raw
    if not isinstance(names, list) or not all(isinstance(a, str) for a in names):
        raise ConfigError(f"{source}: actions: expected a comma-separated string")
    names = [a for a in names if a]
    if not names:
        raise ConfigError(f"{source}: actions: must name at least one action")
    for name in names:
        if name not in ACTIONS:
            raise ConfigError(f"{source}: actions: unknown action {name!r}; known: {', '.join(sorted(ACTIONS))}")
    if len(set(names)) != len(names):
        raise ConfigError(f"{source}: actions: an action is listed twice")
    return tuple(names)


def _tiers(raw: Any, source: str) -> tuple[tuple[PluginConf, ...], ...]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{source}: tiers: expected a list of tiers, each with plugins")
    seen: set[str] = set()
    tiers = []
    for t, tier in enumerate(raw):
        where = f"{source}: tiers[{t}]"
        if not isinstance(tier, dict) or set(tier) - {"plugins"} or not isinstance(tier.get("plugins"), list):
            raise ConfigError(f"{where}: expected a mapping with a plugins list")
        plugins = []
        for p, opt in enumerate(tier["plugins"]):
            conf = _plugin(opt, f"{where}.plugins[{p}]")
            if conf.name in seen:
                raise ConfigError(f"{where}.plugins[{p}] ({conf.name}): plugin {conf.name!r} is listed twice")
            seen.add(conf.name)
            plugins.append(conf)
        tiers.append(tuple(plugins))
    both = [name for name in _EXCLUSIVE if name in seen]
    if len(both) > 1:
        raise ConfigError(f"{source}: plugins {' and '.join(both)} both manage queue shares; enable only one")
    return tuple(tiers)


def _plugin(opt: Any, where: str) -> PluginConf:
    if not isinstance(opt, dict) or not isinstance(opt.get("name"), str):
        raise ConfigError(f"{where}: expected a mapping with a name")
    name = opt["name"]
    where = f"{where} ({name})"
    if name not in PLUGINS:
        raise ConfigError(f"{where}: unknown plugin {name!r}; known: {', '.join(sorted(PLUGINS))}")
    flags: dict[str, bool] = {}
    for key, value in opt.items():
        if key in ("name", "arguments"):
            continue
        if key not in KNOWN_FLAGS:
            raise ConfigError(f"{where}: unknown option {key!r}; expected name, arguments or an enable* flag")
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: {key}: expected true or false, got {value!r}")
        flags[key] = value
    raw_args = opt.get("arguments") or {}
    try:
        args = PLUGINS[name].parse(raw_args)
        PLUGINS[name].check_flags(flags)
    except (ArgError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    for warning in args.warnings:
        log.warning("%s: %s", where, warning)
    return PluginConf(name, flags, args, dict(raw_args))


def _configurations(raw: Any, actions: tuple[str, ...], source: str) -> dict[str, Args]:
    given: dict[str, Any] = {}
    if raw is not None:
        if not isinstance(raw, list):
            raise ConfigError(f"{source}: configurations: expected a list")
        for i, item in enumerate(raw):
            where = f"{source}: configurations[{i}]"
            if not isinstance(item, dict) or not isinstance(item.get("name"), str) or set(item) - {"name", "arguments"}:
                raise ConfigError(f"{where}: expected a mapping with name and arguments")
            if item["name"] not in ACTIONS:
                raise ConfigError(f"{where}: unknown action {item['name']!r}")
            given[item["name"]] = (where, item.get("arguments") or {})
    out = {}
    for name in set(actions) | set(given):
        where, raw_args = given.get(name, (source, {}))
        try:
            out[name] = ACTIONS[name].parse(raw_args)
        except ArgError as exc:
            raise ConfigError(f"{where} ({name}): {exc}") from None
        for warning in out[name].warnings:
            log.warning("%s (%s): %s", where, name, warning)
    return out


def default_config() -> SchedulerConfig:
    return parse_config(DEFAULT_CONFIG, "<default>")


def load_config(path: str | Path) -> SchedulerConfig:
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    return parse_config(text, str(path))


class ConfigWatcher:
    """Holds the configuration in force and reloads it when the file changes.

    A file that fails to parse or validate is refused: the error is logged and
    kept in ``last_error``, and the previous configuration stays in force.
    """

    def __init__(self, path: str | Path, on_result: Callable[[str], None] | None = None):
        self.path = Path(path)
        self.on_result = on_result or (lambda result: None)
        self.current = load_config(self.path)
        self._refused: str | None = None  # digest of the last refused file content
        self.last_error: str | None = None

    def poll(self) -> bool:
        """Check the file; return True when a new configuration took effect."""
        try:
            text = self.path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            return self._refuse(f"{self.path}: cannot read: {exc}", digest=None)
        digest = hashlib.sha256(text.encode()).hexdigest()
        if digest == self.current.digest:  # the configuration in force (again)
            self._refused, self.last_error = None, None
            return False
        if digest == self._refused:  # already refused; said once
            return False
        try:
            config = parse_config(text, str(self.path))
        except ConfigError as exc:
            return self._refuse(str(exc), digest=digest)
        self.current, self.last_error, self._refused = config, None, None
        log.info("scheduler configuration reloaded from %s: actions %s", self.path, ", ".join(config.actions))
        self.on_result("success")
        return True

    def _refuse(self, message: str, digest: str | None) -> bool:
        repeated = digest is None and message == self.last_error
        if not repeated:
            log.error("refused new scheduler configuration, keeping the previous one: %s", message)
            self.on_result("refused")
        self.last_error, self._refused = message, digest
        return False
