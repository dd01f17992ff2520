"""The live web view in a real headless browser (Chromium from the Debian packages, driven through chromedriver):
a small embedded-mode run — the real scheduler with ``--web-port 0``, the real agent, pods as real processes in
real cgroups — loaded as a person would open it, and checked for what it shows.

The screenshot is kept as a test artefact: ``tests/artifacts/webview.png`` (git-ignored), or under
``$SCORIA_ARTIFACTS``; the test prints its path.  Where chromium is missing the test is skipped saying so, except
in CI (``$CI`` set, as ``.ci/run`` sets it after installing chromium): there a missing browser fails it.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from hack.lib.processes import ROOT, control
from tests.e2e import test_demo
from tests.e2e.test_demo import NO_CPU_EVICTION, SLEEP, pod, wait
from tests.support import browser

stack = test_demo.stack  # the fixture: a scheduler and an agent on this machine

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
ARTIFACTS = Path(os.environ.get("SCORIA_ARTIFACTS") or ROOT / "tests" / "artifacts")


@pytest.fixture
def chromium():
    why = browser.missing()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"{why}: CI must run the browser test (.ci/run installs chromium and chromium-driver)")
        pytest.skip(f"{why}; CI installs them (.ci/run)")
    b = browser.Browser()
    try:
        yield b
    finally:
        b.close()


def test_the_web_view_shows_nodes_pods_queues_and_live_plots(stack, chromium) -> None:
    # no CPU eviction: other work on a shared machine must not evict the offline pod the test looks for
    s = stack(scheduler_args=("--web-port", "0"), profile={"eviction": NO_CPU_EVICTION})
    url = (s.dir / "scheduler" / "web.url").read_text().strip()
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[-_A-Za-z0-9]{20,}", url), url
    assert (s.dir / "scheduler" / "web.url").stat().st_mode & 0o077 == 0  # the token is the owner's alone
    s.apply({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "batch"},
             "spec": {"weight": 1}},
            pod(s, "web", SLEEP, qos="LS", requests={"cpu": "200m", "memory": "32Mi"}),
            {**pod(s, "crunch", SLEEP, qos="BE", requests={"cpu": "100m", "memory": "32Mi"}),
             "metadata": {"name": "crunch", "namespace": "e2e", "annotations": {
                 "volcano.sh/qos-level": "BE", "scheduling.volcano.sh/queue-name": "batch"}}},
            pod(s, "huge", SLEEP, requests={"cpu": "10000", "memory": "32Mi"}))
    wait(lambda: s.phase("e2e/web") == "Running" and s.phase("e2e/crunch") == "Running", 30, "the pods to run", s.pods)
    for i in range(3):  # what the demo pushes each sample: the probe's p99 and the burners' throughput
        control(s.socket, "POST", "/series", json.dumps({"online p99 latency (ms)": {"e2e/web": 3.0 + i},
                                                         "offline throughput (iterations/s)": {"batch": 1000.0 * i}}
                                                        ).encode(), {"Content-Type": "application/json"})

    # without the token the data is refused; the page itself says where the token is
    base = url.split("?")[0]
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(base + "api/state", timeout=5)
    assert refused.value.code == 403
    chromium.get(base)
    chromium.wait("return document.getElementById('status').textContent.includes('no token')", what="no-token note")

    chromium.get(url)
    first = int(chromium.wait("return document.body.dataset.updates", what="a first update"))
    shown = chromium.wait("""
        const node = document.querySelector('#nodes .node[data-name="e2e-node"]');
        if (!node || !node.querySelector('.pod[data-name="e2e/web"]')) return null;
        if (!document.querySelector('.chart[data-title="offline CPU (millicores)"]')) return null;
        return {
          node: node.querySelector('.name').textContent,
          status: node.querySelector('h3 .tag').textContent,
          pods: [...node.querySelectorAll('.pod')].map(p => [p.dataset.name, p.dataset.status]),
          unplaced: [...document.querySelectorAll('#unplaced .pod')].map(p => [p.dataset.name,
                                                                             p.querySelector('.reason').textContent]),
          queues: Object.fromEntries([...document.querySelectorAll('#queues tbody tr')].map(
            r => [r.dataset.name, [r.querySelector('.deserved').textContent, r.querySelector('.allocated').textContent]])),
          charts: [...document.querySelectorAll('.chart')].map(c => c.dataset.title),
        };""", what="the node and its pods")
    assert shown["node"] == "e2e-node" and shown["status"] == "Ready", shown
    assert ["e2e/web", "Running"] in shown["pods"] and ["e2e/crunch", "Running"] in shown["pods"], shown
    (huge,) = shown["unplaced"]
    assert huge[0] == "e2e/huge" and "Insufficient cpu" in huge[1], shown  # why it waits, whole
    deserved, allocated = shown["queues"]["default"]
    assert "cpu" in deserved and "cpu 200m" in allocated, shown["queues"]
    assert "cpu 100m" in shown["queues"]["batch"][1] or shown["queues"]["batch"][1] == "–", shown["queues"]
    assert shown["charts"][:2] == ["online p99 latency (ms)", "offline throughput (iterations/s)"], shown
    assert {"offline CPU (millicores)", "evictions (total)", "node CPU in use (cores)"} <= set(shown["charts"]), shown

    # the plots have points, and more of them as the view updates (the scheduler samples every 2 s)
    points = """return Object.fromEntries([...document.querySelectorAll('.chart')].map(c => [c.dataset.title,
                  Math.max(0, ...[...c.querySelectorAll('polyline')].map(l => +l.dataset.points))]));"""
    before = chromium.run(points)
    assert before["online p99 latency (ms)"] == 3 and before["offline throughput (iterations/s)"] == 3, before
    control(s.socket, "POST", "/series", json.dumps({"online p99 latency (ms)": {"e2e/web": 9.0}}).encode(),
            {"Content-Type": "application/json"})
    chromium.wait(f"return +document.body.dataset.updates >= {first + 3}", what="three more updates")
    after = chromium.run(points)
    assert after["online p99 latency (ms)"] == 4, after
    assert after["offline CPU (millicores)"] > before["offline CPU (millicores)"] >= 1, (before, after)
    legend = chromium.run("return document.querySelector('.chart[data-title=\"online p99 latency (ms)\"] .legend')"
                          ".textContent")
    assert "e2e/web 9" in legend, legend
    # nothing of a pod's command or environment reaches the page
    page = chromium.run("return document.body.innerText")
    assert s.tag not in page and "import time" not in page, page
    shot = chromium.screenshot(ARTIFACTS / "webview.png")
    print(f"web view screenshot: {shot}")
    assert shot.stat().st_size > 10_000
