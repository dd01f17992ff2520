"""Table-driven tests of plugin/action arguments (args.py) and the scheduler configuration (config.py)."""

from __future__ import annotations

import hashlib
import re

import pytest
import yaml

from proto.vocab.duration import parse_duration
from scheduler.api.manifests import parse_object
from scheduler.cluster.cache import ClusterCache
from scheduler.cycle import Scheduler
from scheduler.framework.args import Arg, ArgError, parse_args
from scheduler.framework.config import (
    DEFAULT_CONFIG,
    ConfigError,
    ConfigWatcher,
    default_config,
    load_config,
    parse_config,
)
from scheduler.framework.plugin import (
    ACTIONS,
    KNOWN_FLAGS,
    MISSING_ACTIONS,
    PLACEHOLDER_PLUGINS,
    PLUGINS,
    VOLCANO_ACTION_ARGUMENTS,
    VOLCANO_PLUGIN_ARGUMENTS,
)
from tests.support.builders import node, pod, queue
from tests.support.sessions import AT, open_session, task

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
    ("unsupported-bad-value", {"fancy": "maybe"}, "argument 'fancy': expected true or false, got 'maybe'"),
    ("prefix-bad-value", {"w.gpu": "x"}, "argument 'w.gpu': expected a number, got 'x'"),
    ("prefix-below-minimum", {"w.gpu": -1}, "argument 'w.gpu': must be at least 0, got -1.0"),
    ("prefix-alone", {"w.": 1}, "unknown argument 'w.'"),
    ("misspelt", {"ration": 1}, "unknown argument 'ration'; did you mean 'ratio'?"),
    ("misspelt-case", {"Count": 1}, "unknown argument 'Count'; did you mean 'count'?"),
    ("unknown", {"bogus": 1},
     "unknown argument 'bogus'; known: count, fancy, legacy, mode, names, on, ratio, w.<name>, wait"),
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


@pytest.mark.parametrize("raw, unimplemented", [
    ({"legacy": 2}, (("legacy", "not implemented here"),)),
    ({"legacy": "0"}, ()),
    ({"fancy": True}, (("fancy", "only False is implemented (no fancy mode)"),)),
    ({"fancy": "off"}, ()),
], ids=["ignored-non-default", "ignored-default", "unsupported-non-default", "unsupported-default"])
def test_ignored_or_unsupported_value_is_listed_only_when_set(raw, unimplemented):
    """A value Scoria does not act on is accepted (Volcano reads it) and listed; at its default it changes nothing."""
    args = parse_args(SPEC, raw)
    assert args.unimplemented == unimplemented
    assert args.warnings == tuple(f"argument {k!r} has no effect: {why}" for k, why in unimplemented)
    assert args.fancy == (raw.get("fancy") is True)


VOLCANO_KEYS = {"volcano.only": "", "volcano.why": "Scoria does it otherwise", "zone.": ""}


def test_keys_volcano_reads_are_accepted_and_listed():
    args = parse_args(SPEC, {"count": 2, "volcano.only": [1, 2], "zone.a": "x", "volcano.why": {"deep": 1}},
                      VOLCANO_KEYS)
    assert args.count == 2
    assert args.unimplemented == (("volcano.only", "Scoria does not implement it"),
                                  ("zone.a", "Scoria does not implement it"),
                                  ("volcano.why", "Scoria does it otherwise"))


