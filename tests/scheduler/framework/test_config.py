"""Table-driven tests of plugin/action arguments (args.py) and the scheduler configuration (config.py)."""

from __future__ import annotations

import hashlib

import pytest
import yaml

from scheduler.framework.args import Arg, ArgError, parse_args, parse_duration
from scheduler.framework.config import (
    DEFAULT_CONFIG,
    ConfigError,
    ConfigWatcher,
    default_config,
    load_config,
    parse_config,
)
from scheduler.framework.plugin import PLUGINS

# --- durations ---

DURATIONS = [
    ("seconds", "90s", 90.0), ("hours-minutes", "1h30m", 5400.0), ("milliseconds", "500ms", 0.5),
    ("int", 30, 30.0), ("float", 1.5, 1.5), ("bare-number-string", "45", 45.0), ("fractional-hours", "1.5h", 5400.0),
    ("minutes", "2m", 120.0), ("microseconds", "250us", 250e-6), ("micro-sign", "3µs", 3e-6),
    ("nanoseconds", "10ns", 10e-9), ("h-m-s", "1h2m3s", 3723.0), ("whitespace", " 10s ", 10.0), ("zero", "0s", 0.0),
]


@pytest.mark.parametrize("value, seconds", [c[1:] for c in DURATIONS], ids=[c[0] for c in DURATIONS])
def test_parse_duration(value, seconds):
    assert parse_duration(value) == pytest.approx(seconds)


BAD_DURATIONS = [("word", "abc"), ("empty", ""), ("unknown-unit", "5d"), ("trailing-number", "1h30"),
                 ("unit-only", "h"), ("inner-space", "1h 30m"), ("uppercase-unit", "10S"), ("bool", True),
                 ("garbage-after", "10sx")]


@pytest.mark.parametrize("value", [c[1] for c in BAD_DURATIONS], ids=[c[0] for c in BAD_DURATIONS])
def test_parse_duration_refuses(value):
    with pytest.raises(ValueError, match=r"expected a duration like '30s' or '1h', got"):
        parse_duration(value)


def test_parse_duration_refuses_nan():
    with pytest.raises(ValueError, match="expected a duration"):
        parse_duration("nan")


# --- parse_args ---

SPEC = {
    "count": Arg("count", "int", 3, minimum=1, maximum=10),
    "ratio": Arg("ratio", "float", 1.0, minimum=0),
    "on": Arg("on", "bool", True),
    "names": Arg("names", "list", ()),
    "wait": Arg("wait", "duration", None, minimum=0),
    "mode": Arg("mode", "str", "a", choices=("a", "b")),
    "weights": Arg("w.", "float", 1.0, minimum=0, prefix=True),
    "legacy": Arg("legacy", "float", 0.0, ignored="not implemented here"),
    "fancy": Arg("fancy", "bool", False, unsupported="no fancy mode"),
}

COERCIONS = [
    ("int-string", "count", "5", 5), ("int-int", "count", 7, 7), ("int-whole-float", "count", 4.0, 4),
    ("int-plus-sign", "count", "+3", 3), ("float-string", "ratio", "2.5", 2.5), ("float-int", "ratio", 3, 3.0),
    ("float-milli-quantity", "ratio", "500m", 0.5), ("float-exponent", "ratio", "1e2", 100.0),
    ("bool-true", "on", True, True), ("bool-false-string", "on", "false", False), ("bool-yes", "on", "Yes", True),
    ("bool-off", "on", "off", False), ("bool-one", "on", 1, True), ("bool-zero-string", "on", "0", False),
    ("list-comma-string", "names", "a, b,,c ", ("a", "b", "c")), ("list-yaml-list", "names", ["x", " y "], ("x", "y")),
    ("list-empty", "names", "", ()), ("duration", "wait", "1m", 60.0), ("duration-number", "wait", 5, 5.0),
    ("str-choice", "mode", "b", "b"), ("unsupported-at-default", "fancy", False, False),
    ("unsupported-default-as-text", "fancy", "no", False),
]


@pytest.mark.parametrize("key, raw, expected", [c[1:] for c in COERCIONS], ids=[c[0] for c in COERCIONS])
def test_parse_args_coerces(key, raw, expected):
    args = parse_args(SPEC, {key: raw})
    value = getattr(args, key)
    assert value == expected and type(value) is type(expected)
    assert args.warnings == ()


