"""hack/bench/colocation.py in a tiny configuration on this machine's real cgroups: one JSON line with
every figure and plausible values (not the goals: they are the benchmark's to report, at full length),
and nothing left behind — no cgroup, no process — after a normal end or a Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "hack" / "bench" / "colocation.py"
CPU = Path("/sys/fs/cgroup/cpu")
TINY = ["--phase-seconds", "1.5", "--rounds", "1", "--settle", "0.5", "--rate", "100", "--bursts-per-phase", "1"]

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not os.access(CPU, os.W_OK) or not (CPU / "cpu.idle").exists(),
    reason="needs root and a writable cgroup v1 cpu hierarchy with cpu.idle")


def _ours() -> set[str]:
    return {p.name for p in CPU.glob("scoria-colo-*")}


def _bench_processes(parent: str | None = None) -> list[psutil.Process]:
    """Processes the benchmark started: its roles (this file re-executed) and its agent."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if (str(BENCH) in cmd and " _" in cmd) or (parent and f"{parent}/node" in cmd):
            found.append(p)
    return found


def test_a_tiny_run_reports_every_figure() -> None:
    before = _ours()
    out = subprocess.run([sys.executable, str(BENCH), *TINY], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1
    d = json.loads(lines[0])

    assert d["phase_seconds"] == 1.5 and d["rate_per_s"] == 100 and d["hogs"] == os.cpu_count()
    assert 0 < d["work_ms_calibrated"] < 10 and d["work_iterations"] > 0
    assert d["offline_threshold_percent"] and d["profile"] == "daemonset/config/qos-profile.yaml"
    for phase in "abc":
        lat = d["latency_ms"][phase]
        assert lat["sent"] > 50 and lat["answered"] == lat["sent"] and lat["errors"] == lat["unanswered"] == 0
        assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"] < 2000
        every = d["latency_all_requests_ms"][phase]
        assert every["sent"] >= lat["sent"] + 30  # the burst's requests too
        cpu = d["cpu"][phase]
        assert 0 < cpu["cpu_util_percent"] <= 100 and cpu["cores"]["online"] > 0
    assert d["requests"]["sent"] == d["requests"]["answered"] > 0 and d["requests"]["errors"] == 0
    assert d["cpu"]["a"]["cores"]["offline"] == 0 < d["cpu"]["b"]["cores"]["offline"]
    # the hogs add the benchmark's own CPU (the machine's utilisation may be at 100% in (a) already, with other
    # work on a shared machine)
    bench = {p: sum(v for k, v in d["cpu"][p]["cores"].items() if k != "outside_bench") for p in "ab"}
    assert bench["b"] > bench["a"]
    assert d["phase_b_knobs"] == [{"offline_idle": 0, "offline_parent_idle": 0, "offline_parent_shares": 1024,
                                   "offline_quota": None, "offline_shares": 1024, "online_shares": 1024}]
    assert d["offline_counter_error"] is None, d["offline_units_by_round"]  # no hog's count went back
    assert all(u >= 0 for rounds in d["offline_units_by_round"].values() for r in rounds for u in r)
    assert all(sum(r) > 0 for r in d["offline_units_by_round"]["b"]) and d["offline_units_by_round"]["a"] == [[0] * d["hogs"]]
    work = d["offline_iterations_per_s"]
    assert work["b"] > 0 and work["c"] > 0 and d["offline_ratio_c_over_b"] == pytest.approx(work["c"] / work["b"], abs=0.01)
    assert d["p99_ratio_c_over_a"] > 0
    reaction = d["reaction_ms"]
    assert reaction["bursts"] == 1 == reaction["timed"] + reaction["missed"] + reaction["skipped_at_floor"]
    assert all(0 < ms < 1000 for ms in reaction["all"])
    agent = d["agent"]
    assert agent["offline_quota_millicores"]["mean"] > 0 and 0 < agent["cpu_percent_of_core"] < 50
    assert 0 <= agent["offline_quota_millicores"]["open_percent_of_time"] <= 100
    assert set(d["goals"]) == {"cpu_util_c_at_least_95pct", "online_p99_c_within_5pct_of_a",
                               "offline_c_at_least_90pct_of_b"}
    assert all(isinstance(v, bool) for v in d["goals"].values())
    summary = d["summary"]
    assert summary["cpu_util_c_percent"] == d["cpu"]["c"]["cpu_util_percent"]
    assert summary["p99_ratio_c_over_a"] == d["p99_ratio_c_over_a"]
    assert summary["offline_ratio_c_over_b"] == d["offline_ratio_c_over_b"]
    assert set(summary) == {"cpu_util_c_percent", "p99_ratio_c_over_a", "offline_ratio_c_over_b", "reaction_p99_ms",
                            "agent_cpu_percent_of_core", "outside_bench_cores"}

    assert d["cgroup_parent"] not in _ours() and _ours() <= before
    assert not _bench_processes(d["cgroup_parent"])


def test_ctrl_c_leaves_no_cgroup_and_no_process() -> None:
    before = _ours()
    # phases long enough that the Ctrl-C lands inside phase (c) however slowly the loop below notices it began
    # (listing every process is slow on a busy machine); with 1.5 s phases it could land in the clean-up
    longer = [*TINY[:1], "4", *TINY[2:]]
    proc = subprocess.Popen([sys.executable, str(BENCH), *longer], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    new: set[str] = set()
    while time.monotonic() < deadline and proc.poll() is None:
        new = _ours() - before
        if new and len(_bench_processes(next(iter(new)))) >= 3 + os.cpu_count():
            break  # the server, the load generator, the hogs and the agent: phase (c) is under way
        time.sleep(0.05)
    assert new and proc.poll() is None, "the benchmark ended before phase (c)"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "interrupted" in err
    assert not (new & _ours())
    assert not _bench_processes(next(iter(new)))


@pytest.mark.skipif(Path("/sys/fs/cgroup/cgroup.controllers").exists(),
                    reason="the machine's root is cgroup v2: --cgroup-version 2 is the real run there")
def test_on_a_v1_machine_the_v2_run_checks_the_agents_writes_on_a_fixture_tree() -> None:
    out = subprocess.run([sys.executable, str(BENCH), "--cgroup-version", "2"], cwd=ROOT, capture_output=True,
                         text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    d = json.loads(out.stdout.strip().splitlines()[-1])
    assert d["cgroup_version"] == 2 and d["mode"] == "fixture" and "no latency" in d["note"]
    assert d["ok"] and set(d["checks"]) >= {"offline_parent_and_pod_sched_idle", "calm_quota_open",
                                            "rise_clamps_quota", "online_stall_clamps_quota", "no_cgroup_write_errors"}
    assert len(d["reaction_ms"]["all"]) == 3