@pytest.mark.parametrize("raw, message", [
    ({"volcano.onyl": 1}, "unknown argument 'volcano.onyl'; did you mean 'volcano.only'?"),
    ({"zone.": 1}, "unknown argument 'zone.'; did you mean 'zone.<name>'?"),
    ({"zone": 1}, "unknown argument 'zone'; did you mean 'zone.<name>'?"),
    ({"qqqq": 1}, "unknown argument 'qqqq'; known: count, fancy, legacy, mode, names, on, ratio, volcano.only, "
                  "volcano.why, w.<name>, wait, zone.<name>"),
], ids=["misspelt-volcano-key", "prefix-without-name", "prefix-without-dot", "nothing-close"])
def test_keys_volcano_reads_are_suggested_when_misspelt(raw, message):
    with pytest.raises(ArgError, match=f"^{re.escape(message)}$"):
        parse_args(SPEC, raw, VOLCANO_KEYS)


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
    assert config.plugin_names() == ["priority", "gang", "conformance", "overcommit", "proportion", "drf",
                                     "predicates", "nodeorder", "binpack"]
    assert [len(t) for t in config.tiers] == [5, 4]
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
    ("misspelt-action", conf(actions="enqueue, allocat"),
     "sched.conf: actions: unknown action 'allocat'; did you mean 'allocate'?"),
    ("unknown-action", conf(actions="enqueue, sleep"),
     "sched.conf: actions: unknown action 'sleep'; known: allocate, backfill, enqueue, preempt, reclaim"),
    ("volcano-only-action", conf(actions="allocate, gangpreempt"),
     "sched.conf: actions: Volcano's action 'gangpreempt' is not implemented in Scoria: Volcano's gang-aware "
     "preemption"),
    ("volcano-action-wrong-case", conf(actions="allocate, gangPreempt"),
     "sched.conf: actions: unknown action 'gangPreempt'; did you mean 'gangpreempt'?"),
    ("duplicate-action", conf(actions="allocate, allocate"), "sched.conf: actions: an action is listed twice"),
    ("empty-actions", conf(actions=" , "), "sched.conf: actions: must name at least one action"),
    ("actions-not-string", conf(actions=3), "sched.conf: actions: expected a comma-separated string"),
    ("missing-actions", "tiers: [{plugins: [{name: gang}]}]\n", "sched.conf: actions: missing"),
    ("missing-tiers", "actions: allocate\n", "sched.conf: tiers: expected a list of tiers"),
    ("empty-tiers", conf(tiers=[]), "sched.conf: tiers: expected a list of tiers"),
    ("tier-extra-key", conf(tiers=[{"plugins": [], "name": "t"}]), "sched.conf: tiers[0]: expected a mapping"),
    ("unknown-plugin", with_plugin(1, 2, name="bogus"),
     "sched.conf: tiers[1].plugins[2] (bogus): unknown plugin 'bogus'; known: binpack, capacity"),
    ("misspelt-plugin", with_plugin(1, 2, name="binpak"),
     "sched.conf: tiers[1].plugins[2] (binpak): unknown plugin 'binpak'; did you mean 'binpack'?"),
    ("misspelt-placeholder", with_plugin(1, 2, name="network-topology"),
     "sched.conf: tiers[1].plugins[2] (network-topology): unknown plugin 'network-topology'; did you mean "
     "'network-topology-aware'?"),
    ("plugin-without-name", conf(tiers=[{"plugins": [{"arguments": {}}]}]),
     "sched.conf: tiers[0].plugins[0]: expected a mapping with a name"),
    ("unknown-flag", with_plugin(1, 2, enableFoo=True),
     "sched.conf: tiers[1].plugins[2] (binpack): unknown option 'enableFoo'; expected name, arguments or an "
     "enable* flag"),
    ("misspelt-flag", with_plugin(1, 0, enablePreemtable=False),
     "sched.conf: tiers[1].plugins[0] (drf): unknown option 'enablePreemtable'; did you mean 'enablePreemptable'?"),
    ("flag-in-wrong-case", with_plugin(1, 0, EnablePreemptable=False),
     "sched.conf: tiers[1].plugins[0] (drf): unknown option 'EnablePreemptable'; did you mean 'enablePreemptable'?"),
    ("non-boolean-flag", with_plugin(0, 1, enableJobReady="yes"),
     "sched.conf: tiers[0].plugins[1] (gang): enableJobReady: expected true or false, got 'yes'"),
    ("misspelt-plugin-argument", with_plugin(1, 2, arguments={"binpack.wieght": 1}),
     "sched.conf: tiers[1].plugins[2] (binpack): unknown argument 'binpack.wieght'; did you mean 'binpack.weight'?"),
    ("unknown-plugin-argument", with_plugin(1, 2, arguments={"zzz": 1}),
     "sched.conf: tiers[1].plugins[2] (binpack): unknown argument 'zzz'; known: binpack.cpu, binpack.memory, "
     "binpack.resources, binpack.resources.<name>, binpack.weight"),
    ("misspelt-prefix-argument", with_plugin(1, 2, arguments={"binpack.resource.nvidia.com/gpu": 1}),
     "sched.conf: tiers[1].plugins[2] (binpack): unknown argument 'binpack.resource.nvidia.com/gpu'; did you mean "
     "'binpack.resources.<name>'?"),
    ("misspelt-volcano-only-argument", with_plugin(1, 1, arguments={"volumebinding.wieght": 1}),
     "sched.conf: tiers[1].plugins[1] (predicates): unknown argument 'volumebinding.wieght'; did you mean "
     "'volumebinding.weight'?"),
    ("placeholder-misspelt-argument",
     conf(tiers=[{"plugins": [{"name": "network-topology-aware", "arguments": {"wieght": 1}}]}]),
     "sched.conf: tiers[0].plugins[0] (network-topology-aware): unknown argument 'wieght'; did you mean 'weight'?"),
    ("bad-plugin-argument", with_plugin(1, 2, arguments={"binpack.weight": -1}),
     "sched.conf: tiers[1].plugins[2] (binpack): argument 'binpack.weight': must be at least 0"),
    ("arguments-not-mapping", with_plugin(1, 2, arguments=["binpack.weight"]),
     "sched.conf: tiers[1].plugins[2] (binpack): arguments must be a mapping"),
    ("bad-value-of-an-unimplemented-argument", with_plugin(1, 1, arguments={"predicate.CacheEnable": "often"}),
     "sched.conf: tiers[1].plugins[1] (predicates): argument 'predicate.CacheEnable': expected true or false"),
    ("duplicate-plugin", with_plugin(1, 0, name="gang"),
     "sched.conf: tiers[1].plugins[0] (gang): plugin 'gang' is listed twice"),
    ("configurations-unknown-action", conf(configurations=[{"name": "alloc"}]),
     "sched.conf: configurations[0]: unknown action 'alloc'; did you mean 'allocate'?"),
    ("configurations-unknown-name", conf(configurations=[{"name": "zzz"}]),
     "sched.conf: configurations[0]: unknown action 'zzz'; known: allocate, backfill, enqueue, preempt, reclaim"),
    ("configurations-unknown-argument", conf(configurations=[{"name": "allocate", "arguments": {"x": 1}}]),
     "sched.conf: configurations[0] (allocate): unknown argument 'x'; known: predicateErrorCacheEnable"),
    ("configurations-misspelt-argument",
     conf(configurations=[{"name": "allocate", "arguments": {"predicateErrorCacheEnabled": True}}]),
     "sched.conf: configurations[0] (allocate): unknown argument 'predicateErrorCacheEnabled'; did you mean "
     "'predicateErrorCacheEnable'?"),
    ("configurations-no-arguments", conf(configurations=[{"name": "shuffle", "arguments": {"x": 1}}]),
     "sched.conf: configurations[0] (shuffle): unknown argument 'x'; it takes no arguments"),
    ("configurations-volcano-only-misspelt",
     conf(configurations=[{"name": "init-params", "arguments": {"presetVirtualDevices": "false"}}]),
     "sched.conf: configurations[0] (init-params): unknown argument 'presetVirtualDevices'; did you mean "
     "'presetVirtualDevice'?"),
    ("configurations-not-list", conf(configurations={"allocate": {}}), "sched.conf: configurations: expected a list"),
    ("configurations-extra-key", conf(configurations=[{"name": "allocate", "args": {}}]),
     "sched.conf: configurations[0]: expected a mapping with name and arguments"),
    ("unknown-top-level-key", conf(plugins=[]),
     "sched.conf: unknown key 'plugins'; expected actions, tiers, configurations, metrics"),
    ("misspelt-top-level-key", conf(metric={}), "sched.conf: unknown key 'metric'; did you mean 'metrics'?"),
    ("metrics-not-mapping", conf(metrics="prometheus"), "sched.conf: metrics: expected a mapping of settings"),
    ("metrics-misspelt-key", conf(metrics={"adress": "http://p:9090"}),
     "sched.conf: metrics: unknown key 'adress'; did you mean 'address'?"),
    ("metrics-nested-misspelt-key", conf(metrics={"tls": {"insecureSkipVerfy": "true"}}),
     "sched.conf: metrics: unknown key 'tls.insecureSkipVerfy'; did you mean 'tls.insecureSkipVerify'?"),
    ("metrics-list-value", conf(metrics={"address": ["a", "b"]}),
     "sched.conf: metrics: address: expected a string, got ['a', 'b']"),
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


