"""The demo's live view says what goes wrong (issue 19 item 5): with its port taken the web pod crash-looped
while the view showed it Running with a climbing p99, and never the probe's 474 errors.  The view now shows the
probe's errors and every failing, evicted or lost pod with its reason and restarts."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from types import ModuleType

import pytest

from hack.lib.processes import ROOT


def demo_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("scoria_demo_up", ROOT / "hack" / "demo" / "up.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def item(key: str, phase: str, *, reason: str | None = None, runtime: dict | None = None, **status) -> dict:
    return {"key": key, "status": {"phase": phase, "reason": reason, "nodeName": "n", "runtime": runtime or {},
                                    **status}}


PODS = [
    item("shop/web", "Running", runtime={"reason": "CrashLoopBackOff", "restarts": 3,
                                         "message": "back-off 40s restarting container web (exited with code 1)"}),
    item("shop/probe", "Running", runtime={"restarts": 0}),
    item("batch/etl-a-0", "Failed", reason="Evicted: node memory at 93% for 3 samples", evicted=True),
    item("batch/etl-b-0", "Unknown", reason="NodeLost: node n is Unknown: its agent has not reported for 41 s"),
    item("batch/etl-b-1", "Pending", reason="0/1 nodes are available: 1 Insufficient kubernetes.io/batch-cpu"),
]


def sample(demo: ModuleType) -> dict:
    return {"t": 0, "phases": {"Running": 2}, "p50_ms": 3.1, "p99_ms": 250.0, "probe_errors": 474,
            "probe_sent": 1000, "offline_per_s": 0, "running_offline": 0, "cpu_used": 1.2, "batch_cpu": 300,
            "quota": 700, "node": "Ready", "pods": [demo.pod_row(p) for p in PODS]}


@pytest.mark.parametrize("tty", [False, True], ids=["log", "terminal"])
def test_the_live_view_shows_probe_errors_and_failing_evicted_and_lost_pods(monkeypatch, capsys, tmp_path,
                                                                          tty: bool) -> None:
    demo = demo_module()
    monkeypatch.setattr(sys.stdout, "isatty", lambda: tty)
    demo.Demo(argparse.Namespace(state=str(tmp_path), keep=False, duration=0)).show(sample(demo))
    out = capsys.readouterr().out
    assert "probe errors: 474 of 1,000" in out, out
    for needle in ("shop/web", "CrashLoopBackOff: back-off 40s restarting container web (exited with code 1)",
                   "Evicted: node memory at 93% for 3 samples", "NodeLost: node n is Unknown"):
        assert needle in out, (needle, out)
    if not tty:
        failing = out.split("failing or evicted: ")[1].split(" | waiting: ")[0]
        assert "shop/probe" not in failing and "etl-b-1" not in failing, failing  # healthy and pending ones are not
        assert "shop/web Running: CrashLoopBackOff" in failing and "(3 restarts)" in failing, failing
        assert out.rstrip().endswith("| waiting: 1, batch/etl-b-1: 0/1 nodes are available: 1 Insufficient "
                                     "kubernetes.io/batch-cpu"), out  # why pods wait, whole
