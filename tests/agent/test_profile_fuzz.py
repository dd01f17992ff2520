"""QoS profiles nobody wrote by hand: every one is refused in one line naming the key, or accepted and then
every tick of the agent runs with it — never a traceback, never a profile that breaks the loop later.

Also the cases the issue found: NaN or infinity in any numeric key, ``interval: 50ms``, a window that is
valid alone but not over the spec it opens on, a reload of any of them counted as refused.
"""

from __future__ import annotations

import dataclasses
import math
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from agent.cgroups.backend import detect_backend
from agent.cgroups.layout import detect_layout
from agent.evictor import RecordingEvictor
from agent.hostpaths import HostPaths
from agent.loop import Agent, AgentConfig
from agent.pods import PodInfo, StaticPodSource
from agent.profile import _SECTIONS, ProfileError, ProfileWatcher, QosProfile, parse_profile
from hack.lib.cgroup_fixtures import FakePod, make_proc, make_tree, set_cpu_ticks, set_usage
from proto.model import Capacity, QosLevel
from tests.support.timebox import timeboxed

GI = 2**30
WEB, BATCH = "0000aaaa-0000-4000-8000-000000000001", "0000bbbb-0000-4000-8000-000000000002"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.capitalize() for p in rest)


# every numeric key of every section: (section, key, kind)
NUMERIC = [(section, _camel(f.name), f.type) for section, cls in _SECTIONS.items()
           for f in dataclasses.fields(cls) if f.type in ("int", "float")]
KEYS = {section: [_camel(f.name) for f in dataclasses.fields(cls)] for section, cls in _SECTIONS.items()}


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
@pytest.mark.parametrize("section,key,kind", NUMERIC, ids=[f"{s}.{k}" for s, k, _ in NUMERIC])
def test_non_finite_numbers_are_refused_naming_the_key(section: str, key: str, kind: str, value: str) -> None:
    text = f"spec:\n  {section}:\n    {key}: {value}\n"
    with pytest.raises(ProfileError) as info:
        parse_profile(text, "p.yaml")
    message = str(info.value)
    assert message.startswith(f"p.yaml: spec.{section}.{key}: ") and "\n" not in message


@pytest.mark.parametrize("text,needle", [
    ("spec: {eviction: {interval: 50ms}}", "spec.eviction.interval: must be at least 0.1s, got '50ms'"),
    ("spec: {eviction: {interval: 0}}", "spec.eviction.interval: must be at least 0.1s"),
    ("spec: {eviction: {interval: .nan}}", "spec.eviction.interval"),
    ("spec: {eviction: {samples: 0}}", "spec.eviction.samples: must be between 1 and 1000"),
    ("spec: {timezone: America}", "spec.timezone: unknown time zone 'America'"),
    ("spec: {timezone: 5}", "spec.timezone: expected a time zone name"),
    ("nodes: 5", "nodes: expected a list"),
    ("nodes: [{selector: {a: b}, spec: [1]}]", "nodes[0].spec: expected a mapping"),
    ("nodes: [{selector: {a: [b]}}]", "nodes[0].selector.a"),
    ("spec: [1]", "spec: expected a mapping"),
    ("kind: ConfigMap\ndata: [1]", "a ConfigMap must hold the profile"),
    ("spec: {eviction: {cpuHighPercent: 80, cpuLowPercent: 70}, windows: [{time: '01:00-02:00', eviction: "
     "{cpuLowPercent: 85}}]}", "spec.eviction.cpuLowPercent: 85 is above cpuHighPercent 80 (with windows[0] open"),
    ("[" * 5000, "invalid YAML"),
    ("a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
     "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n", "more than 20000 values"),
    ("spec: {cpu: {offlineThresholdPercent: " + "9" * 400 + "}}", "spec.cpu.offlineThresholdPercent: "),
    ('spec: {cpu: {"a\\nb": 1}}', "spec.cpu.'a\\nb': unknown key"),
], ids=["interval-50ms", "interval-0", "interval-nan", "samples-0", "zone-folder", "zone-number", "nodes-number",
        "override-list", "selector-list", "spec-list", "configmap-list", "window-over-spec", "deep", "alias-bomb",
        "huge-int", "key-with-newline"])