def test_volcano_nodeorder_with_an_unimplemented_weight_is_accepted_with_warning(caplog):
    text = conf(tiers=[{"plugins": [{"name": "nodeorder", "arguments": {
        "imagelocality.weight": 2, "podaffinity.weight": 5, "leastrequested.weight": 3, "nodeaffinity.weight": 2}}]}])
    nodeorder = parse_config(text, "sched.conf").plugin("nodeorder")
    assert (nodeorder.args.least, nodeorder.args.affinity, nodeorder.args.podaffinity) == (3.0, 2.0, 5.0)
    assert len(nodeorder.args.warnings) == 1 and "'imagelocality.weight' has no effect" in nodeorder.args.warnings[0]
    logged = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert logged == [f"sched.conf: tiers[0].plugins[0] (nodeorder): {nodeorder.args.warnings[0]}"]


# --- what Volcano knows and Scoria does not act on ---

def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]


def test_placeholder_plugin_loads_does_nothing_and_is_warned_about(caplog):
    text = conf(tiers=[{"plugins": [{"name": "priority"}, {"name": "pdb"}]},
                       {"plugins": [{"name": "rescheduling", "arguments": {"interval": "5m"}}]},
                       {"plugins": [{"name": "predicates"}]}])
    config = parse_config(text, "sched.conf")
    assert config.plugin_names() == ["priority", "pdb", "rescheduling", "predicates"]
    assert config.plugin("pdb").placeholder and not config.plugin("priority").placeholder
    assert [[p.name for p in tier] for tier in config.build_tiers()] == [["priority"], ["predicates"]]
    assert [(u.kind, u.name, u.key) for u in config.unimplemented] == [
        ("plugin", "pdb", ""), ("plugin", "rescheduling", ""), ("plugin", "rescheduling", "interval")]
    assert warnings_of(caplog) == [
        "sched.conf: tiers[0].plugins[1] (pdb): plugin 'pdb' is accepted but does nothing: Scoria does not consult "
        "PodDisruptionBudgets when it chooses victims",
        "sched.conf: tiers[1].plugins[0] (rescheduling): plugin 'rescheduling' is accepted but does nothing: Scoria "
        "does not reschedule running pods by node utilisation",
        "sched.conf: tiers[1].plugins[0] (rescheduling): argument 'interval' has no effect: the rescheduling plugin "
        "does nothing in Scoria"]
    assert [u.message for u in config.unimplemented] == warnings_of(caplog)


