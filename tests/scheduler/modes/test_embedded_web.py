"""The web view's server without a browser: who may read it, what it hands out, what its plots accept.
(tests/e2e/test_webview.py loads it in a real headless Chromium.)"""

from __future__ import annotations

import json
import math
import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from proto.errors import InputError
from scheduler.modes.embedded.series import MAX_CHARTS, MAX_LINES, Series
from scheduler.modes.embedded.server import ControlServer
from scheduler.modes.embedded.web import WebView, check_address
from tests.scheduler.modes.test_embedded import cluster, docs
from tests.support.builders import pod, queue


@pytest.fixture
def view(tmp_path: Path):
    embedded, sched = cluster(tmp_path / "s")
    control = ControlServer(embedded, socket_path=tmp_path / "c.sock")
    web = WebView(control, url_file=tmp_path / "s" / "web.url", sample_s=0.1)
    web.start()
    yield embedded, sched, web
    web.stop()
    control.stop()


def fetch(url: str, headers: dict | None = None) -> tuple[int, bytes, dict]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=5) as answer:
            return answer.status, answer.read(), dict(answer.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def test_only_a_request_with_the_token_gets_the_data(view, tmp_path: Path) -> None:
    embedded, sched, web = view
    url = (tmp_path / "s" / "web.url").read_text().strip()
    assert url == web.url and (tmp_path / "s" / "web.url").stat().st_mode & 0o777 == 0o600
    status, page, headers = fetch(web.base)  # the page carries neither data nor token
    assert status == 200 and b"<script src=\"app.js\">" in page and web.token.encode() not in page
    assert "default-src 'self'" in headers["Content-Security-Policy"] and headers["Cache-Control"] == "no-store"
    assert fetch(web.base + "api/state")[0] == 403
    assert fetch(web.base + "api/state", {"Authorization": "Bearer wrong"})[0] == 403
    status, body, _ = fetch(web.base + "api/state", {"Authorization": f"Bearer {web.token}"})
    assert status == 200 and json.loads(body)["nodes"][0]["name"] == "n0"
    # a page of another name that resolves to 127.0.0.1 (DNS rebinding) is refused, token or not
    status, _, _ = fetch(web.base + "api/state", {"Authorization": f"Bearer {web.token}",
                                                  "Host": f"attacker.example:{web.port}"})
    assert status == 403
    assert fetch(web.base + "app.js")[0] == 200 and fetch(web.base + "../store.sqlite")[0] == 404


def test_the_state_shows_pods_queues_and_plots_but_no_command_or_environment(view) -> None:
    embedded, sched, web = view
    secret = pod("web", cpu=1, queue="q")
    secret["spec"]["containers"][0].update(command=["sh", "-c", "serve --password hunter2"],
                                           env=[{"name": "TOKEN", "value": "s3cr3t"}])
    secret["metadata"]["annotations"].update({"volcano.sh/qos-level": "LS", "private": "do-not-show"})
    embedded.apply(docs(queue("q", weight=2), secret, pod("late", cpu=64)))
    sched.run_once()
    web.sample()
    web.control.series.add({"online p99 latency (ms)": {"shop/probe": 4.5}})
    status, body, _ = fetch(web.base + "api/state", {"Authorization": f"Bearer {web.token}"})
    text = body.decode()
    assert "hunter2" not in text and "s3cr3t" not in text and "do-not-show" not in text
    state = json.loads(text)
    (node,) = state["nodes"]
    assert [(p["name"], p["status"], p["qos"]) for p in node["pods"]] == [("web", "Running", "LS")]
    assert [(p["name"], p["status"]) for p in state["unplaced"]] == [("late", "Pending")]
    assert "Insufficient cpu" in state["unplaced"][0]["reason"]
    queues = {q["name"]: q for q in state["queues"]}
    assert queues["q"]["allocated"] == {"cpu": "1", "memory": "1Gi"} and queues["q"]["hasDeserved"], queues
    assert state["charts"]["online p99 latency (ms)"]["shop/probe"][0][1] == 4.5
    assert set(state["charts"]) >= {"evictions (total)", "online p99 latency (ms)"}, state["charts"]
    assert any(e["reason"] == "FailedScheduling" and e["object"] == "pod default/late" for e in state["events"])


def test_the_view_listens_on_loopback_only() -> None:
    assert check_address("127.0.0.1") == "127.0.0.1" and check_address("::1") == "::1"
    for address in ("0.0.0.0", "192.168.1.10", "::", "localhost"):
        with pytest.raises(InputError, match="--web-address"):
            check_address(address)


def test_a_taken_web_port_is_one_line_naming_the_flag(tmp_path: Path) -> None:
    embedded, _ = cluster(tmp_path / "s")
    control = ControlServer(embedded, socket_path=tmp_path / "c.sock")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(InputError, match=rf"--web-port {port}: 127.0.0.1:{port} is in use.*--web-port PORT"):
            WebView(control, port=port)
    control.stop()


def test_series_are_bounded_and_refused_whole() -> None:
    series = Series(clock=lambda: 100.0, points=3)
    for v in range(5):
        series.add({"p99": {"web": float(v)}})
    assert series.snapshot() == {"p99": {"web": [(100.0, 2.0), (100.0, 3.0), (100.0, 4.0)]}}
    bad = [{"p99": {"web": math.inf}}, {"p99": {"web": "fast"}}, {"p99": {"web": True}}, {"p99": 3},
           {"": {"x": 1}}, {"p99": {"x" * 81: 1}}, ["p99"], {"p99": {f"l{i}": 1 for i in range(MAX_LINES)}},
           {f"c{i}": {"x": 1} for i in range(MAX_CHARTS)}]
    for doc in bad:
        with pytest.raises(InputError):
            series.add(doc)
    assert series.snapshot() == {"p99": {"web": [(100.0, 2.0), (100.0, 3.0), (100.0, 4.0)]}}  # nothing of them


def test_serve_refuses_a_web_view_off_loopback_or_outside_embedded_mode(tmp_path: Path, capsys) -> None:
    from scheduler.cli import main

    cases = [(["serve", "--web-port", "0", "--metrics-port", "0"], "--web-port is for --embedded"),
             (["serve", "--embedded", "--state", str(tmp_path / "s"), "--web-port", "0", "--web-address", "0.0.0.0",
               "--metrics-port", "0"], "the web view listens on loopback only")]
    for argv, needle in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and needle in err and err.count("\n") == 1, err


def test_connections_beyond_the_limit_get_503_at_once(tmp_path: Path, monkeypatch) -> None:
    """Held-open connections take the view's threads; one more is answered 503 naming the view, not queued."""
    import time

    from scheduler.modes.embedded import web as web_module

    monkeypatch.setattr(web_module, "MAX_CONNECTIONS", 2)
    embedded, _ = cluster(tmp_path / "s")
    control = ControlServer(embedded, socket_path=tmp_path / "c.sock")
    web = WebView(control, sample_s=0.1)
    web.start()
    idle = [socket.create_connection(("127.0.0.1", web.port)) for _ in range(2)]
    try:
        time.sleep(0.2)
        t0 = time.monotonic()
        status, body, _ = fetch(web.base)
        assert status == 503 and time.monotonic() - t0 < 2
        assert "the web view is serving 2 connections" in json.loads(body)["error"]
    finally:
        for s in idle:
            s.close()
    deadline = time.monotonic() + 5
    while fetch(web.base)[0] != 200:  # the slots come back once the idle ones are gone
        assert time.monotonic() < deadline
        time.sleep(0.05)
    web.stop()
    control.stop()


def test_a_podgroup_counts_its_members_by_phase(tmp_path: Path) -> None:
    """Volcano's PodGroup status counts (running, succeeded, failed) in the control API: this group's pods
    only (another group's and a pod of no group do not count), a phase with none left out."""
    from tests.support.builders import podgroup

    embedded, _ = cluster(tmp_path / "s")
    embedded.apply(docs(podgroup("g", minMember=2), podgroup("h"), pod("a", group="g"), pod("b", group="g"),
                        pod("c", group="h"), pod("d")))
    phases = {"a": "Running", "b": "Succeeded", "c": "Running", "d": "Running"}
    for p in embedded.cache.pods.values():
        p.phase = phases[p.name]
    control = ControlServer(embedded, socket_path=tmp_path / "c.sock")
    status, items = control.objects("PodGroup")
    counts = {i["key"]: {k: i["status"][k] for k in ("running", "succeeded", "failed") if k in i["status"]}
              for i in items}
    assert status == 200 and counts == {"default/g": {"running": 1, "succeeded": 1}, "default/h": {"running": 1}}
    assert control.objects("PodGroup", "default/g")[1]["status"]["succeeded"] == 1
    control.stop()
