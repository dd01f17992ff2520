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
    metrics: {type: prometheus, address: "http://prometheus:9090"}

A Volcano ConfigMap (``data: {volcano-scheduler.conf: ...}``) is accepted as
is, and so is every configuration Volcano ships (``tests/fixtures/volcano-configs``).
Each name and key is one of three things:

* implemented: checked and used;
* known to Volcano but not implemented by Scoria (a Volcano plugin Scoria will
  not have, such as ``pdb``, which loads as a placeholder that does nothing; an
  argument, an ``enable*`` option or a ``configurations[]`` entry Volcano reads;
  the top-level ``metrics`` block, as Scoria reads load from its agents):
  accepted, named with its place in a WARNING when the configuration loads,
  and listed in :attr:`SchedulerConfig.unimplemented` for the
  ``scoria_scheduler_config_unimplemented`` metric, never silently ignored;
* unknown: a :class:`ConfigError` naming where it is, with the closest known
  name (``tiers[0].plugins[1] (binpack): unknown argument 'binpack.wieght';
  did you mean 'binpack.weight'?``).

The tables of what Volcano knows are in ``scheduler.framework.plugin``.  Two
Volcano actions are refused rather than accepted: ``gangpreempt`` and
``gangreclaim`` (an action that silently does nothing would leave its work undone).

``proportion`` and ``capacity`` may be enabled together, as in Volcano: each
keeps its own queue shares, and the session combines their answers as it does
for any two plugins (a task must be allocatable under both, a queue is overused
if either says so, reclaim victims are those both allow in the first tier that
answers), so nothing is counted twice; the stricter limit wins.  Volcano refuses
one combination, ``proportion`` with ``drf`` under ``enableHierarchy: true``
in the same tier (util.go unmarshalSchedulerConf), and so does Scoria; in two
tiers both load, as in Volcano, and their answers combine like any others.

:class:`ConfigWatcher` keeps the last good configuration when a new file is refused.
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
from scheduler.framework.args import ArgError, Args, did_you_mean, parse_args
from scheduler.framework.plugin import (
    ACTIONS,
    HOOKLESS_FLAGS,
    KNOWN_FLAGS,
    MISSING_ACTIONS,
    PLACEHOLDER_PLUGINS,
    PLUGINS,
    VOLCANO_ACTION_ARGUMENTS,
    VOLCANO_CONFIGURATIONS,
    VOLCANO_METRICS_KEYS,
    VOLCANO_PLUGIN_ARGUMENTS,
    Action,
    Plugin,
    require_registered,
)

log = logging.getLogger(__name__)

DEFAULT_CONFIG = """\
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: overcommit
  - name: proportion
- plugins:
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: nodeorder
  - name: binpack
"""
# Volcano's default, but with overcommit and proportion in the first tier: victims come from the first tier
# that names any (Volcano's rule), so a queue-share plugin in a later tier would never be asked and reclaim
# could take a queue below its deserved share (volcano-sh/volcano#5896).  Enqueue votes the same either way
# (overcommit and proportion still vote together, before anything else that votes).

_TOP_LEVEL = ("actions", "tiers", "configurations", "metrics")  # Volcano's SchedulerConfiguration


class ConfigError(InputError):
    pass


@dataclass(frozen=True)
class Unimplemented:
    """A setting Volcano knows that Scoria accepts without acting on it.

    ``kind`` is ``plugin`` (a plugin's argument or option; ``key`` empty for a
    placeholder plugin itself), ``action`` (an action's argument),
    ``configuration`` (a ``configurations[]`` entry for something Scoria does not
    run; ``key`` empty for the entry itself) or ``metrics`` (a key of the
    top-level block).  ``message`` is the warning, with the place.
    """

    kind: str
    name: str
    key: str
    message: str


@dataclass(frozen=True)
class PluginConf:
    name: str
    flags: dict[str, bool]
    args: Args
    raw_args: dict[str, Any] = field(default_factory=dict)
    placeholder: bool = False  # a Volcano plugin Scoria does not have: no instance is built