def test_volcano_argument_scoria_does_not_read_is_warned_about(caplog):
    text = conf(tiers=[{"plugins": [{"name": "usage", "arguments": {
        "usage.weight": 3, "estimator": {"request_ratio": 0.7}, "thresholds": {"cpu": 70}}}]},
        {"plugins": [{"name": "predicates", "arguments": {"predicate.NodeVolumeLimitsEnable": True,
                                                           "predicate.CacheEnable": False,
                                                           "volumebinding.weight": 2}}]}])
    config = parse_config(text, "sched.conf")
    usage = config.plugin("usage").args
    assert usage.weight == 3 and usage.thresholds["cpu"] == 70  # what is implemented is used
    assert [(u.name, u.key) for u in config.unimplemented] == [
        ("usage", "estimator"), ("predicates", "predicate.NodeVolumeLimitsEnable"), ("predicates", "volumebinding.weight")]
    assert warnings_of(caplog) == [
        "sched.conf: tiers[0].plugins[0] (usage): argument 'estimator' has no effect: Scoria estimates pods placed "
        "since the last report with estimatedScalingFactors",
        "sched.conf: tiers[1].plugins[0] (predicates): argument 'predicate.NodeVolumeLimitsEnable' has no effect: only "
        "False is implemented (Scoria's predicates do not implement it)",
        "sched.conf: tiers[1].plugins[0] (predicates): argument 'volumebinding.weight' has no effect: Scoria does not "
        "bind volumes"]


