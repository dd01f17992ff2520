"""kubectl's habits in the embedded CLI (issue 19, item 8): ``get -A/-n/-o wide|yaml|json|name/-l/-w``, ``describe``
of every kind with its events, ``get events``, ``top pods``, and what a restart leaves of the last crash.

The scheduler side is real (the store, the cache, the scheduling cycle, the control API on its Unix socket); the
agents are faked by the runtime lists their reports carry (tests/e2e/test_demo.py runs the real processes).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from proto.model import ContainerRuntime, ContainerTermination, PodRuntime
from scheduler.modes.embedded import client
from scheduler.modes.embedded.printing import human_duration
from scheduler.modes.embedded.server import ControlServer
from scheduler.modes.embedded.store import Store
from tests.scheduler.modes.test_embedded import View, cluster, docs
from tests.support.builders import pod, podgroup, priority_class, queue
from tests.support.ctl import ctl

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple]:
    """(embedded, scheduler, control server) on one node n0 of 8 CPUs."""
    embedded, sched = cluster(tmp_path / "s")
    server = ControlServer(embedded, socket_path=tmp_path / "c.sock", watch_seconds=2)
    server.start()
    yield embedded, sched, server
    server.stop()


def labelled(name: str, labels: dict, **kw) -> dict:
    doc = pod(name, **kw)
    doc["metadata"]["labels"] = labels
    return doc


def running(p, restarts: int = 0, pid: int = 100, last: ContainerTermination | None = None) -> PodRuntime:
    c = ContainerRuntime("main", "running", 0, restarts, pid, started_ns=int(time.time() * 1e9),
                         last_termination=last)
    return PodRuntime(p.uid, p.namespace, p.name, "Running", restarts=restarts, log_dir="/x", containers=[c])


def uid(embedded, key: str):
    return next(p for p in embedded.cache.pods.values() if p.key == key)


# -- get ----------------------------------------------------------------------------------------------------
def test_get_lists_the_default_namespace_all_of_them_with_A_and_one_with_n(api) -> None:
    """Found: ``get -A`` was refused (no such flag); ``get pods`` listed every namespace in a table of its own."""
    embedded, sched, server = api
    embedded.apply(docs(pod("web", cpu=1), pod("api", cpu=1, namespace="shop")))
    sched.run_once()
    status, out, err = ctl(server, "get", "pods")
    assert status == 0, err
    assert out.splitlines()[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"], out
    assert "web" in out and "api" not in out
    status, out, _ = ctl(server, "get", "pods", "-A")
    header, *rows = out.splitlines()
    assert header.split()[:2] == ["NAMESPACE", "NAME"] and sorted(r.split()[:2] for r in rows) == [
        ["default", "web"], ["shop", "api"]], out
    status, out, _ = ctl(server, "get", "po", "--all-namespaces", "-o", "name")
    assert sorted(out.splitlines()) == ["pod/api", "pod/web"]
    assert ctl(server, "get", "pods", "-n", "shop", "-o", "name")[1] == "pod/api\n"
    status, _, err = ctl(server, "get", "pods", "-n", "nowhere")
    assert status == 0 and err == "No resources found in nowhere namespace.\n"


def test_get_wide_shows_whole_reasons_however_long(api) -> None:
    """Found: the table cut reasons at 100 characters."""
    embedded, sched, server = api
    embedded.apply(docs(podgroup("trio", minMember=3),
                        *[pod(f"trio-{i}", cpu=1, group="trio", nodeSelector={"zone": "nowhere"}) for i in range(3)]))
    sched.run_once()
    reason = uid(embedded, "default/trio-0").reason
    assert len(reason) > 100
    status, out, _ = ctl(server, "get", "pods", "-o", "wide")
    header, *rows = out.splitlines()
    assert header.split()[-3:] == ["NODE", "QOS", "REASON"], header
    assert all(row.endswith(reason) for row in rows), (reason, out)
    assert "Pending" in rows[0]
    status, out, _ = ctl(server, "get", "podgroups", "-o", "wide")
    assert out.splitlines()[0].split() == ["NAME", "STATUS", "MINMEMBER", "RUNNINGS", "AGE", "QUEUE"], out


def test_get_o_json_yaml_and_name_print_kubernetes_objects(api) -> None:
    embedded, sched, server = api
    embedded.apply(docs(queue("q", weight=2), pod("web", cpu=1, queue="q"), priority_class("high", 1000)))
    sched.run_once()
    _, out, _ = ctl(server, "get", "pod", "web", "-o", "json")
    obj = json.loads(out)
    assert (obj["kind"], obj["metadata"]["name"], obj["spec"]["nodeName"], obj["status"]["phase"]) == (
        "Pod", "web", "n0", "Running"), obj
    _, out, _ = ctl(server, "get", "pods", "-o", "yaml")
    listed = yaml.safe_load(out)
    assert listed["kind"] == "List" and [i["metadata"]["name"] for i in listed["items"]] == ["web"]
    _, out, _ = ctl(server, "get", "queues", "-o", "name")
    assert out.splitlines() == ["queue.scheduling.volcano.sh/default", "queue.scheduling.volcano.sh/q"]
    _, out, _ = ctl(server, "get", "queue", "q", "-o", "yaml")
    assert yaml.safe_load(out)["status"]["allocated"] == {"cpu": "1", "memory": "1Gi"}, out
    _, out, _ = ctl(server, "get", "nodes", "-o", "json")
    (node,) = json.loads(out)["items"]
    assert node["kind"] == "Node" and node["status"]["conditions"][0]["status"] == "True", node
    assert ctl(server, "get", "pc", "-o", "name")[1] == "priorityclass.scheduling.k8s.io/high\n"


def test_get_queues_shows_what_each_deserves_against_what_it_has(api) -> None:
    embedded, sched, server = api
    embedded.apply(docs(queue("a", weight=1), queue("b", weight=3),
                        *[pod(f"a{i}", cpu=2, queue="a") for i in range(4)],
                        *[pod(f"b{i}", cpu=2, queue="b") for i in range(4)]))
    sched.run_once()
    sched.run_once()
    status, out, _ = ctl(server, "get", "queues")
    rows = {line.split()[0]: line for line in out.splitlines()}
    assert rows["NAME"].split() == ["NAME", "WEIGHT", "PARENT", "DESERVED", "ALLOCATED"], out
    assert "cpu=2," in rows["a"].split("<none>")[1] and "cpu=6," in rows["b"].split("<none>")[1], out
    deserved = embedded.cache.queue_deserved
    assert deserved["a"]["cpu"] == 2000 and deserved["b"]["cpu"] == 6000, deserved


def test_get_l_selects_by_label(api) -> None:
    embedded, _, server = api
    embedded.apply(docs(labelled("web", {"app": "web", "tier": "front"}), labelled("api", {"app": "api"}),
                        labelled("db", {"app": "db", "tier": "back"})))
    cases = [("app=web", ["web"]), ("app!=web", ["api", "db"]), ("tier", ["db", "web"]), ("!tier", ["api"]),
             ("app in (api, db)", ["api", "db"]), ("app notin (api),tier", ["db", "web"]), ("app==db,tier=back", ["db"])]
    for selector, names in cases:
        status, out, err = ctl(server, "get", "pods", "-l", selector, "-o", "name")
        assert (status, sorted(out.split())) == (0, [f"pod/{n}" for n in names]), (selector, out, err)
    status, _, err = ctl(server, "get", "pods", "-l", "app in web")
    assert status == 2 and "is not a label requirement" in err, err


def test_get_w_prints_each_change_until_ctrl_c(api, tmp_path: Path) -> None:
    """``get pods -w``: the table, then a line for each pod that changes (long-polling GET /watch), until SIGINT."""
    embedded, sched, server = api
    embedded.apply(docs(pod("web", cpu=1)))
    proc = subprocess.Popen([sys.executable, "-m", "scheduler", "get", "pods", "-w", "--server",
                             f"unix://{server.socket_path}"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 20
        while len(lines) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lines[0].split()[:3] == ["NAME", "READY", "STATUS"] and "Pending" in lines[1], lines
        sched.run_once()  # bound: the watch prints it again
        embedded.pod_actions("n0", View(running(uid(embedded, "default/web"))))
        while not any("Running" in line and "1/1" in line for line in lines) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any("Running" in line and "1/1" in line for line in lines[2:]), lines
        embedded.delete("Pod", "default/web")  # stopping, then gone: its last row again, as kubectl prints it
        while not any("Terminating" in line for line in lines) and time.monotonic() < deadline:
            time.sleep(0.05)
        count = len(lines)
        embedded.pod_actions("n0", View())  # stopped on the node: the record goes
        while len(lines) == count and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "Terminating" in lines[-1] and lines[-1].startswith("web "), lines
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
        reader.join(timeout=5)
        proc.stderr.close()
        proc.stdout.close()
    assert proc.returncode == 0, lines


def test_watch_waits_are_bounded(api) -> None:
    """At most ``max_watches`` long polls wait at once: more are refused at once, never queued on a thread each."""
    embedded, _, _ = api
    tmp = Path(embedded.store.path).parent
    server = ControlServer(embedded, socket_path=tmp / "w.sock", max_watches=1, watch_seconds=3)
    server.start()
    try:
        version = embedded.changes.version
        first = threading.Thread(target=lambda: client.request(f"unix://{server.socket_path}", "GET",
                                                               f"/watch/{version}"))
        first.start()
        time.sleep(0.3)
        started = time.monotonic()
        with pytest.raises(client.CtlError, match="1 watches are waiting already"):
            client.request(f"unix://{server.socket_path}", "GET", f"/watch/{version}")
        assert time.monotonic() - started < 1
        embedded.apply(docs(pod("web")))  # a change answers the waiting one at once
        first.join(timeout=2)
        assert not first.is_alive()
        answer = client.request(f"unix://{server.socket_path}", "GET", "/watch/12")  # not the current version
        assert answer["version"] == embedded.changes.version
    finally:
        server.stop()


# -- events ----------------------------------------------------------------------------------------------
def test_events_are_recorded_folded_bounded_and_kept_by_a_restart(tmp_path: Path) -> None:
    """Found: there was no ``get events``.  Scheduled, FailedScheduling, Started, BackOff, Killing, Preempted: kept
    in the store (a restart keeps them), repeats folded into one with a count, at most ``keep`` of them."""
    embedded, sched = cluster(tmp_path / "s", cpu=4)
    embedded.apply(docs(pod("web", cpu=1), pod("huge", cpu=8)))
    sched.run_once()
    web = uid(embedded, "default/web")
    embedded.pod_actions("n0", View(running(web)))
    backoff = ContainerRuntime("main", "waiting", 1, 1, 0, "CrashLoopBackOff", "back-off 10s restarting container main",
                               last_termination=ContainerTermination(1, "Error", "", 1, 2))
    embedded.pod_actions("n0", View(PodRuntime(web.uid, "default", "web", "Running", restarts=1, containers=[backoff])))
    embedded.pod_actions("n0", View(running(web, restarts=1, pid=101)))
    embedded.delete("Pod", "default/web")
    embedded.pod_actions("n0", View(running(web, restarts=1, pid=101)))
    embedded.pod_actions("n0", View(running(web, restarts=1, pid=101)))  # told again: recorded once
    sched.run_once()
    embedded.effects.flush()
    reasons = [(e["involvedObject"]["name"], e["reason"], e["count"]) for e in embedded.events.list()]
    assert ("web", "Scheduled", 1) in reasons and ("huge", "FailedScheduling", 1) in reasons, reasons
    # the second start repeats the first: folded into it (count 2, moved to the end), as Kubernetes' recorder does
    assert [(r, c) for n, r, c in reasons if n == "web"] == [("Scheduled", 1), ("BackOff", 1), ("Started", 2),
                                                             ("Killing", 1)], reasons
    assert ("n0", "NodeReady", 1) in reasons
    embedded.store.close()
    again = Store(embedded.store.path)
    from scheduler.cluster.cache import ClusterCache
    from scheduler.modes.embedded.mode import Embedded
    restarted = Embedded(ClusterCache(), again)
    restarted.load()
    assert [(e["involvedObject"]["name"], e["reason"], e["count"]) for e in restarted.events.list()] == reasons
    # folded and bounded
    from scheduler.modes.embedded.events import WARNING, Events, Ref
    events = Events(again, time.time, keep=3)
    events.load()
    for i in range(5):
        events.record(Ref("Pod", "default", f"p{i}", "u"), WARNING, "FailedScheduling", "no room")
    events.record(Ref("Pod", "default", "p3", "u"), WARNING, "FailedScheduling", "no room")
    events.flush()
    assert [(e["involvedObject"]["name"], e["count"]) for e in events.list()] == [("p2", 1), ("p4", 1), ("p3", 2)]
    # the controllers' Host.emit_event lands here too
    events.emit({"kind": "Job", "namespace": "default", "name": "train", "uid": "j1"}, WARNING, "PluginError", "x")
    assert events.list()[-1]["involvedObject"] == {"kind": "Job", "namespace": "default", "name": "train", "uid": "j1"}
    assert events.list()[-1]["source"] == {"component": "scoria-controllers"}
    events.flush()
    assert [e["involvedObject"]["name"] for _, e in again.events()] == ["p4", "p3", "train"]
    again.close()


def test_get_events_and_describe_show_them_as_kubectl_does(api) -> None:
    embedded, sched, server = api
    embedded.apply(docs(pod("huge", cpu=64), pod("web", cpu=1, namespace="shop")))
    sched.run_once()
    embedded.effects.flush()
    status, out, _ = ctl(server, "get", "events")
    header, *rows = out.splitlines()
    assert header.split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], out
    # the default namespace's: the pod that does not fit, and the node (Kubernetes keeps node events there too)
    assert [r.split()[1:4] for r in rows] == [["Normal", "NodeReady", "node/n0"],
                                              ["Warning", "FailedScheduling", "pod/huge"]], out
    status, out, _ = ctl(server, "get", "events", "-A")
    assert "NAMESPACE" in out and "shop" in out and "Scheduled" in out and "Successfully assigned shop/web to n0" in out
    status, out, _ = ctl(server, "describe", "pod", "huge")
    assert "Events:\n  Type     Reason            Age" in out and "FailedScheduling" in out, out


# -- describe --------------------------------------------------------------------------------------------------
def test_describe_every_kind_is_text_with_its_events(api) -> None:
    """Found: ``describe`` of a podgroup or node printed raw JSON."""
    embedded, sched, server = api
    embedded.apply(docs(queue("q"), podgroup("trio", minMember=3, queue="q"), priority_class("high", 1000),
                        *[pod(f"trio-{i}", cpu=4, group="trio", queue="q") for i in range(3)]))
    sched.run_once()
    sched.run_once()
    embedded.effects.flush()
    for argv, needles in [
        (("describe", "podgroup", "trio"), ["Name:             trio", "Min Member:", "Phase:", "Unschedulable"]),
        (("describe", "queue", "q"), ["Name:             q", "Weight:", "Allocated:", "Deserved now:"]),
        (("describe", "node", "n0"), ["Name:             n0", "Conditions:", "Allocatable:", "NodeReady"]),
        (("describe", "priorityclass", "high"), ["Name:", "Value:", "1000"]),
        (("describe", "pod", "trio-0"), ["Name:             trio-0", "Containers:", "FailedScheduling"]),
        (("describe", "queue", "default"), ["Name:             default", "always there"]),
    ]:
        status, out, err = ctl(server, *argv)
        assert status == 0, err
        assert not out.lstrip().startswith("{") and "Events:" in out, (argv, out)
        for needle in needles:
            assert needle in out, (argv, needle, out)


def test_describe_keeps_the_last_crash_after_a_restart(api) -> None:
    """Found: after a restart ``describe`` showed ``exit code: 0`` and lost the crash's exit 1."""
    embedded, sched, server = api
    embedded.apply(docs(pod("flaky", cpu=1)))
    sched.run_once()
    flaky = uid(embedded, "default/flaky")
    crash = ContainerTermination(1, "Error", "", int((time.time() - 5) * 1e9), int((time.time() - 4) * 1e9))
    embedded.pod_actions("n0", View(running(flaky, restarts=1, last=crash)))
    status, out, _ = ctl(server, "describe", "pod", "flaky")
    state = out[out.index("    State:"):out.index("Conditions:")]
    assert "State:          Running" in state and "Last State:     Terminated" in state, out
    assert "Reason:       Error" in state and "Exit Code:    1" in state and "Restart Count:  1" in state, out
    _, out, _ = ctl(server, "get", "pods")
    assert "1 (4s ago)" in out or "1 (5s ago)" in out, out  # kubectl's RESTARTS with when the last one was
    obj = json.loads(ctl(server, "get", "pod", "flaky", "-o", "json")[1])
    assert obj["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 1, obj


# -- top -------------------------------------------------------------------------------------------------------
def test_top_pods(api) -> None:
    from scheduler.api.loader import node_report_from_doc
    from tests.support.builders import report

    embedded, sched, server = api
    embedded.apply(docs(pod("web", cpu=1), pod("api", cpu=1, namespace="shop")))
    sched.run_once()
    ids = {p.name: p.uid for p in embedded.cache.pods.values()}
    _, r = node_report_from_doc(report("n0", pods=[{"uid": ids["web"], "cpu": 0.25, "memory": "64Mi"},
                                           {"uid": ids["api"], "cpu": 1.5, "memory": "1Gi"}]), "test")
    embedded.cache.accept_report(r, time.time(), register=True, capacity_key="n0")
    status, out, _ = ctl(server, "top", "pods")
    assert out.splitlines() == ["NAME  CPU(cores)  MEMORY(bytes)", "web   250m        64Mi"], out
    _, out, _ = ctl(server, "top", "pods", "-A")
    assert "shop       api   1500m       1024Mi" in out, out


def test_human_durations_as_kubectl_prints_ages() -> None:
    cases = [(0, "0s"), (59, "59s"), (119, "119s"), (125, "2m5s"), (600, "10m"), (3 * 3600 + 300, "3h5m"),
             (9 * 3600, "9h"), (50 * 3600, "2d2h"), (10 * 86400, "10d"), (800 * 86400, "2y70d")]
    assert [(s, human_duration(s)) for s, _ in cases] == cases


# -- logs ----------------------------------------------------------------------------------------------------
def test_logs_previous_tail_and_a_pod_that_never_started(api) -> None:
    """Found: restarts were appended to one log with no separator, and a pod that never started gave a raw file
    error.  Each run has its own file (the runtime keeps the one before as ``<container>.previous.log``)."""
    embedded, sched, server = api
    embedded.apply(docs(pod("nowhere", nodeSelector={"zone": "none"}), pod("web", cpu=1)))
    sched.run_once()
    status, out, err = ctl(server, "logs", "nowhere")
    assert status == 1 and out == "" and err.count("\n") == 1, err
    assert err.startswith("error: container 'main' in pod default/nowhere is waiting to start: not scheduled yet ("), err
    web = uid(embedded, "default/web")
    status, _, err = ctl(server, "logs", "web")
    assert status == 1 and "is waiting to start: ContainerCreating (bound to n0" in err, err
    never = ContainerRuntime("main", "waiting", 127, 0, 0, "CrashLoopBackOff", "back-off 10s restarting container main",
                             last_termination=ContainerTermination(127, "StartError", "cannot start nope: no such file"))
    embedded.pod_actions("n0", View(PodRuntime(web.uid, "default", "web", "Running", containers=[never])))
    status, out, err = ctl(server, "logs", "web")
    assert status == 1 and err == "error: container 'main' in pod default/web has not written a log: it never " \
                                  "started (StartError: cannot start nope: no such file)\n", err
    embedded.pod_actions("n0", View(running(web)))  # it runs, yet its log is not where serve was told to look
    status, _, err = ctl(server, "logs", "web")
    assert status == 1 and "has run, but there is no log of it in" in err and "--agent-state" in err, err
    folder = embedded.pod_log_dir("default", "web", web.uid)
    folder.mkdir(parents=True)
    (folder / "main.log").write_text("run 2: a\nrun 2: b\n")
    assert ctl(server, "logs", "web")[1] == "run 2: a\nrun 2: b\n"
    assert ctl(server, "logs", "web", "--tail", "1")[1] == "run 2: b\n"
    status, _, err = ctl(server, "logs", "web", "--previous")
    assert status == 1 and "previous terminated container 'main' in pod default/web not found" in err, err
    (folder / "main.previous.log").write_text("run 1\n")
    assert ctl(server, "logs", "web", "-p") == (0, "run 1\n", "")


def test_logs_f_follows_the_run_until_the_container_restarts(api) -> None:
    embedded, sched, server = api
    embedded.apply(docs(pod("web", cpu=1)))
    sched.run_once()
    web = uid(embedded, "default/web")
    embedded.pod_actions("n0", View(running(web)))
    folder = embedded.pod_log_dir("default", "web", web.uid)
    folder.mkdir(parents=True)
    log = folder / "main.log"
    log.write_text("one\n")
    proc = subprocess.Popen([sys.executable, "-m", "scheduler", "logs", "web", "-f", "--server",
                             f"unix://{server.socket_path}"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert proc.stdout.readline() == "one\n"
        with log.open("a") as f:
            f.write("two\n")
        assert proc.stdout.readline() == "two\n"
        with log.open("a") as f:
            f.write("three, its last words\n")
        embedded.pod_actions("n0", View(running(web, restarts=1, pid=101)))  # it restarted: this run is over
        assert proc.wait(timeout=10) == 0
        assert proc.stdout.read() == "three, its last words\n"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def test_a_last_state_is_recorded_only_when_the_wire_report_carries_one(api) -> None:
    """The intake hands embedded mode the wire message itself, whose unset message fields read as empty ones:
    a container that never restarted must not show a Last State of exit code 0."""
    from proto.codec import report_to_pb
    from proto.model import Identity, NodeReport

    embedded, sched, server = api
    embedded.apply(docs(pod("web", cpu=1), pod("flaky", cpu=1)))
    sched.run_once()
    web, flaky = uid(embedded, "default/web"), uid(embedded, "default/flaky")
    crash = ContainerTermination(1, "Error", "", 10**18, 10**18 + 10**9)
    wire = report_to_pb(NodeReport(Identity("n0"), runtime=[running(web), running(flaky, restarts=1, last=crash)]))
    embedded.pod_actions("n0", wire)
    states = {key: embedded.store.get("Pod", key).status["runtime"]["containers"][0]
              for key in ("default/web", "default/flaky")}
    assert "lastState" not in states["default/web"], states
    assert states["default/flaky"]["lastState"] == {"exitCode": 1, "reason": "Error", "message": "",
                                                    "startedAt": "2001-09-09T01:46:40Z",
                                                    "finishedAt": "2001-09-09T01:46:41Z"}, states
    assert "Last State" not in ctl(server, "describe", "pod", "web")[1]


def test_namespaces_are_listed_and_described_as_kubectl_does(api) -> None:
    embedded, _, server = api
    embedded.apply(docs({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": {"team": "a"}}}))
    status, out, err = ctl(server, "get", "ns", "-o", "wide")
    assert status == 0, err
    header, *rows = out.splitlines()
    assert header.split() == ["NAME", "STATUS", "AGE", "LABELS"] and rows[0].split()[:2] == ["shop", "Active"], out
    assert "team=a" in rows[0]
    assert ctl(server, "get", "namespaces", "-o", "name")[1] == "namespace/shop\n"
    _, out, _ = ctl(server, "describe", "namespace", "shop")
    assert "Name:             shop" in out and "team=a" in out and "Status:           Active" in out, out


def test_a_run_that_came_and_went_between_two_reports_is_started_too(api) -> None:
    """A container that exits within a report interval is never seen running; its start still counts (the
    kubelet records Started for every run), once, and not for a run that could not start."""
    embedded, sched, server = api
    embedded.apply(docs(pod("quick", cpu=1), pod("broken", cpu=1)))
    sched.run_once()
    quick, broken = uid(embedded, "default/quick"), uid(embedded, "default/broken")

    def backing_off(p, started: str, reason: str = "Error", restarts: int = 0) -> PodRuntime:
        c = ContainerRuntime("main", "waiting", 1, restarts, 0, "CrashLoopBackOff", "back-off", started_ns=int(
            datetime.fromisoformat(started).timestamp() * 1e9), last_termination=ContainerTermination(1, reason))
        return PodRuntime(p.uid, p.namespace, p.name, "Running", restarts=restarts, containers=[c])

    for _ in range(2):  # the same report twice: one event
        embedded.pod_actions("n0", View(backing_off(quick, "2026-01-01T12:00:00+00:00"),
                                        backing_off(broken, "2026-01-01T12:00:00+00:00", "StartError")))
    embedded.pod_actions("n0", View(backing_off(quick, "2026-01-01T12:00:10+00:00", restarts=1)))  # ran again
    reasons = [(e["involvedObject"]["name"], e["reason"], e["count"]) for e in embedded.events.list()
               if e["involvedObject"]["kind"] == "Pod" and e["reason"] != "Scheduled"]
    assert ("quick", "Started", 2) in reasons and not [r for r in reasons if r[:2] == ("broken", "Started")], reasons
    assert ("broken", "Failed", 1) in reasons and ("broken", "BackOff", 1) in reasons, reasons