def test_values_the_agent_cannot_use_are_refused(text: str, needle: str) -> None:
    with pytest.raises(ProfileError) as info:
        parse_profile(text, "p.yaml")
    message = str(info.value)
    assert message.startswith("p.yaml: ") and needle in message and "\n" not in message


def test_a_refused_reload_is_counted_and_the_last_good_profile_stays(tmp_path: Path) -> None:
    path = tmp_path / "profile.yaml"
    path.write_text("name: good\n")
    results: list[str] = []
    watcher = ProfileWatcher(path, on_result=results.append)
    for bad in ("spec: {eviction: {interval: 50ms}}\n", "spec: {burst: {burstPercent: .nan}}\n",
                "spec: {timezone: America}\n"):
        path.write_text(bad)
        assert watcher.poll() is False and watcher.current.name == "good"
        assert watcher.poll() is False  # the same file again: refused once, not counted twice
    path.write_bytes(b"name: \xff\n")
    assert watcher.poll() is False and "not UTF-8" in (watcher.last_error or "")
    assert results == ["refused"] * 4


def test_report_once_with_a_refused_profile_exits_2_in_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    from hack.lib.processes import ROOT
    (tmp_path / "p.yaml").write_text("spec: {eviction: {interval: 50ms}}\n")
    out = subprocess.run([sys.executable, "-m", "agent", "report", "--once", "--pods-from", "none", "--no-devices",
                          "--sample", "0.05", "--profile", str(tmp_path / "p.yaml")],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'p.yaml'}: spec.eviction.interval: must be at least 0.1s, got '50ms'"]


# -- the property ------------------------------------------------------------------------------------

numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 1200), st.integers(),
                    st.just(10**400))
durations = st.one_of(st.sampled_from(["50ms", "100ms", "10s", "1h30m", "0", "3", "soon", "", "1e9h", "9" * 400]),
                      numbers)
scalars = st.one_of(numbers, st.booleans(), st.none(), st.text(max_size=8), durations)
values = st.one_of(scalars, st.lists(st.sampled_from(["LC", "HLS", "LS", "BE", "be", "VIP", 3]), max_size=4),
                   st.dictionaries(st.text(max_size=3), scalars, max_size=2))
clock_text = st.builds(lambda a, b, c, d: f"{a:02d}:{b:02d}-{c:02d}:{d:02d}", st.integers(0, 25), st.integers(0, 61),
                       st.integers(0, 25), st.integers(0, 61)) | st.sampled_from(["22:00-06:00", "06:00-12:30"])


# values a profile may well hold (so that many generated profiles are accepted and then run), and anything
plausible = st.one_of(st.floats(0, 100), st.integers(0, 100), st.booleans(), st.sampled_from(["1s", "30s", "2m"]),
                      st.lists(st.sampled_from(["LC", "HLS", "LS", "BE"]), max_size=3), st.just(1))
setting = st.one_of(plausible, plausible, values)


def section(name: str) -> st.SearchStrategy:
    keys = st.sampled_from(KEYS[name]) | st.sampled_from(["bogus", 1])
    return st.one_of(st.dictionaries(st.sampled_from(KEYS[name]), setting, max_size=4),
                     st.dictionaries(keys, setting, max_size=4), values)


sections = {name: section(name) for name in _SECTIONS}
window = st.one_of(st.fixed_dictionaries({"time": st.one_of(clock_text, values)},
                                         optional={**sections, "nodes": values}), values)
spec = st.fixed_dictionaries({}, optional={
    **sections, "timezone": st.one_of(st.sampled_from(["UTC", "Asia/Shanghai", "America", "Moon/Crater"]), values),
    "windows": st.one_of(st.lists(window, max_size=3), values), "extra": values})
node = st.one_of(st.fixed_dictionaries({"selector": st.one_of(
    st.dictionaries(st.sampled_from(["pool", "zone"]), st.sampled_from(["a", "b", True, 1])), values)},
    optional={"spec": st.one_of(spec, values)}), values)