ARG_ERRORS = [
    ("int-fraction-string", {"count": "3.5"}, "argument 'count': expected an integer, got '3.5'"),
    ("int-fraction-float", {"count": 2.5}, "argument 'count': expected an integer, got 2.5"),
    ("int-bool", {"count": True}, "argument 'count': expected an integer, got True"),
    ("float-word", {"ratio": "abc"}, "argument 'ratio': expected a number, got 'abc'"),
    ("float-bool", {"ratio": False}, "argument 'ratio': expected a number, got False"),
    ("float-nan", {"ratio": float("nan")}, "argument 'ratio': expected a number"),
    ("bool-word", {"on": "maybe"}, "argument 'on': expected true or false, got 'maybe'"),
    ("bool-two", {"on": 2}, "argument 'on': expected true or false, got 2"),
    ("duration-word", {"wait": "soon"}, "argument 'wait': expected a duration"),
    ("below-minimum", {"count": 0}, "argument 'count': must be at least 1, got 0"),
    ("above-maximum", {"count": 11}, "argument 'count': must be at most 10, got 11"),
    ("float-below-minimum", {"ratio": "-0.5"}, "argument 'ratio': must be at least 0, got -0.5"),
    ("duration-negative", {"wait": -5}, "argument 'wait': must be at least 0, got -5.0"),
    ("not-a-choice", {"mode": "c"}, "argument 'mode': must be one of a, b, got 'c'"),
    ("unsupported-value", {"fancy": True}, "argument 'fancy': only False is supported (no fancy mode)"),
    ("prefix-bad-value", {"w.gpu": "x"}, "argument 'w.gpu': expected a number, got 'x'"),
    ("prefix-below-minimum", {"w.gpu": -1}, "argument 'w.gpu': must be at least 0, got -1.0"),
    ("prefix-alone", {"w.": 1}, "unknown argument 'w.'"),
    ("unknown", {"bogus": 1},
     "unknown argument 'bogus'; known: count, fancy, legacy, mode, names, on, ratio, wait, w.<name>"),
]


@pytest.mark.parametrize("raw, message", [c[1:] for c in ARG_ERRORS], ids=[c[0] for c in ARG_ERRORS])
def test_parse_args_refuses(raw, message):
    with pytest.raises(ArgError) as info:
        parse_args(SPEC, raw)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize("spec, raw, message", [
    ({}, {"x": 1}, "unknown argument 'x'; it takes no arguments"),
    (SPEC, ["count", 1], "arguments must be a mapping, got list"),
    (SPEC, "count=1", "arguments must be a mapping, got str"),
], ids=["no-arguments-declared", "list-not-mapping", "string-not-mapping"])
def test_parse_args_refuses_shape(spec, raw, message):
    with pytest.raises(ArgError, match=f"^{message}$"):
        parse_args(spec, raw)


@pytest.mark.parametrize("raw", [None, {}], ids=["none", "empty"])
def test_parse_args_defaults(raw):
    args = parse_args(SPEC, raw)
    assert args.as_dict() == {"count": 3, "ratio": 1.0, "on": True, "names": (), "wait": None, "mode": "a",
                              "weights": {}, "legacy": 0.0, "fancy": False}
    assert args.warnings == ()
    with pytest.raises(AttributeError, match="read-only"):
        args.count = 4
    with pytest.raises(AttributeError):
        _ = args.nothing


def test_prefix_arguments_collect_names_and_are_read_only():
    args = parse_args(SPEC, {"w.gpu": 2, "w.nvidia.com/gpu": "3", "ratio": 2})
    assert dict(args.weights) == {"gpu": 2.0, "nvidia.com/gpu": 3.0} and args.ratio == 2.0
    with pytest.raises(TypeError):
        args.weights["x"] = 1.0
    binpack = PLUGINS["binpack"].parse({"binpack.resources": "nvidia.com/gpu, example.com/foo",
                                        "binpack.resources.nvidia.com/gpu": 5})
    assert binpack.resources == ("nvidia.com/gpu", "example.com/foo")
    assert dict(binpack.resource_weights) == {"nvidia.com/gpu": 5.0}