def test_option_naming_a_hook_scoria_lacks_is_warned_about(caplog):
    config = parse_config(with_plugin(1, 2, enableBestNode=False, enableNodeOrder=True), "sched.conf")
    assert config.plugin("binpack").flags == {"enableBestNode": False, "enableNodeOrder": True}
    assert warnings_of(caplog) == ["sched.conf: tiers[1].plugins[2] (binpack): option 'enableBestNode' has no "
                                   "effect: Scoria has no bestNode hook"]
    assert [(u.kind, u.name, u.key) for u in config.unimplemented] == [("plugin", "binpack", "enableBestNode")]


# Every option of Volcano's PluginOption, by its YAML name (pkg/scheduler/conf/scheduler_conf.go).
VOLCANO_PLUGIN_OPTIONS = [
    "enableJobOrder", "enableHierarchy", "enableJobReady", "enableJobPipelined", "enableTaskOrder",
    "enablePreemptable", "enableReclaimable", "enablePreemptive", "enableQueueOrder", "enabledClusterOrder",
    "enablePredicate", "enableBestNode", "enableNodeOrder", "enableTargetJob", "enableReservedNodes",
    "enableJobEnqueued", "enabledVictim", "enableJobStarving", "enabledOverused", "enabledAllocatable",
    "enabledHyperNodeOrder", "enabledSubJobReady", "enabledSubJobPipelined", "enabledSubJobOrder",
    "enabledHyperNodeGradient",
]


# Volcano's plugins and actions as registered (pkg/scheduler/plugins/factory.go, pkg/scheduler/actions/factory.go).
VOLCANO_PLUGINS = ["drf", "gang", "deviceshare", "predicates", "priority", "nodeorder", "conformance", "binpack",
                   "resource-strategy-fit", "tdm", "overcommit", "sla", "task-topology", "numa-aware", "cdp",
                   "rescheduling", "usage", "pdb", "nodegroup", "network-topology-aware", "proportion", "capacity",
                   "extender", "resourcequota"]
VOLCANO_ACTIONS = ["reclaim", "allocate", "backfill", "preempt", "gangpreempt", "gangreclaim", "enqueue", "shuffle"]
BUILT_ELSEWHERE_IN_ISSUE_14 = {"task-topology", "nodegroup", "resource-strategy-fit", "cdp", "extender"}


@pytest.mark.parametrize("name", VOLCANO_PLUGINS)
def test_every_volcano_plugin_is_known(name):
    """Each is implemented, a placeholder, or being built; and its argument keys are in the table."""
    assert name in VOLCANO_PLUGIN_ARGUMENTS
    assert (name in PLUGINS) + (name in PLACEHOLDER_PLUGINS and name not in PLUGINS) == 1 \
        or name in BUILT_ELSEWHERE_IN_ISSUE_14


