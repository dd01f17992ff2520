"""hack/bench/kube_mode.py scaled down to 100 nodes and 1,000 pods: one JSON line with every
figure, every gang bound by the first cycle, and no write in a cycle where nothing changed (issue 16).
No figure is judged against a time: speed is the benchmark's to report, at the issue's size."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"nodes", "pods", "qps", "burst", "sync_s", "first_cycle_s", "first_cycle_binds", "binds_drained_s",
        "expected_binds", "rss_delta_mb", "writes_per_steady_cycle", "steady_cycle_s", "relist_s",
        "relist_pods_s", "informer_mb"}


def test_the_benchmark_reports_every_figure_at_a_small_size() -> None:
    out = subprocess.run([sys.executable, "hack/bench/kube_mode.py", "--nodes", "100", "--pods",
                          "1000", "--cycles", "2"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    (line,) = out.stdout.strip().splitlines()
    figures = json.loads(line)
    assert set(figures) == KEYS
    assert (figures["nodes"], figures["pods"]) == (100, 1000)
    # 900 running, five gangs of ten pending (each fits), fifty pods that never fit
    assert figures["first_cycle_binds"] == figures["expected_binds"] == 50
    assert figures["writes_per_steady_cycle"] == [0, 0]
    assert 0 < figures["sync_s"] <= figures["first_cycle_s"] <= figures["binds_drained_s"]
    assert 0 < figures["relist_pods_s"] <= figures["relist_s"] and figures["informer_mb"] > 0


def test_the_benchmark_refuses_a_size_it_cannot_seed() -> None:
    out = subprocess.run([sys.executable, "hack/bench/kube_mode.py", "--pods", "10"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "need --nodes >= 1 and --pods >= 100" in out.stderr
    assert "Traceback" not in out.stderr