@pytest.mark.parametrize("value, warnings", [
    (2, ("argument 'legacy' has no effect: not implemented here",)),
    ("0", ()),
], ids=["non-default-warns", "default-silent"])
def test_ignored_argument_warns_only_when_set(value, warnings):
    args = parse_args(SPEC, {"legacy": value})
    assert args.legacy == float(value) and args.warnings == warnings


# --- parse_config ---

def conf(actions="enqueue, allocate, backfill", tiers=None, **extra) -> str:
    doc = {"actions": actions, "tiers": tiers if tiers is not None else [
        {"plugins": [{"name": "priority"}, {"name": "gang"}]},
        {"plugins": [{"name": "drf"}, {"name": "predicates"}, {"name": "binpack"}]}], **extra}
    return yaml.safe_dump(doc, sort_keys=False)


def with_plugin(tier: int, index: int, **options) -> str:
    doc = yaml.safe_load(conf())
    doc["tiers"][tier]["plugins"][index].update(options)
    return yaml.safe_dump(doc, sort_keys=False)


def test_default_config():
    config = parse_config(DEFAULT_CONFIG, "<default>")
    assert config.actions == ("enqueue", "allocate", "preempt", "reclaim", "backfill")
    assert config.plugin_names() == ["priority", "gang", "conformance", "overcommit", "drf", "predicates",
                                     "proportion", "nodeorder", "binpack"]
    assert [len(t) for t in config.tiers] == [3, 6]
    assert config.plugin("drf").flags == {"enablePreemptable": False}
    assert config.plugin("capacity") is None
    assert set(config.action_args) == set(config.actions)
    assert config.digest == hashlib.sha256(DEFAULT_CONFIG.encode()).hexdigest()
    assert default_config().plugin_names() == config.plugin_names()
    assert [a.name for a in config.build_actions()] == list(config.actions)


@pytest.mark.parametrize("actions, expected", [
    ("allocate,backfill", ("allocate", "backfill")),
    (" reclaim , allocate ,", ("reclaim", "allocate")),
    (["enqueue", "allocate"], ("enqueue", "allocate")),
], ids=["comma-string", "spaces-and-trailing-comma", "yaml-list"])
def test_actions_forms(actions, expected):
    assert parse_config(conf(actions=actions)).actions == expected


def test_plugin_flags_and_arguments_are_kept():
    config = parse_config(with_plugin(1, 2, enableNodeOrder=False, arguments={"binpack.weight": 10}))
    binpack = config.plugin("binpack")
    assert binpack.flags == {"enableNodeOrder": False}
    assert binpack.args.weight == 10.0 and binpack.raw_args == {"binpack.weight": 10}