documents = st.fixed_dictionaries({}, optional={"name": values, "spec": st.one_of(spec, values),
                                                 "nodes": st.one_of(st.lists(node, max_size=3), values),
                                                 "kind": st.sampled_from(["ConfigMap", "Profile"])})


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory):
    """A kubelet's cgroup tree (v2, systemd) with one online and one offline pod, and a /proc."""
    root = tmp_path_factory.mktemp("host")
    tree = make_tree(root / "cg", version=2, driver="systemd",
                     pods=[FakePod(WEB, "Burstable"), FakePod(BATCH, "BestEffort")])
    make_proc(root / "proc")
    return root, HostPaths(sys=root / "sys", proc=root / "proc", cgroup=tree.cgroup)


def ticks_with(profile: QosProfile, root: Path, paths: HostPaths) -> None:
    """An agent with ``profile`` in force, ticked at four times of day under three sets of node labels."""
    backend = detect_backend(paths)
    layout = detect_layout(backend)
    watcher = ProfileWatcher(None)
    watcher.current = profile
    labels: dict[str, str] = {}
    clock = Clock()
    pods = [PodInfo(WEB, "web", "web-0", "Burstable", QosLevel.LC, cpu_request=1000, cpu_limit=2000, memory_request=GI),
            PodInfo(BATCH, "ml", "train-0", "BestEffort", QosLevel.BE, batch_cpu=2000, batch_memory=2 * GI)]
    start = datetime(2026, 3, 1, tzinfo=UTC).timestamp()
    agent = Agent(AgentConfig("node-a"), paths=paths, backend=backend, layout=layout, pods=StaticPodSource(pods),
                  profiles=watcher, evictor=RecordingEvictor(), read_capacity=lambda p: Capacity(4000, 16 * GI),
                  clock=lambda: start + clock.t, monotonic=clock, node_labels=lambda: labels)
    busy = 0
    for hour in (0.5, 6.25, 13, 23.75):
        for these in ({}, {"pool": "a"}, {"pool": "a", "zone": "b", "true": "true"}):
            labels.clear()
            labels.update(these)
            clock.t = hour * 3600 + busy
            busy += 1
            set_cpu_ticks(root / "proc", busy * 390, busy * 10)  # a busy node: watermarks and evictions in play
            set_usage(paths.cgroup, 2, f"{layout.offline_parent}", busy * 10**9, 15 * GI)
            report = agent.slow_tick()
            agent.fast_tick()
            assert report.colocation.offline_cpu_quota_millis is None or \
                0 <= report.colocation.offline_cpu_quota_millis <= 4000
            assert math.isfinite(agent.spec.eviction.interval)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(doc=documents)
@timeboxed()
def test_every_profile_is_refused_in_one_line_or_runs_every_tick(host, doc: dict) -> None:
    root, paths = host
    text = yaml.safe_dump(doc)
    if doc.get("kind") == "ConfigMap":
        text = yaml.safe_dump({"kind": "ConfigMap", "data": {"profile.yaml": yaml.safe_dump(
            {k: v for k, v in doc.items() if k != "kind"})}})
    try:
        profile = parse_profile(text, "fuzz.yaml")
    except ProfileError as exc:
        message = str(exc)
        assert message.startswith("fuzz.yaml: ") and "\n" not in message and len(message) < 400, message
        event("refused")
        return
    event("accepted")
    ticks_with(profile, root, paths)


def test_overrides_that_break_a_rule_only_together_keep_the_settings_in_force(host, caplog) -> None:
    root, paths = host
    profile = parse_profile("spec: {eviction: {cpuHighPercent: 90, cpuLowPercent: 80}}\nnodes:\n"
                            "- {selector: {pool: a}, spec: {eviction: {cpuLowPercent: 88}}}\n"
                            "- {selector: {zone: b}, spec: {eviction: {cpuHighPercent: 85}}}\n", "p.yaml")
    ticks_with(profile, root, paths)  # labels pool=a and zone=b together: low 88 above high 85
    errors = [r.getMessage() for r in caplog.records if "keeping the settings in force" in r.getMessage()]
    assert len(errors) == 4 and "eviction.cpuLowPercent: 88 is above cpuHighPercent 85" in errors[0]