@dataclass(frozen=True)
class SchedulerConfig:
    actions: tuple[str, ...]
    tiers: tuple[tuple[PluginConf, ...], ...]
    action_args: dict[str, Args]
    source: str = "<default>"
    digest: str = ""
    unimplemented: tuple[Unimplemented, ...] = ()

    def plugin_names(self) -> list[str]:
        return [p.name for tier in self.tiers for p in tier]

    def build_tiers(self) -> list[list[Plugin]]:
        """Fresh plugin instances for one session (placeholders have none; a tier of only placeholders is left out)."""
        tiers = [[PLUGINS[p.name](p.args, p.flags) for p in tier if not p.placeholder] for tier in self.tiers]
        return [tier for tier in tiers if tier]

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
    """Parse and validate a configuration; raise ConfigError with the place of the problem.

    What is accepted without effect is logged as a WARNING, once the whole configuration is valid.
    """
    require_registered()
    doc = _read_yaml(text, source)
    doc = _unwrap_configmap(doc, source)
    if not isinstance(doc, dict):
        raise ConfigError(f"{source}: expected a mapping with actions and tiers")
    for key in doc:
        if key not in _TOP_LEVEL:
            hint = did_you_mean(str(key), _TOP_LEVEL) or f"; expected {', '.join(_TOP_LEVEL)}"
            raise ConfigError(f"{source}: unknown key {key!r}{hint}")
    unimplemented: list[Unimplemented] = []
    actions = _actions(doc.get("actions"), source)
    tiers = _tiers(doc.get("tiers"), source, unimplemented)
    action_args = _configurations(doc.get("configurations"), actions, source, unimplemented)
    _metrics(doc.get("metrics"), source, unimplemented)
    for item in unimplemented:
        log.warning("%s", item.message)
    return SchedulerConfig(actions, tiers, action_args, source, hashlib.sha256(text.encode()).hexdigest(),
                           tuple(unimplemented))


def _shown(name: str) -> str:
    """A name as it goes into a one-line message: as written, or quoted when it holds a newline or the like."""
    return name if name.isprintable() else repr(name)


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
        if name in MISSING_ACTIONS and name not in ACTIONS:
            raise ConfigError(f"{source}: actions: Volcano's action {name!r} is not implemented in Scoria: "
                              f"{MISSING_ACTIONS[name]}")
        if name not in ACTIONS:
            hint = did_you_mean(name, [*ACTIONS, *MISSING_ACTIONS]) or f"; known: {', '.join(sorted(ACTIONS))}"
            raise ConfigError(f"{source}: actions: unknown action {name!r}{hint}")
    if len(set(names)) != len(names):
        raise ConfigError(f"{source}: actions: an action is listed twice")
    return tuple(names)


def _tiers(raw: Any, source: str, unimplemented: list[Unimplemented]) -> tuple[tuple[PluginConf, ...], ...]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{source}: tiers: expected a list of tiers, each with plugins")
    seen: dict[str, PluginConf] = {}
    tiers = []
    for t, tier in enumerate(raw):
        where = f"{source}: tiers[{t}]"
        if not isinstance(tier, dict) or set(tier) - {"plugins"} or not isinstance(tier.get("plugins"), list):
            raise ConfigError(f"{where}: expected a mapping with a plugins list")
        plugins = []
        for p, opt in enumerate(tier["plugins"]):
            conf = _plugin(opt, f"{where}.plugins[{p}]", unimplemented)
            if conf.name in seen:
                raise ConfigError(f"{where}.plugins[{p}] ({conf.name}): plugin {conf.name!r} is listed twice")
            seen[conf.name] = conf
            plugins.append(conf)
        names = {p.name: p for p in plugins}
        drf = names.get("drf")
        if "proportion" in names and drf is not None and drf.flags.get("enableHierarchy"):
            raise ConfigError(f"{where}: proportion and drf with enableHierarchy both divide the cluster between "
                              "queues; enable only one per tier (Volcano refuses this combination too)")
        tiers.append(tuple(plugins))
    return _legacy_gpu_sharing(tiers, source)


# Volcano <=1.8 turned its GPU-share modes on in predicates; Volcano >=1.9 reads them from deviceshare
_LEGACY_GPU_FLAGS = {"gpu_sharing": "GPUSharingEnable", "gpu_number": "GPUNumberEnable"}