CONFIG_ERRORS = [
    ("unknown-action", conf(actions="enqueue, allocat"),
     "sched.conf: actions: unknown action 'allocat'; known: allocate, backfill, enqueue, preempt, reclaim"),
    ("duplicate-action", conf(actions="allocate, allocate"), "sched.conf: actions: an action is listed twice"),
    ("empty-actions", conf(actions=" , "), "sched.conf: actions: must name at least one action"),
    ("actions-not-string", conf(actions=3), "sched.conf: actions: expected a comma-separated string"),
    ("missing-actions", "tiers: [{plugins: [{name: gang}]}]\n", "sched.conf: actions: missing"),
    ("missing-tiers", "actions: allocate\n", "sched.conf: tiers: expected a list of tiers"),
    ("empty-tiers", conf(tiers=[]), "sched.conf: tiers: expected a list of tiers"),
    ("tier-extra-key", conf(tiers=[{"plugins": [], "name": "t"}]), "sched.conf: tiers[0]: expected a mapping"),
    ("unknown-plugin", with_plugin(1, 2, name="bogus"), "sched.conf: tiers[1].plugins[2] (bogus): unknown plugin"),
    ("plugin-without-name", conf(tiers=[{"plugins": [{"arguments": {}}]}]),
     "sched.conf: tiers[0].plugins[0]: expected a mapping with a name"),
    ("unknown-flag", with_plugin(1, 2, enableFoo=True),
     "sched.conf: tiers[1].plugins[2] (binpack): unknown option 'enableFoo'"),
    ("non-boolean-flag", with_plugin(0, 1, enableJobReady="yes"),
     "sched.conf: tiers[0].plugins[1] (gang): enableJobReady: expected true or false, got 'yes'"),
    ("unknown-plugin-argument", with_plugin(1, 2, arguments={"binpack.colour": 1}),
     "sched.conf: tiers[1].plugins[2] (binpack): unknown argument 'binpack.colour'; known: binpack.cpu"),
    ("bad-plugin-argument", with_plugin(1, 2, arguments={"binpack.weight": -1}),
     "sched.conf: tiers[1].plugins[2] (binpack): argument 'binpack.weight': must be at least 0"),
    ("arguments-not-mapping", with_plugin(1, 2, arguments=["binpack.weight"]),
     "sched.conf: tiers[1].plugins[2] (binpack): arguments must be a mapping"),
    ("unsupported-predicate", with_plugin(1, 1, arguments={"predicate.CacheEnable": True}),
     "sched.conf: tiers[1].plugins[1] (predicates): argument 'predicate.CacheEnable': only False is supported"),
    ("flag-plugin-refuses", with_plugin(1, 0, enableHierarchy=True),
     "sched.conf: tiers[1].plugins[0] (drf): enableHierarchy is not supported by drf"),
    ("duplicate-plugin", with_plugin(1, 0, name="gang"),
     "sched.conf: tiers[1].plugins[0] (gang): plugin 'gang' is listed twice"),
    ("proportion-and-capacity",
     conf(tiers=[{"plugins": [{"name": "proportion"}]}, {"plugins": [{"name": "capacity"}]}]),
     "sched.conf: plugins proportion and capacity both manage queue shares; enable only one"),
    ("configurations-unknown-action", conf(configurations=[{"name": "alloc"}]),
     "sched.conf: configurations[0]: unknown action 'alloc'"),
    ("configurations-unknown-argument", conf(configurations=[{"name": "allocate", "arguments": {"x": 1}}]),
     "sched.conf: configurations[0] (allocate): unknown argument 'x'; known: predicateErrorCacheEnable"),
    ("configurations-not-list", conf(configurations={"allocate": {}}), "sched.conf: configurations: expected a list"),
    ("configurations-extra-key", conf(configurations=[{"name": "allocate", "args": {}}]),
     "sched.conf: configurations[0]: expected a mapping with name and arguments"),
    ("unknown-top-level-key", conf(plugins=[]), "sched.conf: unknown key(s) plugins; expected actions, tiers"),
    ("invalid-yaml", "actions: allocate\n  tiers: [\n", "sched.conf:2:8: invalid YAML: "),
    ("not-a-mapping", "- allocate\n", "sched.conf: expected a mapping with actions and tiers"),
    ("configmap-two-entries", yaml.safe_dump({"kind": "ConfigMap", "data": {"a.conf": "x", "b.conf": "y"}}),
     "sched.conf: ConfigMap must hold exactly one *.conf or *.yaml entry"),
]


@pytest.mark.parametrize("text, message", [c[1:] for c in CONFIG_ERRORS], ids=[c[0] for c in CONFIG_ERRORS])
def test_parse_config_refuses(text, message):
    with pytest.raises(ConfigError) as info:
        parse_config(text, "sched.conf")
    assert str(info.value).startswith(message)


def configmap(text: str) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "volcano-scheduler-configmap"},
                           "data": {"volcano-scheduler.conf": text}})


def test_volcano_configmap_accepted():
    config = parse_config(configmap(conf(actions="allocate, backfill")), "cm.yaml")
    assert config.actions == ("allocate", "backfill") and config.source == "cm.yaml"
    assert config.plugin_names() == ["priority", "gang", "drf", "predicates", "binpack"]
    with pytest.raises(ConfigError, match=r"^cm.yaml: tiers\[1\].plugins\[2\] \(bogus\): unknown plugin"):
        parse_config(configmap(with_plugin(1, 2, name="bogus")), "cm.yaml")


