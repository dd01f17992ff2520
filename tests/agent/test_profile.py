"""The QoS profile: validation naming the key, node overrides, time windows, reload keeping the last good one."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent.profile import DEFAULT_PROFILE, ProfileError, ProfileWatcher, parse_profile

GOOD = """
name: prod
spec:
  cpu: {offlineThresholdPercent: 70, offlineFloorPercent: 10}
  burst: {enabled: true, burstPercent: 200, qosLevels: [LC]}
  eviction: {cpuHighPercent: 90, cpuLowPercent: 80, samples: 2, interval: 30s}
  timezone: Asia/Shanghai
  windows:
  - time: "22:00-06:00"
    cpu: {offlineThresholdPercent: 95}
    overcommit: {reclaimPercent: 95}
nodes:
- selector: {pool: latency}
  spec: {cpu: {offlineThresholdPercent: 40}}
- selector: {pool: latency, zone: a}
  spec: {burst: {burstPercent: 50}}
"""


def at(hour: int, tz=UTC) -> datetime:
    return datetime(2026, 3, 1, hour, 30, tzinfo=tz)


def test_a_full_profile_parses_with_defaults_filled() -> None:
    p = parse_profile(GOOD, "prod.yaml")
    assert p.name == "prod" and p.label == f"prod@{p.digest}" and len(p.digest) == 12
    assert p.spec.cpu.offline_threshold_percent == 70 and p.spec.cpu.use_cpu_idle is True
    assert p.spec.burst.qos_levels == ("LC",) and p.spec.eviction.interval == 30.0
    assert p.spec.overcommit.reclaim_percent == 80  # default


@pytest.mark.parametrize("hour_utc,expected", [(3, 70.0), (14, 95.0), (21, 95.0), (23, 70.0)],
                         ids=["11:30 Shanghai", "22:30 Shanghai", "05:30 Shanghai (after midnight)", "07:30 Shanghai"])
def test_windows_cross_midnight_in_the_profiles_time_zone(hour_utc: int, expected: float) -> None:
    p = parse_profile(GOOD)
    assert p.effective({}, at(hour_utc)).cpu.offline_threshold_percent == expected


def test_node_overrides_apply_in_order_and_windows_on_top() -> None:
    p = parse_profile(GOOD)
    assert p.effective({"pool": "latency"}, at(3)).cpu.offline_threshold_percent == 40
    both = p.effective({"pool": "latency", "zone": "a"}, at(3))
    assert both.cpu.offline_threshold_percent == 40 and both.burst.burst_percent == 50 and both.burst.enabled
    assert p.effective({"pool": "latency"}, at(14)).cpu.offline_threshold_percent == 95  # the window wins at night
    assert p.effective({"pool": "other"}, at(3)).cpu.offline_threshold_percent == 70


BAD = [
    ("unknown top-level key", "spek: {}", "spek: unknown key"),
    ("unknown section", "spec: {cpus: {}}", "spec.cpus: unknown key"),
    ("unknown setting", "spec: {cpu: {threshold: 50}}",
     "spec.cpu.threshold: unknown key; known: clampHold, clampOnSignals, offlineFloorPercent"),
    ("threshold over 100", "spec: {cpu: {offlineThresholdPercent: 101}}", "spec.cpu.offlineThresholdPercent: must be"),
    ("negative", "spec: {overcommit: {reclaimPercent: -5}}", "spec.overcommit.reclaimPercent: must be between 0 and 100"),
    ("low above high", "spec: {eviction: {memoryHighPercent: 80, memoryLowPercent: 90}}",
     "spec.eviction.memoryLowPercent: 90 is above memoryHighPercent 80"),
    ("text for a number", "spec: {cpu: {offlineThresholdPercent: high}}", "expected a number"),
    ("bool for a number", "spec: {eviction: {samples: true}}", "expected an integer"),
    ("bad duration", "spec: {eviction: {interval: soon}}", "spec.eviction.interval"),
    ("starvation NaN", "spec: {eviction: {starvationPercent: .nan}}",
     "spec.eviction.starvationPercent: must be a finite number, got nan"),
    ("starvation usage infinite", "spec: {eviction: {starvationUsagePercent: .inf}}",
     "spec.eviction.starvationUsagePercent: must be a finite number"),
    ("starvation samples zero", "spec: {eviction: {starvationSamples: 0}}",
     "spec.eviction.starvationSamples: must be between 1 and 1000, got 0"),
    ("memory stall over 100", "spec: {eviction: {memoryStallPercent: 120}}", "spec.eviction.memoryStallPercent"),
    ("rise negative", "spec: {cpu: {onlineRisePercent: -1}}", "spec.cpu.onlineRisePercent: must be between 0 and 100"),
    ("stall NaN", "spec: {cpu: {onlineStallPercent: .nan}}", "spec.cpu.onlineStallPercent: must be a finite number"),
    ("clamp hold too long", "spec: {cpu: {clampHold: 2m}}", "spec.cpu.clampHold: must be between 0s and 60s"),
    ("clamp on signals not a bool", "spec: {cpu: {clampOnSignals: sometimes}}",
     "spec.cpu.clampOnSignals: expected true or false"),
    ("window hour 24", "spec: {windows: [{time: '24:00-06:00'}]}", "spec.windows[0].time: hour 24 is out of range 0-23"),
    ("window no time", "spec: {windows: [{cpu: {}}]}", "spec.windows[0]: a window needs time"),
    ("window empty", "spec: {windows: [{time: '06:00-06:00'}]}", "spec.windows[0].time: start and end are both 06:00"),
    ("window bad override", "spec: {windows: [{time: '01:00-02:00', cpu: {offlineThresholdPercent: 500}}]}",
     "spec.windows[0].cpu.offlineThresholdPercent"),
    ("window unknown section", "spec: {windows: [{time: '01:00-02:00', gpu: {}}]}", "spec.windows[0].gpu"),
    ("bad time zone", "spec: {timezone: Moon/Crater}", "spec.timezone: unknown time zone"),
    ("bad QoS level", "spec: {burst: {qosLevels: [LC, VIP]}}", "spec.burst.qosLevels"),
    ("override without selector", "nodes: [{spec: {}}]", "nodes[0]: expected selector"),
    ("override breaks a rule", "spec: {eviction: {cpuHighPercent: 90}}\nnodes: [{selector: {a: b}, spec: "
                               "{eviction: {cpuLowPercent: 95}}}]", "nodes[0].spec.eviction.cpuLowPercent"),
    ("not YAML", "spec: {cpu: [", "invalid YAML"),
]


@pytest.mark.parametrize("text,needle", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_profiles_are_refused_naming_the_key(text: str, needle: str) -> None:
    with pytest.raises(ProfileError) as info:
        parse_profile(text, "p.yaml")
    assert str(info.value).startswith("p.yaml: ") and needle in str(info.value)


def test_configmap_wrapper() -> None:
    text = "kind: ConfigMap\ndata:\n  profile.yaml: |\n    name: from-cm\n    spec: {cpu: {offlineThresholdPercent: 60}}\n"
    assert parse_profile(text).spec.cpu.offline_threshold_percent == 60


def test_watcher_reloads_and_keeps_the_last_good(tmp_path: Path) -> None:
    path = tmp_path / "profile.yaml"
    path.write_text("name: one\n")
    results = []
    w = ProfileWatcher(path, on_result=results.append)
    assert w.current.name == "one" and w.poll() is False
    path.write_text("name: two\nspec: {cpu: {offlineThresholdPercent: 50}}\n")
    assert w.poll() is True and w.current.name == "two"
    path.write_text("name: three\nspec: {cpu: {offlineThresholdPercent: 500}}\n")
    assert w.poll() is False and w.current.name == "two" and "offlineThresholdPercent" in w.last_error
    assert w.poll() is False and results == ["success", "refused"]  # the same bad file is refused once
    path.unlink()
    assert w.poll() is False and w.current.name == "two" and "cannot read" in w.last_error
    path.write_text("name: two\nspec: {cpu: {offlineThresholdPercent: 50}}\n")
    w.poll()
    assert w.last_error is None and w.current.name == "two"


def test_no_file_means_the_builtin_profile() -> None:
    w = ProfileWatcher(None)
    assert w.current is DEFAULT_PROFILE and w.poll() is False and w.current.name == "builtin"


def test_without_a_file_the_schedulers_profile_is_taken_and_checked_like_a_file() -> None:
    results: list[str] = []
    w = ProfileWatcher(None, on_result=results.append)
    w.offer("fleet", "name: fleet\nspec: {cpu: {offlineThresholdPercent: 60}}\n")
    assert w.current is DEFAULT_PROFILE  # taken at the next poll (the slow tick), not on the client's thread
    assert w.poll() is True and w.current.name == "fleet" and w.current.spec.cpu.offline_threshold_percent == 60
    w.offer("fleet", "name: fleet\nspec: {cpu: {offlineThresholdPercent: 60}}\n")  # sent again on reconnecting
    assert w.poll() is False and results == ["success"]
    w.offer("fleet", "name: fleet\nspec: {cpu: {offlineThresholdPercent: .nan}}\n")
    assert w.poll() is False and w.current.spec.cpu.offline_threshold_percent == 60
    assert "the scheduler's QoS profile 'fleet'" in w.last_error and "finite" in w.last_error
    assert w.poll() is False and results == ["success", "refused"]


def test_an_agents_own_file_wins_over_the_schedulers_profile(tmp_path: Path, caplog) -> None:
    path = tmp_path / "profile.yaml"
    path.write_text("name: mine\n")
    w = ProfileWatcher(path)
    w.offer("same", "name: mine\n")
    assert w.poll() is False and w.current.name == "mine" and "keeps its own" not in caplog.text
    for _ in range(2):
        w.offer("fleet", "name: fleet\n")
        assert w.poll() is False and w.current.name == "mine"
    assert caplog.text.count("this agent keeps its own --profile") == 1


def test_a_bad_file_at_start_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("spec: {cpu: {nope: 1}}\n")
    with pytest.raises(ProfileError, match="spec.cpu.nope"):
        ProfileWatcher(path)


def test_the_shipped_profile_parses_and_means_what_its_comments_say() -> None:
    shipped = Path(__file__).resolve().parents[2] / "daemonset" / "config" / "qos-profile.yaml"
    profile = parse_profile(shipped.read_text(), str(shipped))
    day, night = datetime(2026, 3, 1, 12, 0).astimezone(), datetime(2026, 3, 1, 23, 0).astimezone()
    assert profile.name == "default" and profile.effective({}, day).cpu.offline_threshold_percent == 80
    assert profile.effective({}, night).cpu.offline_threshold_percent == 90
    assert profile.effective({"scoria.io/pool": "latency-critical"}, day).eviction.cpu_high_percent == 85
    assert profile.spec.burst.enabled and profile.spec.eviction.interval == 10.0
