"""hack/bench/fleet.py scaled down to 30 nodes at five reports a second: one JSON line with every figure and
plausible values (the goals are the benchmark's to report, at full size), for each way of sending."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hack.lib.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "hack" / "bench" / "fleet.py"
TINY = ["--nodes", "30", "--per-channel", "10", "--interval", "0.2", "--warmup", "1.5", "--seconds", "2"]


def run(*extra: str) -> dict:
    out = subprocess.run([sys.executable, str(BENCH), *TINY, "--metrics-port", str(free_port()), *extra],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.mark.parametrize("extra, deltas", [((), True), (("--no-deltas",), False), (("--sender", "raw"), False)],
                         ids=["client-deltas", "client-full", "raw"])
def test_every_node_reports_and_the_figures_are_there(extra: tuple[str, ...], deltas: bool) -> None:
    r = run(*extra)
    assert r["agents_connected"] == 30 and r["refused"] == 0 and r["reconnects"] == 0
    assert 100 <= r["reports_per_second"] <= 200  # 30 nodes at 5 a second
    assert r["scheduler_cpu_us_per_report"] > 0 and r["scheduler_cpu_cores"] > 0
    assert 0 < r["p50_report_to_cache_seconds"] <= r["p99_report_to_cache_seconds"] < 5
    if extra[:1] == ("--sender",):
        assert r["fleet_connected"] is None and r["delta_fraction"] == 0
    else:
        assert r["fleet_connected"] == 30
        assert (r["delta_fraction"] > 0.8) if deltas else (r["delta_fraction"] == 0)