@pytest.mark.parametrize("name", VOLCANO_ACTIONS)
def test_every_volcano_action_is_known(name):
    assert (name in ACTIONS) != (name in MISSING_ACTIONS) and name in VOLCANO_ACTION_ARGUMENTS


@pytest.mark.parametrize("flag", VOLCANO_PLUGIN_OPTIONS)
def test_every_volcano_plugin_option_is_accepted(flag):
    assert flag in KNOWN_FLAGS
    config = parse_config(with_plugin(0, 0, **{flag: False}), "sched.conf")
    assert config.plugin("priority").flags == {flag: False}


def test_metrics_block_is_accepted_and_every_key_warned_about(caplog):
    text = conf(metrics={"type": "elasticsearch", "address": "http://192.168.0.10:9090", "interval": "30s",
                         "tls": {"insecureSkipVerify": "false"}, "elasticsearch.index": "custom-index-name"})
    config = parse_config(text, "sched.conf")
    assert [(u.kind, u.name, u.key) for u in config.unimplemented] == [
        ("metrics", "metrics", key) for key in ("type", "address", "interval", "tls.insecureSkipVerify",
                                                "elasticsearch.index")]
    assert warnings_of(caplog)[1] == ("sched.conf: metrics: key 'address' has no effect: Scoria reads node load "
                                      "from its agents' reports, not from a metrics server")


def test_configurations_for_what_only_volcano_runs_are_warned_about(caplog):
    text = conf(configurations=[
        {"name": "init-params", "arguments": {"grace-over-time": "900", "presetVirtualDevice": "false"}},
        {"name": "gangpreempt", "arguments": {"maxDomains": 4}},
        {"name": "preempt", "arguments": {"topologyAwarePreemptWorkerNum": 8}}])
    config = parse_config(text, "sched.conf")
    assert [(u.kind, u.name, u.key) for u in config.unimplemented] == [
        ("configuration", "init-params", ""), ("configuration", "init-params", "grace-over-time"),
        ("configuration", "init-params", "presetVirtualDevice"), ("configuration", "gangpreempt", ""),
        ("configuration", "gangpreempt", "maxDomains"), ("action", "preempt", "topologyAwarePreemptWorkerNum")]
    assert "gangpreempt" not in config.action_args
    logged = warnings_of(caplog)
    assert logged[0] == ("sched.conf: configurations[0] (init-params): configuration 'init-params' has no effect: "
                         "Volcano's Ascend MindCluster vNPU parameters; Scoria gives Ascend NPUs whole")
    assert logged[-1].startswith("sched.conf: configurations[2] (preempt): argument 'topologyAwarePreemptWorkerNum' "
                                 "has no effect: ")


def test_a_refused_configuration_warns_about_nothing(caplog):
    with pytest.raises(ConfigError, match="unknown action"):
        parse_config(conf(actions="allocat", metrics={"type": "prometheus"}), "sched.conf")
    assert warnings_of(caplog) == []


# --- proportion with capacity, proportion with hierarchical drf ---

