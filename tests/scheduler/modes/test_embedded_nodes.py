"""Node lifecycle in embedded mode (issue 19 item 1): a node whose agent stops reporting becomes Unknown, takes
no new pod, its pods turn Unknown and are evicted (gone) after their toleration; a pod deleted on a gone node
is gone at once; ``delete node`` works on what ``get nodes`` lists; an agent that runs no pods (``--dry-run``)
never makes a schedulable node.  Kubernetes' own cases for the toleration rules run as data
(tests/fixtures/kube-controllers/nodelifecycle)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from hack.lib.processes import ROOT, stop
from proto.model import PodActionKind
from scheduler.api.manifests import _Fields, _tolerations
from scheduler.cluster.cache import ClusterCache
from scheduler.modes.embedded.lifecycle import (
    LifecycleConfig,
    default_tolerations,
    min_toleration_seconds,
)
from scheduler.modes.embedded.mode import Conflict, Embedded
from scheduler.modes.embedded.store import Store
from tests.scheduler.modes.test_embedded import AT, View, cluster, docs, running
from tests.scheduler.modes.test_embedded_security import Serve, ctl
from tests.support.builders import pod, report

FIXTURES = ROOT / "tests" / "fixtures" / "kube-controllers" / "nodelifecycle"
T0 = AT.timestamp()  # the reports of cluster()'s nodes arrived then
GRACE = 40.0
LOST = T0 + GRACE  # when a silent node's taints are added


def tolerations(raw: list) -> tuple:
    return _tolerations(_Fields("test", "Pod"), {"tolerations": raw})


# -- Kubernetes' own cases --------------------------------------------------------------------------------
def _cases(name: str) -> list[dict]:
    return yaml.safe_load((FIXTURES / name).read_text())["cases"]


@pytest.mark.parametrize("case", _cases("min-toleration-time.yaml"), ids=lambda c: str(c["tolerations"]))
def test_kube_min_toleration_time(case: dict) -> None:
    used = tolerations([{"operator": "Exists", **({"tolerationSeconds": s} if s is not None else {})}
                        for s in case["tolerations"]])
    assert min_toleration_seconds(list(used)) == case["expected"]


@pytest.mark.parametrize("case", _cases("default-toleration-seconds.yaml"), ids=lambda c: c["case"][:60])
def test_kube_default_toleration_seconds(case: dict) -> None:
    got = default_tolerations(tolerations(case["requested"]), LifecycleConfig())
    assert got == tolerations(case["expected"])


# -- a node whose agent stops reporting ----------------------------------------------------------------------
def lost_cluster(tmp_path: Path, **config: float):
    """One node, n0, with pods on it; then its agent falls silent."""
    embedded, sched = cluster(tmp_path)
    embedded.nodes.config = LifecycleConfig(grace=GRACE, **config)
    return embedded, sched


def test_a_silent_node_becomes_unknown_takes_no_new_pod_and_its_pods_turn_unknown(tmp_path: Path) -> None:
    """Found: with its agent gone, new pods still bound to the node and showed Running with no process."""
    embedded, sched = lost_cluster(tmp_path)
    embedded.apply(docs(pod("web", cpu=1)))
    sched.run_once()
    web = next(iter(embedded.cache.pods.values()))
    assert web.node_name == "n0" and embedded.nodes.condition("n0").status == "Ready"
    embedded.nodes.tick(T0 + GRACE - 1)  # late, not yet lost
    assert embedded.cache.nodes["n0"].ready and web.phase == "Running"
    embedded.nodes.tick(LOST + 1)
    cond = embedded.nodes.condition("n0")
    assert (cond.status, cond.reason) == ("Unknown", "NodeStatusUnknown") and cond.since == LOST
    node = embedded.cache.nodes["n0"]
    assert not node.ready and {(t.key, t.effect) for t in node.taints} == {
        ("node.kubernetes.io/unreachable", "NoSchedule"), ("node.kubernetes.io/unreachable", "NoExecute")}
    assert web.phase == "Unknown" and web.reason.startswith("NodeLost: node n0 is Unknown: its agent has not reported")
    stored = embedded.store.get("Pod", "default/web").status
    assert stored["phase"] == "Unknown" and stored["reason"] == web.reason
    embedded.apply(docs(pod("late", cpu=1)))
    sched.run_once()
    sched.run_once()
    late = next(p for p in embedded.cache.pods.values() if p.name == "late")
    assert not late.node_name
    assert late.reason == "0/1 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }"
    assert web.phase == "Unknown" and web.reason.startswith("NodeLost")  # a cycle does not wipe why


def test_a_pod_that_tolerates_the_taint_is_still_not_placed_on_a_node_that_is_not_ready(tmp_path: Path) -> None:
    embedded, sched = lost_cluster(tmp_path)
    embedded.nodes.tick(LOST + 1)
    embedded.apply(docs(pod("bold", cpu=1, tolerations=[{"operator": "Exists"}])))
    sched.run_once()
    assert not next(iter(embedded.cache.pods.values())).node_name  # as Volcano: nodes not Ready are left out


def test_its_pods_are_evicted_after_their_toleration_and_are_then_gone(tmp_path: Path) -> None:
    embedded, sched = lost_cluster(tmp_path, unreachable_toleration=300)
    unreachable = "node.kubernetes.io/unreachable"
    embedded.apply(docs(
        pod("plain", cpu="100m"),  # the default toleration: 300 s
        pod("brief", cpu="100m", tolerations=[{"key": unreachable, "operator": "Exists", "effect": "NoExecute",
                                               "tolerationSeconds": 60}]),
        pod("stays", cpu="100m", tolerations=[{"key": unreachable, "operator": "Exists", "effect": "NoExecute"}]),
        pod("other", cpu="100m", tolerations=[{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                               "effect": "NoExecute", "tolerationSeconds": 5}]),  # not this taint
    ))
    sched.run_once()
    assert all(p.node_name == "n0" for p in embedded.cache.pods.values())

    def left() -> list[str]:
        return sorted(p.name for p in embedded.cache.pods.values())

    embedded.nodes.tick(LOST + 59)
    assert left() == ["brief", "other", "plain", "stays"]
    embedded.nodes.tick(LOST + 61)
    assert left() == ["other", "plain", "stays"] and embedded.store.get("Pod", "default/brief") is None
    embedded.nodes.tick(LOST + 299)
    assert left() == ["other", "plain", "stays"]
    embedded.nodes.tick(LOST + 301)
    assert left() == ["stays"]  # tolerates the taint for ever: Unknown, and kept
    assert next(iter(embedded.cache.pods.values())).phase == "Unknown"
    # the node comes back: its agent reports the one pod it still runs, and is told to stop the others
    stays = next(iter(embedded.cache.pods.values()))
    _report(embedded, "n0", LOST + 400)
    embedded.nodes.tick(LOST + 400)
    assert embedded.nodes.condition("n0").status == "Ready" and embedded.cache.nodes["n0"].ready
    assert not embedded.cache.nodes["n0"].taints and stays.phase == "Running" and stays.reason is None
    gone = running(stays).__class__("gone-uid", "default", "plain", "Running")
    actions = embedded.pod_actions("n0", View(running(stays), gone))
    assert [(a.kind, a.pod_uid) for a in actions] == [(PodActionKind.STOP, "gone-uid")]


def test_a_configured_toleration_period_is_honoured(tmp_path: Path) -> None:
    embedded, sched = lost_cluster(tmp_path, unreachable_toleration=30)
    embedded.apply(docs(pod("plain", cpu="100m")))
    sched.run_once()
    embedded.nodes.tick(LOST + 29)
    assert embedded.cache.pods
    embedded.nodes.tick(LOST + 31)
    assert not embedded.cache.pods


def test_deleting_a_pod_on_a_gone_node_completes(tmp_path: Path) -> None:
    """Found: ``delete pod`` of a pod on a node whose agent had gone stayed 'deleting' for ever, even after a
    scheduler restart."""
    embedded, sched = lost_cluster(tmp_path)
    embedded.apply(docs(pod("before", cpu="100m"), pod("after", cpu="100m")))
    sched.run_once()
    assert embedded.delete("Pod", "default/before") == "deleting"  # the node is Ready: its agent stops it
    embedded.nodes.tick(LOST + 1)  # ... but it has gone: nothing can confirm the stop
    assert embedded.store.get("Pod", "default/before") is None
    assert embedded.delete("Pod", "default/after") == "deleted"  # on a gone node: at once
    assert not embedded.cache.pods


def test_a_deletion_left_pending_completes_after_a_scheduler_restart(tmp_path: Path) -> None:
    embedded, sched = lost_cluster(tmp_path)
    embedded.apply(docs(pod("web", cpu="100m")))
    sched.run_once()
    assert embedded.delete("Pod", "default/web") == "deleting"
    embedded.store.close()
    cache = ClusterCache()
    again = Embedded(cache, Store(tmp_path / "store.sqlite"), clock=lambda: T0 + 1000,
                     lifecycle=LifecycleConfig(grace=GRACE))
    again.load()
    again.nodes.tick(T0 + 1000)  # the node is remembered, its agent not heard yet: left alone for a grace period
    cond = again.nodes.condition("n0")
    assert (cond.status, cond.reason) == ("Unknown", "NodeStatusNeverUpdated") and not cache.nodes["n0"].ready
    assert again.store.get("Pod", "default/web") is not None
    again.nodes.tick(T0 + 1000 + GRACE + 1)
    assert again.store.get("Pod", "default/web") is None and not cache.pods


def test_delete_node_deletes_what_get_nodes_lists(tmp_path: Path) -> None:
    """Found: ``delete node X`` answered 'not found' while ``get nodes`` listed X."""
    from scheduler.modes.embedded.server import ControlServer

    embedded, sched = lost_cluster(tmp_path / "s")
    embedded.apply(docs(pod("web", cpu="100m")))
    sched.run_once()
    embedded.nodes.tick(T0 + 1)
    server = ControlServer(embedded, socket_path=tmp_path / "c.sock")
    server.start()
    try:
        api = f"unix://{server.socket_path}"
        status, out, _ = ctl(api, "get", "nodes")
        assert status == 0 and "n0" in out
        # alive: the node goes, its pod stays, and the agent's next report registers the node again
        assert ctl(api, "delete", "node", "n0") == (0, "node n0 deleted\n", "")
        assert embedded.store.get("Node", "n0") is None and "n0" not in embedded.cache.nodes
        assert ctl(api, "get", "nodes")[1].count("n0") == 0 and embedded.cache.pods
        _report(embedded, "n0", T0 + 2)
        embedded.nodes.tick(T0 + 2)
        assert embedded.store.get("Node", "n0") is not None and embedded.cache.nodes["n0"].ready
        # gone: the node and its pods go together
        embedded.nodes.tick(T0 + 2 + GRACE + 1)
        assert ctl(api, "delete", "node", "n0") == (0, "node n0 deleted (and its 1 pod(s))\n", "")
        assert not embedded.cache.pods and embedded.store.get("Pod", "default/web") is None
        status, _, err = ctl(api, "delete", "node", "n0")
        assert status == 1 and "node n0 not found" in err
    finally:
        server.stop()


def test_pods_of_a_node_that_stays_deleted_are_deleted_after_the_grace_period(tmp_path: Path) -> None:
    embedded, sched = lost_cluster(tmp_path)
    embedded.apply(docs(pod("web", cpu="100m")))
    sched.run_once()
    embedded.delete("Node", "n0")  # its agent was alive: its pod is kept for its return
    embedded.nodes.tick(T0 + 10)
    assert embedded.cache.pods
    embedded.nodes.tick(T0 + 11 + GRACE)
    assert not embedded.cache.pods  # it did not come back: the orphan goes, as Kubernetes' pod GC does


def test_queue_default_is_listed_and_cannot_be_deleted(tmp_path: Path) -> None:
    """Found: the README says queue default always exists, but ``get queues`` did not list it."""
    from scheduler.modes.embedded.server import ControlServer

    embedded, _ = cluster(tmp_path / "s")
    server = ControlServer(embedded, socket_path=tmp_path / "c.sock")
    server.start()
    try:
        api = f"unix://{server.socket_path}"
        status, out, _ = ctl(api, "get", "queues")
        assert status == 0 and out.splitlines()[1].split()[0] == "default", out
        assert ctl(api, "get", "queue", "default")[0] == 0
        status, _, err = ctl(api, "delete", "queue", "default")
        assert status == 1 and "queue default always exists" in err, err
    finally:
        server.stop()
    with pytest.raises(Conflict):
        embedded.delete("Queue", "default")


def _report(embedded: Embedded, node: str, at: float, *, runs_pods: bool = True) -> None:
    from scheduler.api.loader import node_report_from_doc

    _, r = node_report_from_doc(report(node, zones=[8]), "test")
    r.identity.sample_time_ns = int(at * 1e9)
    r.identity.runs_pods = runs_pods
    embedded.cache.accept_report(r, at, register=True, capacity_key=node)


# -- an agent that runs no pods ------------------------------------------------------------------------------
def test_an_agent_that_runs_no_pods_never_makes_a_schedulable_node(tmp_path: Path) -> None:
    """Found: ``agent run --dry-run --node-name X`` registered X, and new pods bound to it showed Running with
    no process."""
    cache = ClusterCache()
    embedded = Embedded(cache, Store(tmp_path / "store.sqlite"), clock=lambda: T0)
    from scheduler.cycle import Scheduler

    sched = Scheduler(cache, effects=embedded.effects)
    _report(embedded, "observer", T0, runs_pods=False)
    assert not cache.nodes["observer"].ready  # not even before node lifecycle has looked at it
    embedded.apply(docs(pod("web", cpu="100m")))
    sched.run_once()
    web = next(iter(cache.pods.values()))
    assert not web.node_name
    embedded.nodes.tick(T0 + 1)
    cond = embedded.nodes.condition("observer")
    assert (cond.status, cond.reason) == ("NotReady", "AgentNotRunningPods")
    assert {t.key for t in cache.nodes["observer"].taints} == {"node.kubernetes.io/not-ready"}
    _report(embedded, "observer", T0 + 2, runs_pods=False)  # a report (a changed allocatable) keeps it so
    sched.run_once()
    assert not web.node_name and web.reason == (
        "0/1 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }")


def test_a_dry_run_agent_is_listed_not_ready_gets_no_pod_and_can_be_deleted(tmp_path: Path) -> None:
    """The found case end to end: the real ``serve --embedded`` and a real ``agent run --dry-run``."""
    state = tmp_path / "state"
    serve = Serve(state, "--node-monitor-grace-period", "2")
    agent = subprocess.Popen(
        [sys.executable, "-m", "agent", "run", "--dry-run", "--node-name", "observer", "--pods-from", "none",
         "--no-devices", "--metrics-port", "0", "--interval", "0.3", "--scheduler", serve.agents],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        status, out = _wait_for(serve, lambda out: "observer" in out and "NotReady" in out, "get", "nodes")
        assert "NotReady" in out, out
        web = tmp_path / "web.yaml"
        web.write_text(yaml.safe_dump(pod("web", cpu="100m")))
        assert ctl(serve.server, "apply", "-f", str(web))[0] == 0
        time.sleep(2)  # a few cycles
        _, out = _wait_for(serve, lambda out: "node.kubernetes.io/not-ready" in out, "get", "pods", "-o", "json")
        (web_pod,) = json.loads(out)["items"]  # kubectl's shape: a List of pods
        assert not web_pod["spec"].get("nodeName"), web_pod
        assert web_pod["status"]["conditions"] == [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/1 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }"}]
        stop(agent, signal.SIGTERM)
        _wait_for(serve, lambda out: "Unknown" in out, "get", "nodes")
        assert ctl(serve.server, "delete", "node", "observer")[1] == "node observer deleted\n"
        assert "observer" not in ctl(serve.server, "get", "nodes")[1]
    finally:
        stop(agent, signal.SIGKILL)
        if agent.stderr is not None:
            agent.stderr.close()
        serve.close()


def _wait_for(serve: Serve, ok, *argv: str, timeout: float = 20) -> tuple[int, str]:
    deadline = time.monotonic() + timeout
    while True:
        status, out, err = ctl(serve.server, *argv)
        if status == 0 and ok(out):
            return status, out
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out: {argv}: {status} {out} {err}")
        time.sleep(0.2)
