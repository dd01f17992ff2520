"""hack/bench/jobs.py scaled down to 6 Jobs of 2 pods: one JSON line per mode with every figure, every Job bound.
No figure is judged against a time: speed is the benchmark's to report, at the issue's size."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"mode", "jobs", "pods_per_job", "nodes", "interval_s", "bound_jobs", "p50_s", "p99_s", "max_s", "all_bound_s",
        "controller_cpu_s"}


def test_the_benchmark_reports_every_figure_per_mode_at_a_small_size() -> None:
    out = subprocess.run([sys.executable, "hack/bench/jobs.py", "--jobs", "6", "--pods", "2", "--nodes", "2",
                          "--interval", "0.2", "--timeout", "60"], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [json.loads(line) for line in out.stdout.strip().splitlines()]
    assert [f["mode"] for f in lines] == ["embedded", "kubernetes"]
    for figures in lines:
        assert set(figures) >= KEYS, figures
        assert (figures["jobs"], figures["pods_per_job"], figures["bound_jobs"]) == (6, 2, 6)
        assert 0 < figures["p50_s"] <= figures["p99_s"] <= figures["max_s"]
    assert lines[0]["reconciles"] >= 2  # a PodGroup, then pods once it was admitted


def test_the_benchmark_refuses_what_cannot_fit() -> None:
    out = subprocess.run([sys.executable, "hack/bench/jobs.py", "--jobs", "1000", "--nodes", "1"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "do not fit" in out.stderr and "Traceback" not in out.stderr