def _legacy_gpu_sharing(tiers: list[tuple[PluginConf, ...]], source: str) -> tuple[tuple[PluginConf, ...], ...]:
    """``predicate.GPUSharingEnable``/``GPUNumberEnable`` read as the deviceshare flags they became.

    A configuration written for Volcano <=1.8 keeps meaning what it meant: the
    flag is set on the configured deviceshare plugin, or a deviceshare plugin
    with just that flag joins predicates' tier right after it.  Either way the
    result is checked as if written so (both modes, or a mode with vGPUs, is
    refused as Volcano refuses it).
    """
    located = [(t, p, conf) for t, tier in enumerate(tiers) for p, conf in enumerate(tier) if conf.name == "predicates"]
    if not located:
        return tuple(tiers)
    t, p, predicates = located[0]
    wanted = {f"deviceshare.{flag}": True for attr, flag in _LEGACY_GPU_FLAGS.items()
              if getattr(predicates.args, attr, False)}
    if not wanted:
        return tuple(tiers)
    where = f"{source}: tiers[{t}].plugins[{p}] (predicates)"
    said = f"{', '.join('predicate.' + key.split('.', 1)[1] for key in wanted)} read as {', '.join(wanted)}"
    ds = [(dt, dp, conf) for dt, tier in enumerate(tiers) for dp, conf in enumerate(tier) if conf.name == "deviceshare"]
    raw = {**(ds[0][2].raw_args if ds else {}), **wanted}
    try:
        args = PLUGINS["deviceshare"].parse(raw)
    except (ArgError, ValueError) as exc:
        raise ConfigError(f"{where}: {said}: {exc}") from None
    log.info("%s: %s (Volcano <=1.8's spelling)", where, said)
    out = [list(tier) for tier in tiers]
    if ds:
        dt, dp, conf = ds[0]
        out[dt][dp] = PluginConf(conf.name, conf.flags, args, raw, conf.placeholder)
    else:
        out[t].insert(p + 1, PluginConf("deviceshare", {}, args, raw))
    return tuple(tuple(tier) for tier in out)