def test_proportion_and_capacity_both_vote():
    """Volcano lets both run (only hierarchical drf conflicts with proportion): a task is allocatable only if both
    allow it.  Here proportion holds q1 to its deserved share (weight 1 of 4: one cpu) and capacity's hierarchy
    holds q2 under its parent's capability (one cpu), which proportion does not know about; each alone lets the
    other's task through."""
    world = [node("n1", cpu=4), queue("q1", weight=1), queue("p", weight=1, capability={"cpu": "1"}),
             queue("q2", weight=3, parent="p"),
             *[pod(f"a{i}", queue="q1") for i in range(4)], *[pod(f"b{i}", queue="q2") for i in range(4)],
             pod("a-run", queue="q1", nodeName="n1"), pod("b-run", queue="q2", nodeName="n1")]
    tiers = [{"plugins": [{"name": "priority"}, {"name": "gang"}]},
             {"plugins": [{"name": "predicates"}, {"name": "proportion"},
                          {"name": "capacity", "enableHierarchy": True}]}]
    configs = {"both": tiers, "proportion": [tiers[0], {"plugins": tiers[1]["plugins"][:2]}],
               "capacity": [tiers[0], {"plugins": tiers[1]["plugins"][::2]}]}
    refusals = {}
    for name, config in configs.items():
        ssn = open_session(world, parse_config(conf(tiers=config)))
        refusals[name] = [ssn.allocatable(ssn.queues[q], task(ssn, f"default/{t}")) for q, t in (("q1", "a0"),
                                                                                                  ("q2", "b0"))]
    assert refusals["proportion"][1] is None and refusals["capacity"][0] is None
    assert "deserved share" in refusals["proportion"][0] and "capability" in refusals["capacity"][1]
    assert refusals["both"] == [refusals["proportion"][0], refusals["capacity"][1]]


def test_proportion_with_hierarchical_drf_is_refused_within_one_tier():
    """Volcano: pkg/scheduler/util.go unmarshalSchedulerConf refuses proportion with drf's enableHierarchy in one
    tier; in two tiers Volcano loads it, and so does Scoria."""
    tiers = [{"plugins": [{"name": "drf", "enableHierarchy": True}, {"name": "proportion"}]}]
    with pytest.raises(ConfigError, match=r"^sched.conf: tiers\[0\]: proportion and drf with enableHierarchy both "
                                          r"divide the cluster between queues; enable only one per tier"):
        parse_config(conf(tiers=tiers), "sched.conf")
    tiers = [{"plugins": [{"name": "drf", "enableHierarchy": True}]}, {"plugins": [{"name": "proportion"}]}]
    assert parse_config(conf(tiers=tiers), "sched.conf").plugin_names() == ["drf", "proportion"]


# --- the metric ---

def unimplemented_metric(metrics) -> dict[tuple[str, str, str], float]:
    return {(s.labels["kind"], s.labels["name"], s.labels["key"]): s.value
            for metric in metrics.registry.collect() if metric.name == "scoria_scheduler_config_unimplemented"
            for s in metric.samples}


NTA = conf(tiers=[{"plugins": [{"name": "predicates", "arguments": {"predicate.DynamicResourceAllocationEnable": True}},
                               {"name": "network-topology-aware", "arguments": {"weight": 10}}]}],
           metrics={"type": "prometheus"})


def test_scheduler_counts_the_settings_it_does_not_act_on_and_places_pods(tmp_path):
    path = tmp_path / "sched.conf"
    path.write_text(NTA)
    cache = ClusterCache()
    for doc in [node("n1", cpu=2), pod("p", cpu="1")]:
        cache.upsert(parse_object(doc, "test"))
    sched = Scheduler(cache, config_path=path, clock=lambda: AT)
    assert unimplemented_metric(sched.metrics) == {
        ("plugin", "predicates", "predicate.DynamicResourceAllocationEnable"): 1.0,
        ("plugin", "network-topology-aware", ""): 1.0, ("plugin", "network-topology-aware", "weight"): 1.0,
        ("metrics", "metrics", "type"): 1.0}
    assert sched.run_once().binds == 1  # the placeholder does nothing; the rest schedules
    path.write_text(conf())
    sched.run_once()
    assert unimplemented_metric(sched.metrics) == {}  # the configuration now in force has none
    path.write_text("actions: [")
    sched.run_once()
    assert unimplemented_metric(sched.metrics) == {}  # a refused file changes nothing
    fixed = Scheduler(ClusterCache(), config=parse_config(NTA), clock=lambda: AT)
    assert len(unimplemented_metric(fixed.metrics)) == 4


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
