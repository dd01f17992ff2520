"""The README's "Volcano compatibility" table, made from the registries: ``python hack/volcano_compat.py``.

Every action, plugin and argument Volcano's scheduler reads (``scheduler.framework.plugin``'s tables of
Volcano's keys) is listed with what Scoria does with it:

* **supported** — registered and acting on it, with Volcano's meaning;
* **warned** — accepted, named in a warning at load and counted in ``scoria_scheduler_config_unimplemented``,
  without effect (the reason is given);
* **different** — supported, but deliberately not exactly as Volcano (the reason is given);
* **refused** — a configuration naming it does not load (the reason is given).

``--write`` replaces the table in README.md; ``tests/test_shipped.py`` checks the README holds what this prints.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scheduler.builtins import register_builtins  # noqa: E402
from scheduler.framework.plugin import (  # noqa: E402
    ACTIONS,
    HOOKLESS_FLAGS,
    MISSING_ACTIONS,
    PLACEHOLDER_PLUGINS,
    PLUGINS,
    VOLCANO_ACTION_ARGUMENTS,
    VOLCANO_CONFIGURATIONS,
    VOLCANO_METRICS_KEYS,
    VOLCANO_PLUGIN_ARGUMENTS,
)

BEGIN, END = "<!-- volcano-compatibility:begin -->", "<!-- volcano-compatibility:end -->"

# Where Scoria acts on a setting but deliberately not exactly as Volcano: (kind, name, key) -> why.
DIFFERENT: dict[tuple[str, str, str], str] = {
    ("plugin", "usage", ""): "pods placed since a node's last report count against its thresholds "
                             "(volcano-sh/volcano#5313: a burst of binds onto one idle-looking node)",
    ("plugin", "cdp", ""): "the cool-down counts from this scheduler's bind (or the pod's creation), not the "
                           "PodScheduled condition: never longer than Volcano's",
    ("plugin", "task-topology", ""): "running pods of the job count for anti-affinity; an undone placement leaves "
                                     "its bucket; leftovers follow bucket order, not Go's map order",
    ("plugin", "deviceshare", "deviceshare.GPUNumberEnable"): "a card given whole by gpu-number is never also "
                                                              "shared by gpu-memory (Volcano counts it as 0 MiB used)",
    ("plugin", "extender", "extender.ignorable"): "an ignorable extender that fails is skipped for every hook "
                                                  "(Volcano's answer depends on the hook)",
    ("plugin", "drf", "enableNamespaceOrder"): "Volcano v1.7's namespace fair share (Volcano ≥1.8 ignores the "
                                               "flag); namespace weights are all 1 (no ResourceQuota is read)",
    ("plugin", "capacity", "ancestorReclaimLevel"): "a negative level is refused (Volcano falls back to 0)",
}


# Volcano's plugin options that turn on a mode rather than a hook, and the plugins that read them.
FLAG_READERS: dict[str, tuple[str, ...]] = {"enableHierarchy": ("capacity", "drf", "nodegroup"),
                                            "enableNamespaceOrder": ("drf",)}


def _declared_reason(owner: type, key: str, reason: str) -> str:
    """The owner's own word on a key it accepts without acting on it (its Arg's ``ignored``), else ``reason``."""
    for arg in getattr(owner, "arguments", {}).values():
        if arg.key == key and (arg.ignored or arg.unsupported):
            return arg.ignored or arg.unsupported
    return reason


def _status(kind: str, name: str, key: str, reason: str, acts: bool) -> str:
    why = DIFFERENT.get((kind, name, key))
    if why:
        return f"different: {why}"
    if acts:
        return "supported"
    return f"warned: {reason or 'not implemented'}"


def _shown(key: str) -> str:
    """A plugin argument as the table shows it: a prefix (``key.``, one argument per name) as ``key.<name>``."""
    return f"`{key}<name>`" if key.endswith(".") else f"`{key}`"


def rows() -> list[tuple[str, str, str]]:
    """(what, setting, status) for everything Volcano's scheduler configuration may say."""
    out: list[tuple[str, str, str]] = []
    for name in sorted(VOLCANO_ACTION_ARGUMENTS):
        if name in MISSING_ACTIONS:
            out.append((f"action `{name}`", "", f"refused: {MISSING_ACTIONS[name]}"))
            continue
        action = ACTIONS[name]
        out.append((f"action `{name}`", "", _status("action", name, "", "", True)))
        for key, reason in sorted(VOLCANO_ACTION_ARGUMENTS[name].items()):
            reason = _declared_reason(action, key, reason)
            out.append((f"action `{name}`", f"`{key}`", _status("action", name, key, reason, action.implements(key))))
    for name in sorted(VOLCANO_PLUGIN_ARGUMENTS):
        if name in PLACEHOLDER_PLUGINS and name not in PLUGINS:
            why = f"warned: loads as a no-op; {PLACEHOLDER_PLUGINS[name]}"
            out.append((f"plugin `{name}`", "", why))
            for key in sorted(VOLCANO_PLUGIN_ARGUMENTS[name]):  # accepted, each named in the warning, no effect
                out.append((f"plugin `{name}`", _shown(key), why))
            continue
        plugin = PLUGINS[name]
        out.append((f"plugin `{name}`", "", _status("plugin", name, "", "", True)))
        for key, reason in sorted(VOLCANO_PLUGIN_ARGUMENTS[name].items()):
            reason = _declared_reason(plugin, key, reason)
            out.append((f"plugin `{name}`", _shown(key), _status("plugin", name, key, reason, plugin.implements(key))))
        for flag in sorted(f for f, readers in FLAG_READERS.items() if name in readers):
            out.append((f"plugin `{name}`", f"`{flag}: true`", _status("plugin", name, flag, "", True)))
    for flag, hook in sorted(HOOKLESS_FLAGS.items()):
        out.append(("plugin option", f"`{flag}`", f"warned: Scoria has no {hook} hook"))
    for name, (why, keys) in sorted(VOLCANO_CONFIGURATIONS.items()):
        out.append((f"configuration `{name}`", ", ".join(f"`{k}`" for k in keys), f"warned: {why}"))
    for key, why in sorted(VOLCANO_METRICS_KEYS.items()):
        out.append(("`metrics`", f"`{key}`", f"warned: {why}"))
    return out


def table() -> str:
    lines = [BEGIN, "| Volcano | setting | in Scoria |", "|---|---|---|"]
    lines += [f"| {what} | {setting} | {status} |" for what, setting, status in rows()]
    lines.append(END)
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    register_builtins()
    text = table()
    if "--write" in argv:
        readme = ROOT / "README.md"
        current = readme.read_text()
        start, end = current.index(BEGIN), current.index(END) + len(END)
        readme.write_text(current[:start] + text + current[end:])
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