@pytest.mark.parametrize("entry", [{"actions": "allocate"}, None], ids=["mapping", "null"])
def test_configmap_with_non_string_entry_is_refused(entry):
    with pytest.raises(ConfigError, match="ConfigMap"):
        parse_config(yaml.safe_dump({"kind": "ConfigMap", "data": {"volcano-scheduler.conf": entry}}), "cm.yaml")


def test_volcano_nodeorder_with_podaffinity_weight_is_accepted_with_warning(caplog):
    text = conf(tiers=[{"plugins": [{"name": "nodeorder", "arguments": {
        "podaffinity.weight": 2, "leastrequested.weight": 3, "nodeaffinity.weight": 2}}]}])
    nodeorder = parse_config(text, "sched.conf").plugin("nodeorder")
    assert (nodeorder.args.least, nodeorder.args.affinity, nodeorder.args.podaffinity) == (3.0, 2.0, 2.0)
    assert len(nodeorder.args.warnings) == 1 and "'podaffinity.weight' has no effect" in nodeorder.args.warnings[0]
    logged = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert logged == [f"sched.conf: tiers[0].plugins[0] (nodeorder): {nodeorder.args.warnings[0]}"]


def test_load_config(tmp_path):
    path = tmp_path / "sched.conf"
    path.write_text(conf(actions="allocate"))
    config = load_config(path)
    assert config.actions == ("allocate",) and config.source == str(path)
    with pytest.raises(ConfigError, match=rf"^{tmp_path / 'missing.conf'}: cannot read"):
        load_config(tmp_path / "missing.conf")


# --- ConfigWatcher ---

def test_config_watcher_keeps_last_good_config(tmp_path):
    path = tmp_path / "sched.conf"
    path.write_text(conf(actions="allocate"))
    results: list[str] = []
    watcher = ConfigWatcher(path, on_result=results.append)
    assert watcher.current.actions == ("allocate",) and watcher.last_error is None
    assert watcher.poll() is False and results == []  # unchanged file

    path.write_text(conf(actions="enqueue, allocate, backfill"))  # a different valid config
    assert watcher.poll() is True
    assert watcher.current.actions == ("enqueue", "allocate", "backfill") and results == ["success"]

    path.write_text(conf(actions="enqueue, allocat"))  # an invalid config
    assert watcher.poll() is False
    assert watcher.current.actions == ("enqueue", "allocate", "backfill")
    assert "unknown action 'allocat'" in watcher.last_error and str(path) in watcher.last_error
    assert results == ["success", "refused"]
    assert watcher.poll() is False and results == ["success", "refused"]  # same bad file: not counted again

    path.write_text(conf(actions="allocate, backfill"))  # good again
    assert watcher.poll() is True
    assert watcher.current.actions == ("allocate", "backfill") and watcher.last_error is None
    assert results == ["success", "refused", "success"]

    path.unlink()  # the file disappears
    assert watcher.poll() is False
    assert watcher.current.actions == ("allocate", "backfill")
    assert watcher.last_error.startswith(f"{path}: cannot read")
    assert results == ["success", "refused", "success", "refused"]
    assert watcher.poll() is False and len(results) == 4


def test_config_watcher_counts_each_distinct_refusal(tmp_path):
    path = tmp_path / "sched.conf"
    path.write_text(conf())
    results: list[str] = []
    watcher = ConfigWatcher(path, on_result=results.append)
    for bad in (conf(actions="nope"), with_plugin(1, 2, name="bogus")):
        path.write_text(bad)
        assert watcher.poll() is False
    assert results == ["refused", "refused"] and "unknown plugin 'bogus'" in watcher.last_error
    assert watcher.current.actions == ("enqueue", "allocate", "backfill")


def test_config_watcher_refuses_invalid_initial_file(tmp_path):
    path = tmp_path / "sched.conf"
    path.write_text(conf(actions="nope"))
    with pytest.raises(ConfigError, match="unknown action 'nope'"):
        ConfigWatcher(path)


def test_config_watcher_clears_error_when_file_restored_unchanged(tmp_path):
    path = tmp_path / "sched.conf"
    path.write_text(conf())
    watcher = ConfigWatcher(path)
    path.unlink()
    assert watcher.poll() is False and watcher.last_error is not None
    path.write_text(conf())
    watcher.poll()
    assert watcher.last_error is None
