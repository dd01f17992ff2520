"""Every scheduler configuration in Volcano's repository loads (issue 14, item 6).

The fixtures in ``tests/fixtures/volcano-configs`` are Volcano's own configurations, copied as text, each with
a header naming its source: the Helm chart's ``installer/helm/chart/volcano/config/*.conf``, the scheduler
ConfigMaps in ``installer/`` and ``benchmark/``, every example in ``docs/user-guide/`` that holds ``actions`` and
``tiers``, the complete examples of ``docs/design/``, and the gang-eviction e2e suite's configuration.  Each
loads as it is written (plain or as a ConfigMap) and in the other form, and what it says that Scoria does not act
on is exactly the set listed here: named in a WARNING with its place, and in the metric.

Left out on purpose, because Volcano itself cannot load them or they are not configurations: docs/design's
custom-plugin.md (a made-up plugin ``magic``), plugin-conf.md (placeholder names), job-resource-reservation-design.md
(broken YAML, actions that no longer exist), gang-aware-eviction-design.md (``gangPreempt``, a case Volcano does not
accept), queue-scoped-overcommit.md (``max-queue-overcommit-factor``, a proposal Volcano never read) and
tdm-plugin.md (no ``actions``, which Volcano refuses).  Not copied because they repeat a fixture or are not a
configuration (checked at volcano-sh/volcano ed72c7c815a9): ``installer/volcano-development-vap.yaml`` and
``installer/volcano-development-vap-map.yaml`` hold the same scheduler ConfigMap as ``volcano-development.yaml``;
``installer/helm/chart/volcano/values.yaml`` has it only as a commented-out example; and
docs/user-guide/how_to_tune_volcano_performance.md shows one ``actions:`` line, without tiers.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from scheduler.cycle import Scheduler
from scheduler.framework.config import ConfigError, SchedulerConfig, parse_config
from scheduler.framework.plugin import ACTIONS, PLUGINS
from tests.support.builders import node, pod
from tests.support.sessions import AT, cache_of

FIXTURES = Path(__file__).parents[2] / "fixtures" / "volcano-configs"

NTA = "network-topology-aware"
RSF = "resource-strategy-fit"
DRA = ("plugin", "predicates", "predicate.DynamicResourceAllocationEnable")
ALL_METRICS = {("metrics", "metrics", key) for key in (
    "type", "address", "interval", "tls.insecureSkipVerify", "elasticsearch.index", "elasticsearch.username",
    "elasticsearch.password", "elasticsearch.hostnameFieldName")}

# Each fixture that loads: the settings (kind, name, key) Scoria accepts without acting on.  A setting another
# part of issue 14 implements drops out by itself (``implemented`` below); one that is warned about but not
# listed here, or listed but not warned about, fails.
UNIMPLEMENTED: dict[str, set[tuple[str, str, str]]] = {
    "benchmark-gang-scheduler-config.yaml": set(),
    "design-node-group-1.conf": {("plugin", "nodegroup", "enablePreferredOrder")},
    "design-pdb-plugin-1.conf": {("plugin", "pdb", "")},
    "design-proportional-1.conf": {("plugin", RSF, "proportional")},
    "design-queue-guarantee-resource-reservation-design-1.yaml": set(),
    "design-rescheduling-1.conf": {("plugin", "rescheduling", key) for key in (
        "", "interval", "metricsPeriod", "strategies", "queueSelector", "labelSelector")},
    "design-resource-strategy-fit-scheduling-1.conf": {("plugin", RSF, "resourceStrategyFitWeight"),
                                                       ("plugin", RSF, "resources")},
    "design-resource-strategy-fit-scheduling-2.conf": {("plugin", RSF, "sra")},
    "design-resource-strategy-fit-scheduling-3.conf": {("plugin", RSF, "proportional")},
    "design-resource-strategy-fit-scheduling-4.conf": {("plugin", RSF, "resourceStrategyFitWeight"),
                                                       ("plugin", RSF, "resources"), ("plugin", RSF, "sra")},
    "design-sla-plugin-1.conf": set(),
    "design-usage-based-scheduling-1.conf": ALL_METRICS,
    "design-usage-based-scheduling-2.conf": {("metrics", "metrics", "type"), ("metrics", "metrics", "interval")},
    "design-usage-based-scheduling-3.conf": {("metrics", "metrics", "type"), ("metrics", "metrics", "address"),
                                             ("metrics", "metrics", "interval")},
    "design-usage-based-scheduling-4.conf": ALL_METRICS,
    "helm-agent-scheduler.conf": set(),
    "helm-volcano-scheduler-ci.conf": {DRA, ("plugin", NTA, "")},
    "helm-volcano-scheduler.conf": set(),
    "installer-volcano-agent-scheduler-development.yaml": set(),
    "installer-volcano-development.yaml": set(),
    "user-guide-how-to-configure-scheduler-1.conf": set(),
    "user-guide-how-to-enable-dra-1.conf": {DRA},
    "user-guide-how-to-use-capacity-plugin-1.yaml": set(),
    "user-guide-how-to-use-capacity-plugin-2.yaml": {("plugin", "capacity", "ancestorReclaimLevel")},
    "user-guide-how-to-use-cdp-plugin-1.yaml": {("plugin", "task-topology", "task-topology.weight")},
    "user-guide-how-to-use-dra-quota-1.yaml": {("plugin", "capacity", "capacity.DynamicResourceAllocationEnable"),
                                               ("plugin", "capacity", "capacity.DRAConsumableCapacityEnable")},
    "user-guide-how-to-use-extender-1.yaml": {("plugin", "extender", f"extender.{key}") for key in (
        "urlPrefix", "httpTimeout", "onSessionOpenVerb", "onSessionCloseVerb", "predicateVerb", "prioritizeVerb",
        "preemptableVerb", "reclaimableVerb", "queueOverusedVerb", "jobEnqueueableVerb", "ignorable")},
    "user-guide-how-to-use-gpu-number-1.yaml": {("plugin", "deviceshare", "deviceshare.GPUNumberEnable")},
    "user-guide-how-to-use-gpu-number-2.yaml": {("plugin", "predicates", "predicate.GPUNumberEnable")},  # now read
    "user-guide-how-to-use-gpu-sharing-1.yaml": {("plugin", "deviceshare", "deviceshare.GPUSharingEnable")},
    "user-guide-how-to-use-gpu-sharing-2.yaml": {("plugin", "predicates", "predicate.GPUSharingEnable")},
    "user-guide-how-to-use-network-topology-aware-scheduling-1.yaml": {("plugin", NTA, key) for key in (
        "", "weight", "hypernode.binpack.cpu", "hypernode.binpack.memory", "hypernode.binpack.resources",
        "hypernode.binpack.resources.nvidia.com/gpu", "hypernode.binpack.resources.example.com/foo",
        "hypernode.binpack.normal-pod.enable", "hypernode.binpack.normal-pod.fading")},
    "user-guide-how-to-use-nodegroup-plugin-1.conf": {("plugin", "nodegroup", "strict")},
    "user-guide-how-to-use-nodegroup-plugin-2.conf": {("plugin", "nodegroup", "enablePreferredOrder")},
    "user-guide-how-to-use-nodegroup-plugin-3.conf": set(),
    "user-guide-how-to-use-numa-aware-1.yaml": set(),
    "user-guide-how-to-use-resource-strategy-fit-plugin-1.yaml": {("plugin", RSF, "resourceStrategyFitWeight"),
                                                                  ("plugin", RSF, "resources")},
    "user-guide-how-to-use-scheduling-gates-queue-admission-1.conf": set(),
    "user-guide-how-to-use-task-topology-plugin-1.yaml": {("plugin", "task-topology", "task-topology.weight")},
    "user-guide-how-to-use-vnpu-1.yaml": {("plugin", "deviceshare", key) for key in (
        "deviceshare.AscendHAMiVNPUEnable", "deviceshare.KnownGeometriesCMNamespace",
        "deviceshare.KnownGeometriesCMName")},
    "user-guide-how-to-use-vnpu-2.yaml": {("plugin", "deviceshare", "deviceshare.AscendMindClusterVNPUEnable"),
                                          ("configuration", "init-params", ""),
                                          ("configuration", "init-params", "grace-over-time"),
                                          ("configuration", "init-params", "presetVirtualDevice")},
    "user-guide-how-to-use-volcano-vgpu-1.yaml": set(),
}

# Fixtures that need a plugin another part of issue 14 builds: expected to fail until it is registered
# (strict, so each entry must go when its plugin lands).
NEEDS: dict[str, str] = {
}

# Fixtures Scoria refuses on purpose: an action that does nothing would leave its work undone.
REFUSED: dict[str, str] = {
    "e2e-gangevict.conf": "e2e-gangevict.conf: actions: Volcano's action 'gangreclaim' is not implemented in Scoria: "
                          "Volcano's gang-aware reclaim by hyper-node domain is not implemented; use reclaim",
}


def implemented(kind: str, name: str, key: str) -> bool:
    """Whether Scoria now acts on the setting: a registered plugin or action declares it as an argument it uses."""
    if kind == "plugin" and not key:
        return name in PLUGINS
    owner = PLUGINS.get(name) if kind == "plugin" else ACTIONS.get(name) if kind == "action" else None
    return owner is not None and owner.implements(key)


def expected(name: str) -> set[tuple[str, str, str]]:
    return {setting for setting in UNIMPLEMENTED[name] if not implemented(*setting)}


def other_form(text: str) -> str:
    """A ConfigMap's configuration as plain text, or plain text wrapped in Volcano's ConfigMap."""
    doc = yaml.safe_load(text)
    if doc.get("kind") == "ConfigMap":
        (conf,) = [v for k, v in doc["data"].items() if k.endswith(".conf")]
        return conf
    return yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
                           "data": {"volcano-scheduler.conf": text}})


def settings(config: SchedulerConfig) -> list[tuple[str, str, str]]:
    return [(u.kind, u.name, u.key) for u in config.unimplemented]


def loading(name: str):
    marks = [pytest.mark.xfail(strict=True, raises=ConfigError, reason=NEEDS[name])] if name in NEEDS else []
    return pytest.param(name, marks=marks, id=name)


def test_every_fixture_is_accounted_for():
    on_disk = {path.name for path in FIXTURES.iterdir()}
    assert on_disk == set(UNIMPLEMENTED) | set(REFUSED)
    assert not set(UNIMPLEMENTED) & set(REFUSED) and set(NEEDS) <= set(UNIMPLEMENTED)
    assert len(on_disk) >= 40  # the chart, the installer, the user guide, the designs: not a handful


@pytest.mark.parametrize("name", sorted(UNIMPLEMENTED | REFUSED))
def test_fixture_names_its_source_in_volcano(name):
    head = (FIXTURES / name).read_text().splitlines()[0]
    assert head.startswith("# Volcano's scheduler configuration, copied from volcano-sh/volcano ")


@pytest.mark.parametrize("name", [loading(name) for name in sorted(UNIMPLEMENTED)])
def test_volcano_configuration_loads_and_names_what_scoria_does_not_act_on(name, caplog):
    text = (FIXTURES / name).read_text()
    for form in (text, other_form(text)):
        caplog.clear()
        config = parse_config(form, name)
        got = settings(config)
        assert set(got) == expected(name)
        assert len(got) == len(set(got))  # each said once
        warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert warned == [u.message for u in config.unimplemented]
        for u in config.unimplemented:
            assert u.message.startswith(f"{name}: ")
            if u.kind == "plugin":  # located: tiers[i].plugins[j] (name)
                assert f"] ({u.name}): " in u.message and ".plugins[" in u.message


@pytest.mark.parametrize("name", [loading(name) for name in sorted(UNIMPLEMENTED)])
def test_volcano_configuration_schedules(name):
    """Loaded, it runs: a pod is placed wherever the configuration allocates."""
    config = parse_config((FIXTURES / name).read_text(), name)
    objects = [node("n1", cpu=4), pod("p", cpu="1")]
    if config.plugin("nodegroup"):  # Volcano's strict default: only labelled nodes, only queues with affinity
        objects = [node("n1", cpu=4, labels={"volcano.sh/nodegroup-name": "g1"}), pod("p", cpu="1", queue="q"),
                   {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q"},
                    "spec": {"affinity": {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["g1"]}}}}]
    cache = cache_of(objects)
    result = Scheduler(cache, config=config, clock=lambda: AT).run_once()
    assert result.binds == (1 if "allocate" in config.actions else 0)
    assert result.binds == 0 or cache.pods["default/p"].node_name == "n1"


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_volcano_configuration_refused_on_purpose(name):
    text = (FIXTURES / name).read_text()
    for form in (text, other_form(text)):
        with pytest.raises(ConfigError) as info:
            parse_config(form, name)
        assert str(info.value).startswith(REFUSED[name])


def _compat_rows() -> list[tuple[str, str, str]]:
    from hack import volcano_compat

    return volcano_compat.rows()


def _row_for(rows: list[tuple[str, str, str]], kind: str, name: str, key: str) -> str | None:
    """The README table's status for one setting Scoria warned about, or None when the table does not list it."""
    for what, setting, status in rows:
        if kind == "metrics":
            if what == "`metrics`" and setting == f"`{key}`":
                return status
        elif what == f"{kind} `{name}`":
            shown = [s.strip("`") for s in setting.split(", ")] if setting else [""]
            if key in shown or any(s.endswith("<name>") and key.startswith(s[:-6]) for s in shown):
                return status
            if kind == "configuration" and not key:
                return status
    return None


def test_every_setting_warned_about_is_in_the_readme_table_as_warned():
    """What a shipped Volcano configuration is warned about is listed in README's compatibility table, as warned:
    the table is the complete list of what Scoria accepts without acting on."""
    rows = _compat_rows()
    problems = []
    for name in sorted(UNIMPLEMENTED):
        for setting in expected(name):
            status = _row_for(rows, *setting)
            if status is None or not status.startswith("warned"):
                problems.append((name, setting, status))
    assert not problems