def _plugin(opt: Any, where: str, unimplemented: list[Unimplemented]) -> PluginConf:
    if not isinstance(opt, dict) or not isinstance(opt.get("name"), str):
        raise ConfigError(f"{where}: expected a mapping with a name")
    name = opt["name"]
    where = f"{where} ({_shown(name)})"
    placeholder = name not in PLUGINS and name in PLACEHOLDER_PLUGINS
    if name not in PLUGINS and not placeholder:
        if name in VOLCANO_PLUGIN_ARGUMENTS:
            raise ConfigError(f"{where}: Volcano's plugin {name!r} is not implemented in this Scoria")
        hint = did_you_mean(name, [*PLUGINS, *PLACEHOLDER_PLUGINS]) or f"; known: {', '.join(sorted(PLUGINS))}"
        raise ConfigError(f"{where}: unknown plugin {name!r}{hint}")
    flags = _flags(opt, where)
    raw_args = opt.get("arguments") or {}
    try:
        if placeholder:
            does_nothing = f"the {name} plugin does nothing in Scoria"
            args = parse_args({}, raw_args, dict.fromkeys(VOLCANO_PLUGIN_ARGUMENTS.get(name, {}), does_nothing))
        else:
            args = PLUGINS[name].parse(raw_args)
            PLUGINS[name].check_flags(flags)
    except (ArgError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if placeholder:
        unimplemented.append(Unimplemented("plugin", name, "", f"{where}: plugin {name!r} is accepted but does "
                                           f"nothing: {PLACEHOLDER_PLUGINS[name]}"))
    else:
        unimplemented.extend(Unimplemented("plugin", name, flag, f"{where}: option {flag!r} has no effect: Scoria "
                                           f"has no {HOOKLESS_FLAGS[flag]} hook")
                             for flag in flags if flag in HOOKLESS_FLAGS)
    unimplemented.extend(_argument_notes("plugin", name, where, args))
    return PluginConf(name, flags, args, dict(raw_args), placeholder)


def _flags(opt: dict[str, Any], where: str) -> dict[str, bool]:
    flags: dict[str, bool] = {}
    for key, value in opt.items():
        if key in ("name", "arguments"):
            continue
        if key not in KNOWN_FLAGS:
            hint = did_you_mean(str(key), KNOWN_FLAGS) or "; expected name, arguments or an enable* flag"
            raise ConfigError(f"{where}: unknown option {key!r}{hint}")
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: {key}: expected true or false, got {value!r}")
        flags[key] = value
    return flags


def _configurations(raw: Any, actions: tuple[str, ...], source: str,
                    unimplemented: list[Unimplemented]) -> dict[str, Args]:
    given: dict[str, Any] = {}
    if raw is not None:
        if not isinstance(raw, list):
            raise ConfigError(f"{source}: configurations: expected a list")
        for i, item in enumerate(raw):
            where = f"{source}: configurations[{i}]"
            if not isinstance(item, dict) or not isinstance(item.get("name"), str) or set(item) - {"name", "arguments"}:
                raise ConfigError(f"{where}: expected a mapping with name and arguments")
            name = item["name"]
            if name in ACTIONS:
                given[name] = (f"{where} ({_shown(name)})", item.get("arguments") or {})
            elif name in VOLCANO_ACTION_ARGUMENTS or name in VOLCANO_CONFIGURATIONS:
                _volcano_only(name, item.get("arguments") or {}, f"{where} ({_shown(name)})", unimplemented)
            else:
                known = [*ACTIONS, *VOLCANO_ACTION_ARGUMENTS, *VOLCANO_CONFIGURATIONS]
                hint = did_you_mean(name, known) or f"; known: {', '.join(sorted(ACTIONS))}"
                raise ConfigError(f"{where}: unknown action {name!r}{hint}")
    out = {}
    for name in set(actions) | set(given):
        where, raw_args = given.get(name, (source, {}))
        try:
            args = ACTIONS[name].parse(raw_args)
        except ArgError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        unimplemented.extend(_argument_notes("action", name, where, args))
        out[name] = args
    return out


def _volcano_only(name: str, raw_args: Any, where: str, unimplemented: list[Unimplemented]) -> None:
    """A ``configurations[]`` entry for something only Volcano runs: its keys checked, the entry warned about."""
    if name in VOLCANO_CONFIGURATIONS:
        reason, keys = VOLCANO_CONFIGURATIONS[name]
    else:
        reason, keys = MISSING_ACTIONS[name], tuple(VOLCANO_ACTION_ARGUMENTS[name])
    try:
        args = parse_args({}, raw_args, dict.fromkeys(keys, f"Scoria does not read {name!r}"))
    except ArgError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    unimplemented.append(Unimplemented("configuration", name, "", f"{where}: configuration {name!r} has no "
                                       f"effect: {reason}"))
    unimplemented.extend(_argument_notes("configuration", name, where, args))


def _argument_notes(kind: str, name: str, where: str, args: Args) -> list[Unimplemented]:
    """The arguments ``args`` accepted without acting on them, each with its warning; its other notes
    (a value read differently from how it was written) are logged here."""
    for note in args.notes:
        log.warning("%s: %s", where, note)
    return [Unimplemented(kind, name, key, f"{where}: argument {key!r} has no effect: {reason}")
            for key, reason in args.unimplemented]


def _metrics(raw: Any, source: str, unimplemented: list[Unimplemented]) -> None:
    """Volcano's ``metrics`` block (where Volcano reads node load): every key known and warned about.

    Volcano reads flat keys (``tls.insecureSkipVerify``); the nested form its
    usage design shows (``tls: {insecureSkipVerify: ...}``) is read as the same keys.
    """
    if raw is None:
        return
    where = f"{source}: metrics"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping of settings ({', '.join(VOLCANO_METRICS_KEYS)})")
    flat: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{sub}": item for sub, item in value.items()})
        else:
            flat[str(key)] = value
    for key, value in flat.items():
        if key not in VOLCANO_METRICS_KEYS:
            hint = did_you_mean(key, VOLCANO_METRICS_KEYS) or f"; known: {', '.join(VOLCANO_METRICS_KEYS)}"
            raise ConfigError(f"{where}: unknown key {key!r}{hint}")
        if isinstance(value, (dict, list)):
            raise ConfigError(f"{where}: {key}: expected a string, got {value!r}")
        unimplemented.append(Unimplemented("metrics", "metrics", key, f"{where}: key {key!r} has no effect: "
                                           f"{VOLCANO_METRICS_KEYS[key]}"))


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
    ``on_result`` hears each reload's result (``success``, ``refused``);
    ``on_config`` each configuration that takes effect, the first included.
    """

    def __init__(self, path: str | Path, on_result: Callable[[str], None] | None = None,
                 on_config: Callable[[SchedulerConfig], None] | None = None):
        self.path = Path(path)
        self.on_result = on_result or (lambda result: None)
        self.on_config = on_config or (lambda config: None)  # each configuration as it takes effect
        self.current = load_config(self.path)
        self.on_config(self.current)
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
        self.on_config(config)
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
